package scaleout

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/run"
	"rig/studies"
	"rig/tasks"
)

// What the coordinator checks for itself before a worker's receipt is
// merged. A worker is anyone who can complete a trial activity on the
// cluster, and the spool is anyone who can write a shared folder: neither
// is trusted with what the coordinator can work out on its own.
//
//   - the trial key is in the execution's plan, the attempt is one the store
//     expects, and the entry is named as the worker's own (entryName);
//   - every field of the receipt the plan decides is the plan's: its place
//     in the plan, and the frozen arm's model, runtime, harness and pins
//     (planReceipt, planFields); the coordinator's own pins are its own;
//   - the grade names the task's grader, and is the one that grader gives
//     the record's text where it is deterministic and the arm's harness
//     is not Aider (checkGrade);
//   - the runtime binary is the frozen one (checkReceipt);
//   - the entry's digests are ones the engine reported (reported.jsonl):
//     an entry no activity reported is never merged from the spool alone.

// deterministicGraders are the graders whose grade the coordinator can
// recompute from the record's text alone, with no sandbox and no model:
// the code grader runs the task's tests and a judge runs a model, so their
// grades stay the worker's.
func deterministicGraders() *tasks.Registry {
	return tasks.NewRegistry(tasks.Exact{}, tasks.Normalized{}, tasks.Regex{}, tasks.Numeric{}, tasks.JSONMatch{})
}

// trust holds what the checks read once per execution or design: the plan's
// keys, the snapshot's banks, its parsed design and each arm's receipt.
type trust struct {
	mu      sync.Mutex
	plans   map[string]map[studies.TrialKey]bool   // by WorkflowID
	banks   map[string]map[string]*tasks.Bank      // by design hash, then job kind
	designs map[string]*studies.Design             // by design hash
	arms    map[string]map[string]receipts.Receipt // by design hash, then arm (planReceipt)
	log     sync.Mutex                             // appends to reported.jsonl
}

// planReceipt is the receipt the plan gives attempt of trial key before
// anything has run: run.UnrunReceipt, through run's newReceipt, which is
// what a worker's runner starts every receipt from. So the fields the
// frozen arm decides (model, runtime, harness, the arm's and its card's
// pins) are derived here by the same code that derives them there, not
// by a second copy of it. The arm's part is made once per design and arm
// (newReceipt parses the design and reads the machine, nvidia-smi
// included: not a cost to pay on every merge); the trial's place in the
// plan is set here for each trial, as newReceipt sets it.
func (c *Coordinator) planReceipt(study, execution string, snap *studies.Snapshot, key studies.TrialKey, attempt int) (receipts.Receipt, error) {
	c.trust.mu.Lock()
	r, ok := c.trust.arms[snap.DesignHash][key.Arm]
	c.trust.mu.Unlock()
	if !ok {
		var err error
		if r, err = run.UnrunReceipt(study, snap, execution, key, attempt, attempt-1, receipts.Preempted, "the plan's receipt"); err != nil {
			return receipts.Receipt{}, err
		}
		c.trust.mu.Lock()
		if c.trust.arms == nil {
			c.trust.arms = map[string]map[string]receipts.Receipt{}
		}
		if c.trust.arms[snap.DesignHash] == nil {
			c.trust.arms[snap.DesignHash] = map[string]receipts.Receipt{}
		}
		c.trust.arms[snap.DesignHash][key.Arm] = r
		c.trust.mu.Unlock()
	}
	r.StudyID, r.ExecutionID, r.DesignHash = study, execution, snap.DesignHash
	r.Arm, r.JobKind, r.TaskID, r.Repeat = key.Arm, key.JobKind, key.Task, key.Repeat
	// Attempts are numbered one after another in the store (NextAttempt;
	// checkRequest takes none out of turn), so each reruns the one before.
	r.Attempt, r.ParentAttempt = attempt, attempt-1
	return r, nil
}

// field is one field of a receipt, by its JSON name, as text.
type field struct{ name, value string }

