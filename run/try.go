package run

// A try (rig try): a draft design's arms on a few tasks, now, through the
// one trial runner (trial.go) with the same sandboxes, runtimes and
// governor's watch as a study, into a sink of its own that counts nothing.
// Its runtimes come from a TryPool (trypool.go), which keeps them warm for
// the next try.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"rig/analysis"
	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/layout"
	"rig/preflight"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// DefaultTryTasks is how many tasks of each job kind a try runs when it is
// not told: enough to see every arm answer a few templates, few enough to
// answer in seconds on a warm runtime.
const DefaultTryTasks = 3

// TryWall is the wall cap of a harness trial whose design derives it
// (harness_caps.wall "auto"): a try runs before any validation run has
// measured this machine, so the wall is this fixed one.
const TryWall = 10 * time.Minute

// ErrHoldoutTask is a task named for a try that is a hold-out task.
var ErrHoldoutTask = errors.New("hold-out task")

// TrySpec is one try of a draft design.
type TrySpec struct {
	ID string
	// Snapshot is the draft resolved to digests as it is now
	// (studies.Freeze without a registration): nothing was approved.
	Snapshot *studies.Snapshot
	// Dir is the try's folder: its generation records.
	Dir string
	// Tasks are the task ids to run, by job kind (SelectTryTasks).
	Tasks map[string][]string
	// Arms are the arms to run; every arm when empty.
	Arms []string
	// Pool keeps the runtimes warm between tries; nil starts and stops
	// each as a study does.
	Pool *TryPool
	// Progress, when set, is told what the try has so far each time an
	// arm's runtime is ready and each time a trial ends (rig ui's matrix
	// fills in from it). It gets a copy it may keep.
	Progress func(TryResult)
}

