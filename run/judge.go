package run

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
)

// judgeSystem replaces a chat template's default system message, which may
// name the model family (SmolLM2's does), so the judge's rendered prompt
// carries only what rig wrote.
const judgeSystem = "You grade answers to a task. You are shown each answer under a random label and nothing about who wrote it."

const judgeInstructions = `Grade every answer below on its content alone.
Give each a score from 0 to 1: 1 when it fully and correctly does the task, 0 when it is wrong or missing, and a value in between when it is partly right. A score of 0.5 or more means the answer is acceptable as it stands.
When a reference answer is given, compare each answer with it.`

// judgePassScore is the pass mark the judge is told ("0.5 or more means
// acceptable"); Pass records the judge's own verdict, not a design threshold.
const judgePassScore = 0.5

// ErrJudgeAnswer is a judge answer that does not give a score for every label.
var ErrJudgeAnswer = errors.New("judge answer unreadable")

// BlindingRecord is the blinding key of one judged task: which label hid
// which trial. It is stored apart from the judge's prompt, in
// blinding-JUDGE.json beside the execution's generation records, and joined
// with the judge's answer only after grading.
type BlindingRecord struct {
	JobKind string         `json:"job_kind"`
	Task    string         `json:"task"`
	Repeat  int            `json:"repeat"`
	Call    string         `json:"call"` // the judge's generation-record row
	Map     tasks.BlindMap `json:"map"`
}

// judgeGroup is one task at one repeat: every counted trial the judge
// grades together, under labels.
type judgeGroup struct {
	task   string
	repeat int
	recs   []receipts.Receipt
}

// judge runs the judge phase: for every job kind graded by a judge arm, the
// arm grades each task's outputs blind and its grades are stored beside the
// receipts. Tasks already graded by this judge are skipped, so a resumed
// execution never grades twice.
func (x *execution) judge(ctx context.Context) error {
	for _, jk := range x.design.JobKinds {
		if jk.Grader.Name != studies.JudgeGrader {
			continue
		}
		if err := x.judgeKind(ctx, jk); err != nil {
			return fmt.Errorf("judge %s of job kind %s: %w", jk.Judge, jk.Name, err)
		}
	}
	return nil
}