// planFields are the fields of r the plan decides: its place in the plan
// and what the frozen arm gives (armPins). A pin r lacks reads as empty,
// as the plan's does: the absent prompt_format of a chat arm, say.
func planFields(r receipts.Receipt) []field {
	f := []field{
		{"study_id", r.StudyID}, {"execution_id", r.ExecutionID}, {"design_hash", r.DesignHash},
		{"arm", r.Arm}, {"job_kind", r.JobKind}, {"task_id", r.TaskID}, {"repeat", strconv.Itoa(r.Repeat)},
		{"attempt", strconv.Itoa(r.Attempt)}, {"parent_attempt", strconv.Itoa(r.ParentAttempt)},
		{"model_name", r.ModelName}, {"model_digest", r.ModelDigest}, {"runtime", r.Runtime}, {"harness", r.Harness},
	}
	for _, k := range armPins {
		f = append(f, field{"pins." + k, r.Pins[k]})
	}
	return f
}

// armPins are the pins run's pinMap takes from the frozen arm and its card
// profile, the same on every worker. The others are what the worker's
// runtime reported (its build flags, threads, load report, containment)
// or measured on its machine (harness_caps' wall clock, card_cgroup): the
// coordinator has nothing to derive them from. binary_sha256 and
// ollama_digest are reported too, and held to the frozen digests apart
// (checkReceipt).
var armPins = []string{
	"quant", "context", "slots", "temperature", "top_k", "top_p", "min_p", "seed", "stop_cap", "runtime_build", "pins_source", "prompt_format",
	"offload_backend", "gpu_layers", "flash_attention", "kv_cache_on_host",
	"card", "card_memory_mib", "card_simulated",
}

// coordinatorPins are the pins the coordinator writes on a receipt it
// merges (MergeEntry) or records lost (RecordLost). From a worker they
// would be vouched for as the coordinator's own: spool digests the engine
// never reported (vouched, Replay), another worker's name, an engine.
var coordinatorPins = []string{"worker", "spool_receipt_sha256", "spool_record_sha256", "engine"}

// designOf is the snapshot's design, parsed once per design hash: parsing
// and checking it again for every merged trial was a tenth of a fleet's
// coordinator time. What it returns is shared: read it, never change it.
func (c *Coordinator) designOf(snap *studies.Snapshot) (*studies.Design, error) {
	c.trust.mu.Lock()
	defer c.trust.mu.Unlock()
	if d, ok := c.trust.designs[snap.DesignHash]; ok {
		return d, nil
	}
	d, err := snap.DesignValue()
	if err != nil {
		return nil, err
	}
	if c.trust.designs == nil {
		c.trust.designs = map[string]*studies.Design{}
	}
	c.trust.designs[snap.DesignHash] = d
	return d, nil
}

// planned says whether key is in the execution's plan.
func (c *Coordinator) planned(study, execution string, key studies.TrialKey) (bool, error) {
	id := WorkflowID(study, execution)
	c.trust.mu.Lock()
	keys, ok := c.trust.plans[id]
	c.trust.mu.Unlock()
	if !ok {
		plan, _, _, _, err := c.planOf(study, execution)
		if err != nil {
			return false, err
		}
		keys = make(map[studies.TrialKey]bool, len(plan.Trials))
		for _, t := range plan.Trials {
			keys[t.Key] = true
		}
		c.trust.mu.Lock()
		if c.trust.plans == nil {
			c.trust.plans = map[string]map[studies.TrialKey]bool{}
		}
		c.trust.plans[id] = keys
		c.trust.mu.Unlock()
	}
	return keys[key], nil
}

// banksOf is the snapshot's banks, loaded and checked against their
// frozen sums once per design.
func (c *Coordinator) banksOf(snap *studies.Snapshot) (map[string]*tasks.Bank, error) {
	c.trust.mu.Lock()
	defer c.trust.mu.Unlock()
	if b, ok := c.trust.banks[snap.DesignHash]; ok {
		return b, nil
	}
	b, err := run.LoadBanks(snap)
	if err != nil {
		return nil, err
	}
	if c.trust.banks == nil {
		c.trust.banks = map[string]map[string]*tasks.Bank{}
	}
	c.trust.banks[snap.DesignHash] = b
	return b, nil
}