// TryTrial is one arm's answer to one task in a try.
type TryTrial struct {
	Arm          string  `json:"arm"`
	JobKind      string  `json:"job_kind"`
	Task         string  `json:"task"`
	Outcome      string  `json:"outcome"`
	Graded       bool    `json:"graded"`
	Pass         bool    `json:"pass"`
	Score        float64 `json:"score"`
	Prompt       string  `json:"prompt,omitempty"`
	Output       string  `json:"output,omitempty"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	WallMS       int64   `json:"wall_ms"`
	Capped       bool    `json:"capped,omitempty"`
	// OffTask says why the output is off task (it repeats the prompt, or
	// it is empty); "" when it is not.
	OffTask string `json:"off_task,omitempty"`
	Detail  string `json:"detail,omitempty"`
	// Grader is the judge ("judge:ARM") when a judge arm graded the
	// trial; "" for the bank's grader.
	Grader string `json:"grader,omitempty"`
}

// TryRuntime is the runtime one arm of a try ran on.
type TryRuntime struct {
	Arm     string `json:"arm"`
	Runtime string `json:"runtime"`
	PID     int    `json:"pid"`
	// Reused is true when the runtime was kept warm from an earlier try.
	Reused bool `json:"reused"`
	// Build is the runtime binary's digest, the model's the model file's.
	Build string `json:"build"`
	Model string `json:"model"`
	// ReadyMS is how long the arm waited for its runtime: a start, or
	// nothing for a warm one.
	ReadyMS int64 `json:"ready_ms"`
}

// TryResult is what a try ran.
type TryResult struct {
	Trials   []TryTrial   `json:"trials"`
	Runtimes []TryRuntime `json:"runtimes"`
}

// SelectTryTasks picks the tasks a try runs from each job kind's bank as
// the snapshot froze it: the named ones (each must be in a bank the arms
// run, and no hold-out), else n of each job kind (DefaultTryTasks when n is
// 0) taken template by template, so that the same tasks come back on every
// try of the design and an edit is compared on the same inputs. Hold-out
// tasks are never tried: a try's outputs are seen by the person editing the
// design.
func SelectTryTasks(snap *studies.Snapshot, n int, named []string) (map[string][]string, error) {
	if n <= 0 {
		n = DefaultTryTasks
	}
	out := map[string][]string{}
	found := map[string]bool{}
	for _, fb := range snap.Banks {
		b, err := tasks.LoadBank(fb.Path)
		if err != nil {
			return nil, err
		}
		var open []tasks.Task
		for _, t := range b.Tasks {
			if slices.Contains(named, t.ID) && t.Holdout {
				return nil, fmt.Errorf("--task %s: %w in %s: a try never shows hold-out tasks (name another task)", t.ID, ErrHoldoutTask, fb.Path)
			}
			if !t.Holdout && slices.Contains(fb.Tasks, t.ID) {
				open = append(open, t)
			}
		}
		if len(named) > 0 {
			for _, t := range open {
				if slices.Contains(named, t.ID) {
					out[fb.JobKind] = append(out[fb.JobKind], t.ID)
					found[t.ID] = true
				}
			}
			continue
		}
		if ids := studies.SampleByTemplate(open, n); len(ids) > 0 {
			out[fb.JobKind] = ids
		}
	}
	for _, id := range named {
		if !found[id] {
			return nil, fmt.Errorf("--task %s: no job kind's task bank has it among the tasks the design runs (rig tasks lint BANK lists a bank's tasks)", id)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the design's banks have no task a try may run (every task is hold-out or excluded)")
	}
	return out, nil
}

// Try runs every chosen arm on the chosen tasks of the job kinds it runs,
// one arm after the other, and says on w what each trial gave as it ends.
// Nothing it does is counted: its receipts stay in its result and its
// generation rows in spec.Dir.
func Try(ctx context.Context, env Env, spec TrySpec, w io.Writer) (*TryResult, error) {
	d, err := spec.Snapshot.DesignValue()
	if err != nil {
		return nil, err
	}
	walls := map[string]studies.WallDerivation{}
	for _, jk := range d.AutoWallJobKinds() {
		walls[jk] = studies.WallDerivation{JobKind: jk, Wall: TryWall, Why: "a try runs before any validation run: a fixed wall"}
	}
	records := layout.Records(spec.Dir)
	x, err := newTrialRunner(env, d.Name, spec.Snapshot, receipts.Execution{ID: spec.ID}, records.Work(), walls)
	if err != nil {
		return nil, err
	}
	x.pool = spec.Pool
	sink := &trySink{records: records, designHash: spec.Snapshot.DesignHash, id: spec.ID, writers: map[string]*genrecord.Writer{}, got: map[string]receipts.Receipt{}}
	defer sink.close()
	res := &TryResult{}
	var keys []studies.TrialKey
	for _, arm := range d.Arms {
		if arm.Role == studies.RoleJudge || (len(spec.Arms) > 0 && !slices.Contains(spec.Arms, arm.Name)) {
			continue
		}
		began := time.Now()
		ran := false
		for _, jk := range d.JobKinds {
			if !arm.RunsJobKind(jk.Name) {
				continue
			}
			for _, id := range spec.Tasks[jk.Name] {
				key := studies.TrialKey{Arm: arm.Name, JobKind: jk.Name, Task: id, Repeat: 1}
				if !ran {
					// The arm's runtime: warm from the pool or started now.
					_, started, err := x.keepArm(ctx, sink, arm, key)
					if err != nil {
						x.release(ctx)
						return res, err
					}
					res.Runtimes = append(res.Runtimes, tryRuntime(arm, x.cur, time.Since(began)))
					spec.progress(res)
					ran = true
					if !started {
						// It failed at the card: that is the arm's answer.
						keys = append(keys, key)
						break
					}
				}
				if _, err := x.Trial(ctx, sink, key); err != nil {
					x.release(ctx)
					return res, err
				}
				keys = append(keys, key)
				if rec, ok := sink.got[key.String()]; ok {
					fmt.Fprintf(w, "  %-28s %-24s %s\n", arm.Name, id, rec.Outcome)
				}
				if spec.Progress != nil {
					res.Trials = append(res.Trials, awaitJudge(d, tryTrials(records, []studies.TrialKey{key}, sink.got, x.banks))...)
					spec.progress(res)
				}
			}
		}
		x.release(ctx)
	}
	sink.close()
	res.Trials = tryTrials(records, keys, sink.got, x.banks)
	if judged(d, spec.Tasks) {
		grades, err := tryJudge(ctx, x, spec, sink.got)
		if err != nil {
			return res, fmt.Errorf("the judge's grading: %w", err)
		}
		judgeGrades(d, res.Trials, grades)
	}
	return res, nil
}

// progress tells spec.Progress what res holds now, as a copy.
func (spec TrySpec) progress(res *TryResult) {
	if spec.Progress == nil {
		return
	}
	spec.Progress(TryResult{Trials: slices.Clone(res.Trials), Runtimes: slices.Clone(res.Runtimes)})
}

// startPooled is startArm in a try: the runtime comes from the pool, which
// makes a simulated card's reservation itself, since a warm runtime keeps
// its reservation for as long as it lives.
func (x *trialRunner) startPooled(ctx context.Context, arm studies.Arm, build runtimes.Build, cfg runtimes.Config, card studies.CardProfile) (runtimes.Runtime, error) {
	var reserve uint64
	switch {
	case !card.Simulated || card.MemoryMiB <= 0:
	case arm.Pins.Offload.OnCard():
		cfg.CardBudget = studies.CardBytes(x.design, arm)
	default:
		reserve = uint64(preflight.Size(card.MemoryMiB) * preflight.MiB)
	}
	return x.pool.start(ctx, build, cfg, reserve, x.env.launch)
}

// tryRuntime describes the runtime an arm got.
func tryRuntime(arm studies.Arm, rt runtimes.Runtime, waited time.Duration) TryRuntime {
	out := TryRuntime{Arm: arm.Name, Runtime: string(arm.Runtime), ReadyMS: waited.Milliseconds()}
	if rt == nil {
		return out
	}
	out.PID = runtimePID(rt)
	p := rt.Pins()
	out.Build, out.Model = p.BinarySHA256, p.ModelSHA256
	if pr, ok := rt.(*pooled); ok {
		out.Reused = pr.reused
	}
	return out
}

// tryTrials puts each trial's task prompt (from its bank) and output (read
// back from the generation records) beside its receipt.
func tryTrials(records layout.Records, keys []studies.TrialKey, got map[string]receipts.Receipt, banks map[string]*tasks.Bank) []TryTrial {
	rows := map[string][]genrecord.Row{}
	var out []TryTrial
	for _, k := range keys {
		rec, ok := got[k.String()]
		if !ok {
			continue
		}
		if _, read := rows[k.Arm]; !read {
			_, rs, _ := genrecord.ReadAll(records.Generation(k.Arm)) // none: no call was made
			rows[k.Arm] = rs
		}
		t := TryTrial{Arm: k.Arm, JobKind: k.JobKind, Task: k.Task, Outcome: string(rec.Outcome), InputTokens: rec.InputTokens,
			OutputTokens: rec.OutputTokens, WallMS: rec.WallMS, Capped: rec.Outcome == receipts.Capped || rec.Truncated,
			// A try has no rerun: the receipt's advice is a study's.
			Detail: strings.Replace(rec.Detail, " (rig study rerun retries it)", "", 1)}
		if rec.Grade != nil {
			t.Graded, t.Pass, t.Score = true, rec.Grade.Pass, rec.Grade.Score
		}
		if b := banks[k.JobKind]; b != nil {
			if task, ok := b.Task(k.Task); ok {
				t.Prompt = task.Input.Prompt
			}
		}
		prefix := k.CallID(rec.Attempt)
		for _, r := range rows[k.Arm] {
			if r.RowID == prefix || strings.HasPrefix(r.RowID, prefix+"/") {
				t.Output = r.Text // a harness's last call is its answer
			}
		}
		t.OffTask = offTask(t)
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].JobKind != out[j].JobKind {
			return out[i].JobKind < out[j].JobKind
		}
		return out[i].Task < out[j].Task
	})
	return out
}

// offTask says why an output does not answer the task: it repeats the
// prompt (a base model given a chat template copies it and carries on), or
// there is no answer at all. A wrong answer is on task.
func offTask(t TryTrial) string {
	switch {
	case t.Outcome != string(receipts.Scored) && t.Outcome != string(receipts.Capped):
		return ""
	case strings.TrimSpace(t.Output) == "":
		return "no answer"
	case analysis.EchoesPrompt(t.Prompt, t.Output):
		return "repeats the prompt"
	}
	return ""
}

// trySink is a try's sink: one attempt per trial, the receipts kept in
// memory for the try's record, the rows in the try's folder.
type trySink struct {
	records    layout.Records
	designHash string
	id         string
	writers    map[string]*genrecord.Writer
	got        map[string]receipts.Receipt
}

func (s *trySink) NextAttempt(context.Context, receipts.TrialKey) (int, int, error) { return 1, 0, nil }

func (s *trySink) Records() layout.Records { return s.records }

func (s *trySink) Writer(arm string, rp runtimes.Pins) (*genrecord.Writer, error) {
	if w, ok := s.writers[arm]; ok {
		return w, nil
	}
	w, err := genrecord.OpenWriter(s.records.Generation(arm), callrow.Pins(rp, s.designHash, "try", s.id))
	if err != nil {
		return nil, err
	}
	s.writers[arm] = w
	return w, nil
}

func (s *trySink) PutReceipt(_ context.Context, rec receipts.Receipt) error {
	k := studies.TrialKey{Arm: rec.Arm, JobKind: rec.JobKind, Task: rec.TaskID, Repeat: rec.Repeat}
	s.got[k.String()] = rec
	return nil
}

func (s *trySink) close() {
	for a, w := range s.writers {
		w.Close()
		delete(s.writers, a)
	}
}

// TryAssets resolves a draft's pins for a try as Assets does, except that a
// bank need not be audited yet: a try counts nothing, and seeing what the
// arms answer is how a bank's author finds the keys to fix before the audit
// that register and freeze require.
func (env Env) TryAssets() studies.Assets {
	return localAssets{installed: env.Installed, graders: env.Graders(), open: env.Open}
}