func (x *execution) judgeKind(ctx context.Context, jk studies.JobKind) error {
	judge := x.design.Arm(jk.Judge)
	if judge == nil {
		return fmt.Errorf("arm %q is not in the design", jk.Judge)
	}
	grader, version := studies.JudgeName(judge.Name), strconv.Itoa(studies.JudgeGraderVersion)
	groups, err := x.pendingGroups(ctx, jk, grader, version)
	if err != nil || len(groups) == 0 {
		return err
	}
	texts, err := x.outputTexts(jk)
	if err != nil {
		return err
	}
	ids := x.identities(jk)
	blinding := map[string]BlindingRecord{}
	if err := atomicfile.ReadJSON(x.records().Blinding(judge.Name), &blinding); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var rt runtimes.Runtime
	defer func() { x.stopArm(context.Background(), rt) }()
	for _, g := range groups {
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			if rt == nil {
				if rt, err = x.startArm(ctx, *judge); err != nil {
					x.stopArm(ctx, nil)
					return err
				}
			}
			x.state.mu.Lock()
			x.state.info.Current = fmt.Sprintf("%s grading %s/%s/%d", grader, jk.Name, g.task, g.repeat)
			x.state.mu.Unlock()
			done, err := x.judgeTask(ctx, jk, *judge, rt, g, texts, ids, blinding)
			if err != nil {
				return fmt.Errorf("task %s repeat %d: %w", g.task, g.repeat, err)
			}
			if done {
				break
			}
			// Preempted or crashed: nothing was graded; a fresh runtime retries
			// once the governor allows.
			x.stopArm(ctx, rt)
			rt = nil
			if err := x.waitForGates(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// pendingGroups lists the tasks of the job kind with a counted, graded trial
// the judge has not graded yet.
func (x *execution) pendingGroups(ctx context.Context, jk studies.JobKind, grader, version string) ([]judgeGroup, error) {
	counted, err := x.store.Counted(ctx, x.exec.ID)
	if err != nil {
		return nil, err
	}
	graded, err := x.store.GradesBy(ctx, x.exec.ID, grader, version)
	if err != nil {
		return nil, err
	}
	byTask := map[[2]string]*judgeGroup{}
	pending := map[[2]string]bool{}
	for k, r := range counted {
		// A trial that blew its card budget is a failure at that card, not an
		// output to judge.
		if r.JobKind != jk.Name || r.Outcome == receipts.FailedAtCard {
			continue
		}
		key := [2]string{r.TaskID, strconv.Itoa(r.Repeat)}
		g := byTask[key]
		if g == nil {
			g = &judgeGroup{task: r.TaskID, repeat: r.Repeat}
			byTask[key] = g
		}
		g.recs = append(g.recs, r)
		if len(graded[k]) == 0 {
			pending[key] = true
		}
	}
	var out []judgeGroup
	for key, g := range byTask {
		if !pending[key] {
			continue
		}
		sort.Slice(g.recs, func(i, j int) bool { return g.recs[i].Arm < g.recs[j].Arm })
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].task != out[j].task {
			return out[i].task < out[j].task
		}
		return out[i].repeat < out[j].repeat
	})
	return out, nil
}

// outputTexts reads the kept answer of every trial of the job kind from the
// candidates' generation records, by call id.
func (x *execution) outputTexts(jk studies.JobKind) (map[string]string, error) {
	var arms []string
	for _, i := range x.design.ArmsFor(jk.Name) {
		arms = append(arms, x.design.Arms[i].Name)
	}
	return RecordTexts(x.recDir, arms...)
}

// identities are the strings that would tell the judge whose output it
// reads: arm names, model registry names and files, and the licence
// registry ids of the models.
func (x *execution) identities(jk studies.JobKind) []string {
	return JudgeIdentities(x.design, x.snap, jk)
}

// JudgeIdentities are the identities of the arms a judge of the job kind
// grades (see identities): what its prompts must never show.
func JudgeIdentities(d *studies.Design, snap *studies.Snapshot, jk studies.JobKind) []string {
	var ids []string
	models := map[string]bool{}
	for _, i := range d.ArmsFor(jk.Name) {
		a := d.Arms[i]
		ids = append(ids, a.Name, a.Model.RegistryName, a.Model.File, a.Model.OllamaDigest)
		models[strings.ToLower(a.Model.RegistryName)] = true
		if fa, ok := snap.Arm(a.Name); ok {
			ids = append(ids, fa.ModelPath, fa.ModelSHA256)
		}
	}
	for _, it := range d.Items {
		if models[strings.ToLower(it.Name)] || it.Role == studies.RoleCandidate || it.Role == studies.RoleIncumbent {
			ids = append(ids, it.Name, it.RegistryID)
		}
	}
	return ids
}

// judgeSeed fixes one task's labels, so a retried task is shown under the
// same labels as the first try.
func (x *execution) judgeSeed(jk string, task string, repeat int) uint64 {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s|%s|%s|%s|%d", x.snap.Hash, x.exec.ID, jk, task, repeat)))
	return binary.BigEndian.Uint64(h[:8])
}

// judgeTask grades one task's outputs with the judge. It reports false when
// the governor preempted the call or the runtime crashed: nothing is graded
// and the caller retries on a fresh runtime.
func (x *execution) judgeTask(ctx context.Context, jk studies.JobKind, judge studies.Arm, rt runtimes.Runtime, g judgeGroup,
	texts map[string]string, ids []string, blinding map[string]BlindingRecord) (bool, error) {
	p, err := x.blindJudgePrompt(ctx, jk, rt, g, texts, ids)
	if err != nil {
		return false, err
	}
	w, err := x.writer(judge.Name, rt.Pins())
	if err != nil {
		return false, err
	}
	callID := fmt.Sprintf("%s/%s/%s/%d#%d", studies.JudgeName(judge.Name), jk.Name, g.task, g.repeat, w.Rows()+1)
	bkey := jk.Name + "|" + g.task + "|" + strconv.Itoa(g.repeat)
	// The key is written before the call, apart from it: a crash after the
	// call still leaves the labels' owners on disk.
	blinding[bkey] = BlindingRecord{JobKind: jk.Name, Task: g.task, Repeat: g.repeat, Call: callID, Map: p.bmap}
	if err := atomicfile.WriteJSON(x.records().Blinding(judge.Name), blinding, 0o600); err != nil {
		return false, err
	}
	req := runtimes.Request{CallID: callID, Messages: p.msgs, Sampling: samplingOf(judge.Pins), MaxTokens: judge.Pins.StopCap,
		TopK: x.topK, Effort: runtimes.Effort{Level: judge.Pins.Effort.Value}}
	if rt.Name() == "llama-server" {
		req.Grammar = judgeGrammar(p.labels)
	}
	res, preempted, err := x.watchedCall(ctx, rt, req)
	if preempted != "" || errors.Is(err, runtimes.ErrCrashed) {
		x.env.Log.Warn("judge call not kept", "call", callID, "preempted", preempted, "err", err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := w.Append(generationRow(callID, judge.Name, genrecord.RoleJudge, judge.Pins, x.topK, res)); err != nil {
		return false, err
	}
	if err := tasks.AssertNoIdentity(res.RenderedPrompt, p.ids); err != nil {
		return false, fmt.Errorf("the judge's rendered prompt (row %s) is not blind; no grade kept: %w", callID, err)
	}
	scores, err := parseJudgeAnswer(res.Text, p.labels)
	if err != nil {
		// The call stays in the record; the task stays ungraded (missing in
		// the analysis, never a zero) and is retried on a resumed run.
		x.env.Log.Warn("judge answer unreadable; task left ungraded", "call", callID, "err", err)
		return true, nil
	}
	grades, err := x.unblindGrades(judge, g, p, scores, callID)
	if err != nil {
		return false, err
	}
	return true, x.store.PutGrades(ctx, grades)
}

// judgePrompt is one task's judge prompt, its outputs under random labels,
// and the key from those labels back to the trials.
type judgePrompt struct {
	msgs   []runtimes.Message
	labels []string // in the order the prompt shows them
	bmap   tasks.BlindMap
	ids    []string // every identity the prompt must not show
}

// blindJudgePrompt builds the judge prompt for one task's outputs and refuses
// it when it, or the judge's chat template around it, shows an identity.
func (x *execution) blindJudgePrompt(ctx context.Context, jk studies.JobKind, rt runtimes.Runtime, g judgeGroup,
	texts map[string]string, ids []string) (judgePrompt, error) {
	task, ok := x.banks[jk.Name].Task(g.task)
	if !ok {
		return judgePrompt{}, fmt.Errorf("task %s is not in bank %s", g.task, x.banks[jk.Name].File)
	}
	outs := make([]tasks.Output, len(g.recs))
	for i, r := range g.recs {
		call := TrialCallID(r)
		outs[i] = tasks.Output{TrialID: call, TaskID: r.TaskID, Arm: r.Arm, Model: r.ModelName, Text: texts[call]}
	}
	items, bmap := tasks.Blind(outs, x.judgeSeed(jk.Name, g.task, g.repeat), ids...)
	// Blind also hides model families ("gemma" for Gemma-3-270M); the task
	// text and every check use the same full set.
	ids = append(append([]string(nil), ids...), bmap.Identities()...)
	msgs := []runtimes.Message{{Role: "system", Content: judgeSystem}, {Role: "user", Content: tasks.JudgePrompt(judgeInstructions, x.judgeTaskText(task, ids), items)}}
	for _, m := range msgs {
		if err := tasks.AssertNoIdentity(m.Content, ids); err != nil {
			return judgePrompt{}, fmt.Errorf("refusing to send the judge prompt: %w", err)
		}
	}
	if r, ok := rt.(interface {
		Render(context.Context, []runtimes.Message, runtimes.EffortRecord) (string, []int, error)
	}); ok {
		// The chat template is the judge's, not rig's: check what it renders
		// before anything is sent.
		rendered, _, err := r.Render(ctx, msgs, runtimes.EffortRecord{})
		if err != nil {
			return judgePrompt{}, err
		}
		if err := tasks.AssertNoIdentity(rendered, ids); err != nil {
			return judgePrompt{}, fmt.Errorf("refusing to send the judge prompt: its chat template renders %w", err)
		}
	}
	labels := make([]string, len(items))
	for i, it := range items {
		labels[i] = it.Label
	}
	return judgePrompt{msgs: msgs, labels: labels, bmap: bmap, ids: ids}, nil
}

// unblindGrades joins the judge's scores by label back to their trials.
func (x *execution) unblindGrades(judge studies.Arm, g judgeGroup, p judgePrompt, scores map[string]float64, callID string) ([]receipts.GradeRecord, error) {
	// Only now, after grading, are the labels joined back to their trials.
	now := time.Now().UTC()
	byCall := map[string]receipts.Receipt{}
	for _, r := range g.recs {
		byCall[TrialCallID(r)] = r
	}
	var grades []receipts.GradeRecord
	for _, label := range p.labels {
		e, ok := p.bmap.Lookup(label)
		if !ok {
			return nil, fmt.Errorf("label %s is not in the blinding map", label)
		}
		r := byCall[e.TrialID]
		s := scores[label]
		grades = append(grades, receipts.GradeRecord{ExecutionID: x.exec.ID, Arm: r.Arm, JobKind: r.JobKind, TaskID: r.TaskID,
			Repeat: r.Repeat, Attempt: r.Attempt, Grader: studies.JudgeName(judge.Name), GraderVersion: strconv.Itoa(studies.JudgeGraderVersion),
			Score: s, Pass: s >= judgePassScore, Label: label, Call: callID, GradedAt: now})
	}
	return grades, nil
}

// judgeTaskText is the task as the judge sees it: the prompt and, when the
// task's grader can state it, the reference answer, both redacted.
func (x *execution) judgeTaskText(t tasks.Task, ids []string) string {
	text := t.Input.Prompt
	if g, err := x.graders.Get(t.Grader); err == nil {
		if ref, err := g.KeyOutput(t); err == nil && strings.TrimSpace(ref.Text) != "" {
			text += "\n\n## Reference answer\n" + ref.Text
		}
	}
	return tasks.Redact(text, ids)
}

// watchedCall makes one judge call under the governor's watch, as trials are.
func (x *execution) watchedCall(ctx context.Context, rt runtimes.Runtime, req runtimes.Request) (runtimes.Result, string, error) {
	if x.env.Gates == nil {
		return runtimes.Result{}, "", fmt.Errorf("%w: no governor is wired", ErrGate)
	}
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	guard, err := x.env.Gates.Watch(tctx, req.CallID, rt.Sandbox(), studies.CardBytes(x.design, studies.Arm{}))
	if err != nil {
		if werr := x.waitForGates(ctx); werr != nil {
			return runtimes.Result{}, "", werr
		}
		if guard, err = x.env.Gates.Watch(tctx, req.CallID, rt.Sandbox(), studies.CardBytes(x.design, studies.Arm{})); err != nil {
			return runtimes.Result{}, "", err
		}
	}
	go func() {
		select {
		case <-guard.Preempted():
			cancel()
		case <-tctx.Done():
		}
	}()
	res, err := rt.Generate(tctx, req)
	return res, guard.End(), err
}

// TrialCallID is the call id a trial's generation row carries.
func TrialCallID(r receipts.Receipt) string {
	return studies.TrialKey{Arm: r.Arm, JobKind: r.JobKind, Task: r.TaskID, Repeat: r.Repeat}.CallID(r.Attempt)
}

// judgeGrammar holds a llama-server judge to one line per label, in the
// order shown, with a score of 0, 0.1 … 0.9 or 1.
func judgeGrammar(labels []string) string {
	var b strings.Builder
	b.WriteString("root ::=")
	for _, l := range labels {
		fmt.Fprintf(&b, ` "{\"label\": \"%s\", \"score\": " score "}\n"`, l)
	}
	b.WriteString("\nscore ::= \"0\" | \"0.\" [0-9] | \"1\"\n")
	return b.String()
}

var judgeObject = regexp.MustCompile(`\{[^{}]*\}`)

// parseJudgeAnswer reads one {"label": L, "score": S} object per label. The
// first score given for a label counts; a label without one, or a score
// outside [0,1], makes the answer unreadable.
func parseJudgeAnswer(text string, labels []string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, l := range labels {
		want[l] = true
	}
	out := map[string]float64{}
	for _, m := range judgeObject.FindAllString(text, -1) {
		var o struct {
			Label string      `json:"label"`
			Score json.Number `json:"score"`
		}
		if json.Unmarshal([]byte(m), &o) != nil || !want[o.Label] {
			continue
		}
		if _, seen := out[o.Label]; seen {
			continue
		}
		s, err := o.Score.Float64()
		if err != nil || s < 0 || s > 1 {
			return nil, fmt.Errorf("%w: label %s has score %q (want a number in [0,1])", ErrJudgeAnswer, o.Label, o.Score)
		}
		out[o.Label] = s
	}
	var missing []string
	for _, l := range labels {
		if _, ok := out[l]; !ok {
			missing = append(missing, l)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: no score for %s", ErrJudgeAnswer, strings.Join(missing, ", "))
	}
	return out, nil
}