// checkRequest holds a merge request to the coordinator's own plan and
// store: the key is planned, the attempt is one the store expects (the
// next, or one already stored, which the merge then finds merged or keeps
// apart as divergent), and the entry is named for this key, attempt and
// worker. A worker could otherwise bring a receipt for a trial nobody
// planned, skip attempts, or present another worker's entry as its own.
func (c *Coordinator) checkRequest(ctx context.Context, st *receipts.Store, study, execution string, key studies.TrialKey, tr TrialResult) error {
	if want := entryName(key.String(), tr.Attempt, tr.Worker); tr.Entry != want {
		return fmt.Errorf("entry name %q is not %q, the entry of trial %s attempt %d by worker %q", tr.Entry, want, key, tr.Attempt, tr.Worker)
	}
	ok, err := c.planned(study, execution, key)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("trial %s is not in the execution's plan", key)
	}
	next, _, err := st.NextAttempt(ctx, execution, receipts.TrialKey{Arm: key.Arm, TaskID: key.Task, Repeat: key.Repeat})
	if err != nil {
		return err
	}
	if tr.Attempt < 1 || tr.Attempt > next {
		return fmt.Errorf("trial %s attempt %d: the store expects attempt %d next (an attempt is handed out by the engine, one at a time)", key, tr.Attempt, next)
	}
	return nil
}

// checkCaller holds the activity's study and execution (a worker's word,
// passed on by the workflow) to the workflow that called it, which the
// engine names: a worker of one study cannot merge into another's store.
func checkCaller(ctx context.Context, tr TrialResult) error {
	if !activity.IsActivity(ctx) {
		return nil // rig worker merge and the tests: no engine in between
	}
	id, want := activity.GetInfo(ctx).WorkflowExecution.ID, WorkflowID(tr.Study, tr.Execution)
	if id != want && !strings.HasPrefix(id, want+"/") {
		return fmt.Errorf("the result names %s/%s, but workflow %s asked for the merge", tr.Study, tr.Execution, id)
	}
	return nil
}

// checkGrade holds a counted receipt's grade to the task's grader, and
// grades the trial's own record again where that grader is deterministic,
// refusing a receipt whose grade differs. Every fact it goes by is the
// plan's: the task is the planned key's (d, key), and so is the harness,
// which is the arm's, never the receipt's word. The text is the record's
// row of the trial's call, the one the worker's runner graded
// (run.trialRunner.generate): a worker cannot claim a pass its own record
// does not earn. The trials of an Aider arm are not graded again: their
// text is the last of several calls and their code grade needs the kept
// repository.
func (c *Coordinator) checkGrade(ctx context.Context, snap *studies.Snapshot, d *studies.Design, key studies.TrialKey, rec receipts.Receipt, recordPath string, hasRecord bool) error {
	switch rec.Outcome {
	case receipts.FailedAtCard:
		// Scored as a failure whatever the model could do: no pass in it.
		if g := rec.Grade; g != nil && (g.Pass || g.Score != 0) {
			return fmt.Errorf("grade: a failed_at_card receipt is a failure, not score %g pass %v", g.Score, g.Pass)
		}
		return nil
	case receipts.Scored, receipts.Capped:
	default:
		return nil // not counted: nothing of the model's is graded
	}
	arm := d.Arm(key.Arm)
	if arm == nil {
		return fmt.Errorf("arm %s is not in the frozen design", key.Arm)
	}
	banks, err := c.banksOf(snap)
	if err != nil {
		return err
	}
	bank := banks[key.JobKind]
	if bank == nil {
		return fmt.Errorf("job kind %s has no bank in the snapshot", key.JobKind)
	}
	task, ok := bank.Task(key.Task)
	if !ok {
		return fmt.Errorf("task %s is not in bank %s", key.Task, bank.File)
	}
	if rec.Grade == nil {
		return fmt.Errorf("grade: a %s receipt without one", rec.Outcome)
	}
	// The runner grades with the registry's grader of the task's own
	// reference, which stamps its name and version on the grade
	// (tasks.Registry.Grade): true of every grader and harness, so held
	// here even where the grade itself cannot be recomputed.
	if r := *rec.Grade; r.Grader != task.Grader.Name {
		return fmt.Errorf("grade.grader %q is not the grader of task %s, %q", r.Grader, task.ID, task.Grader.Name)
	} else if v := strconv.Itoa(task.Grader.Version); r.GraderVersion != v {
		return fmt.Errorf("grade.grader_version %q is not the version of task %s's grader %s, %q", r.GraderVersion, task.ID, task.Grader.Name, v)
	}
	if arm.Runtime.Aider() {
		return nil
	}
	g, err := deterministicGraders().Get(task.Grader)
	if err != nil {
		return nil // code or judge: the coordinator cannot grade it alone
	}
	call := run.TrialCallID(rec)
	text, found := "", false
	if hasRecord {
		if text, found, err = rowText(recordPath, call); err != nil {
			return err
		}
	}
	if !found {
		return fmt.Errorf("grade: the trial's record holds no row %s to grade", call)
	}
	got, err := g.Grade(ctx, task, tasks.Output{TrialID: call, TaskID: task.ID, Text: text})
	if err != nil {
		return fmt.Errorf("grade: re-grading %s with %s: %w", call, task.Grader, err)
	}
	want := receipts.Grade{Score: got.Score, Pass: got.Pass, Grader: g.Name(), GraderVersion: strconv.Itoa(g.Version())}
	if r := *rec.Grade; r.Grader != want.Grader || r.GraderVersion != want.GraderVersion || r.Score != want.Score || r.Pass != want.Pass {
		return fmt.Errorf("grade: the receipt says %s@v%s score %g pass %v, the coordinator's re-grade of the record's text says %s@v%s score %g pass %v",
			r.Grader, r.GraderVersion, r.Score, r.Pass, want.Grader, want.GraderVersion, want.Score, want.Pass)
	}
	return nil
}

// rowText is the text of row id in a generation record.
func rowText(path, id string) (string, bool, error) {
	rd, err := genrecord.OpenReader(path)
	if err != nil {
		return "", false, err
	}
	defer rd.Close()
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return "", false, nil
		}
		if err != nil {
			return "", false, err
		}
		// A runtime that echoed no call id has its row named as the
		// runner names it (run's runTrial: ID/call-1).
		if row.RowID == id || row.RowID == id+"/call-1" {
			return row.Text, true, nil
		}
	}
}

// ollamaDigest is the form of the digest a started Ollama reports of the
// manifest it built (runtimes' manifestDigest: 64 hex, no prefix).
var ollamaDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// reported is one line of reported.jsonl: the digests a trial activity
// returned through the engine for a spool entry.
type reported struct {
	Entry         string `json:"entry"`
	ReceiptSHA256 string `json:"receipt_sha256"`
	RecordSHA256  string `json:"record_sha256,omitempty"`
}

// reportedLog is the execution's log of reported digests, beside its
// records in the coordinator's home (never in the spool).
func (c *Coordinator) reportedLog(study, execution string) string {
	return layout.Records(c.studies.ExecDir(study, execution)).Reported()
}

// noteReported appends the digests the engine brought for an entry, before
// it is merged: a merge cut off by a crash is then finished by `rig study
// merge` or the lost-attempt activity from the spool, held to these.
func (c *Coordinator) noteReported(tr TrialResult) error {
	path := c.reportedLog(tr.Study, tr.Execution)
	line, err := json.Marshal(reported{Entry: tr.Entry, ReceiptSHA256: tr.ReceiptSHA256, RecordSHA256: tr.RecordSHA256})
	if err != nil {
		return err
	}
	c.trust.log.Lock()
	defer c.trust.log.Unlock()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// vouched is every entry whose digests the coordinator can vouch for: those
// the engine reported (reported.jsonl), and those already merged (their
// receipts' spool pins; an execution begun before the log has only these).
func (c *Coordinator) vouched(ctx context.Context, st *receipts.Store, study, execution string) (map[string]reported, error) {
	out := map[string]reported{}
	rs, err := st.Receipts(ctx, execution)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if w, sum := r.Pins["worker"], r.Pins["spool_receipt_sha256"]; w != "" && sum != "" {
			name := entryName(studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat}.String(), r.Attempt, w)
			out[name] = reported{Entry: name, ReceiptSHA256: sum, RecordSHA256: r.Pins["spool_record_sha256"]}
		}
	}
	c.trust.log.Lock()
	defer c.trust.log.Unlock()
	f, err := os.Open(c.reportedLog(study, execution))
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r reported
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Entry == "" {
			continue // a line cut by a crash mid-append
		}
		if _, merged := out[r.Entry]; !merged {
			out[r.Entry] = r
		}
	}
	return out, sc.Err()
}
