package run

// The fidelity step: after a job kind's trials (and its judge), each arm
// held to the job kind's reference arm token by token on the reference's
// own kept outputs (docs/fidelity.md, "In a study"). It writes the
// execution's fidelity.jsonl; package fidelity reads it.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"rig/fidelity"
	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// afterTrials runs the steps that read the trials' outputs once every
// planned trial has run (or an early stop ended them): the judge's grades,
// then each reference's fidelity.
func (x *execution) afterTrials(ctx context.Context) error {
	if err := x.judge(ctx); err != nil {
		return err
	}
	return x.fidelity(ctx)
}

// fidelityGroups are the design's groups of arms held to a reference, over
// every job kind: none where no job kind names a reference.
func fidelityGroups(d *studies.Design) []studies.FidelityGroup {
	var groups []studies.FidelityGroup
	for _, jk := range d.JobKinds {
		groups = append(groups, d.FidelityGroups(jk)...)
	}
	return groups
}

// HasFidelityStep reports whether an execution of d ends in the fidelity
// step: some job kind names a reference arm.
func HasFidelityStep(d *studies.Design) bool { return len(fidelityGroups(d)) > 0 }

// MergedFidelity is the fidelity step of an execution whose trials ran on
// other machines (the temporal engine's workers) and whose receipts and
// generation records are merged into spec.Store and spec.Dir. It runs on
// the host that froze the study, which has the pinned scorer and the
// arms' frozen model files, under env's governor and resumable as the
// local step (fidelity). say is told what it scores now. Every arm's
// figure is its model's (scored_by model): its trials ran on a worker's
// build and backend, not beside the scorer. Walls and banks are not read:
// the step reads only the kept rows.
func MergedFidelity(ctx context.Context, env Env, spec Spec, say func(current string)) error {
	d, err := spec.Snapshot.DesignValue()
	if err != nil {
		return err
	}
	env.Log = env.log()
	r := &trialRunner{env: env, study: spec.Study, design: d, snap: spec.Snapshot, exec: spec.Exec,
		installed: env.Installed, workDir: layout.Records(spec.Dir).Work()}
	x := &execution{trialRunner: r, store: spec.Store, recDir: spec.Dir, state: &Handle{}, say: say, trialsElsewhere: true}
	return x.fidelity(ctx)
}

// showCurrent puts what the execution does now on its progress, and tells
// say where a host other than the Handle shows it.
func (x *execution) showCurrent(what string) {
	x.state.mu.Lock()
	x.state.info.Current = what
	x.state.mu.Unlock()
	if x.say != nil {
		x.say(what)
	}
}

// fidelityKey names one arm's records in a fidelity group.
type fidelityKey struct{ jobKind, profile, arm string }

// fidelity scores, for every fidelity group of the design, the reference's
// kept row of each task through the reference and each measured arm, and
// keeps one record per task and arm (the reference's own records too, at
// KL 0, so that a pair with the reference pairs unit by unit). Records
// already kept are not scored again, so a resumed execution finishes the
// step where it stopped; each arm's records are written together,
// atomically, beside the ones before.
func (x *execution) fidelity(ctx context.Context) error {
	groups := fidelityGroups(x.design)
	if len(groups) == 0 {
		return nil
	}
	path := x.records().Fidelity()
	recs, err := fidelity.ReadStudy(path)
	if err != nil {
		return err
	}
	counted, err := x.store.Counted(ctx, x.exec.ID)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if recs, err = x.fidelityGroup(ctx, g, counted, recs, path); err != nil {
			return fmt.Errorf("fidelity of job kind %s to %s: %w", g.JobKind, x.design.Arms[g.Reference].Name, err)
		}
	}
	return nil
}

// fidelityGroup scores the arms of one group that have no records yet and
// returns every record kept so far.
func (x *execution) fidelityGroup(ctx context.Context, g studies.FidelityGroup, counted map[receipts.TrialKey]receipts.Receipt, recs []fidelity.StudyRecord, path string) ([]fidelity.StudyRecord, error) {
	ref := x.design.Arms[g.Reference]
	have := map[fidelityKey]bool{}
	for _, r := range recs {
		have[fidelityKey{r.JobKind, r.Profile, r.Arm}] = true
	}
	var pending []studies.Arm
	for _, i := range g.Arms {
		a := x.design.Arms[i]
		if !have[fidelityKey{g.JobKind, g.Profile, a.Name}] && ranAny(counted, a.Name, g.JobKind) {
			pending = append(pending, a)
		}
	}
	refDone := have[fidelityKey{g.JobKind, g.Profile, ref.Name}]
	if len(pending) == 0 && refDone {
		return recs, nil
	}
	if len(pending) == 0 {
		// The reference's records are written with its first arm's; a file
		// that lost them has that arm scored again.
		for _, i := range g.Arms {
			if a := x.design.Arms[i]; ranAny(counted, a.Name, g.JobKind) {
				pending = append(pending, a)
				break
			}
		}
		if len(pending) == 0 {
			return recs, nil
		}
	}
	refPath, err := x.modelPath(ref.Name)
	if err != nil {
		return recs, err
	}
	scorer := fidelity.Scorer{Bin: x.installed.PrefillScorer, Threads: runtime.NumCPU(), Work: filepath.Join(x.workDir, "fidelity"), NoSandbox: x.env.NoSandbox}
	rows, err := x.referenceRows(ctx, scorer, g, refPath, counted)
	if err != nil || len(rows) == 0 {
		return recs, err
	}
	segs := make([]fidelity.Segment, len(rows))
	nctx := 0
	for i, r := range rows {
		segs[i] = r.seg
		nctx = max(nctx, len(r.seg.Tokens))
	}
	for _, arm := range pending {
		armPath, err := x.modelPath(arm.Name)
		if err != nil {
			return recs, err
		}
		if err := fidelity.SameTokenizer(refPath, armPath); err != nil {
			return recs, fmt.Errorf("arm %s: %w", arm.Name, err)
		}
		x.showCurrent(fmt.Sprintf("fidelity: %s held to %s on %s (%d tasks)", arm.Name, ref.Name, g.JobKind, len(segs)))
		run, err := x.scoreWatched(ctx, scorer, "fidelity/"+g.JobKind+"/"+arm.Name, refPath, armPath, nctx, segs)
		if err != nil {
			return recs, fmt.Errorf("arm %s: %w", arm.Name, err)
		}
		recs = slices.DeleteFunc(recs, func(r fidelity.StudyRecord) bool {
			return r.JobKind == g.JobKind && r.Profile == g.Profile && (r.Arm == arm.Name || (!refDone && r.Arm == ref.Name))
		})
		for i, r := range rows {
			recs = append(recs, fidelity.StudyRecord{JobKind: g.JobKind, Reference: ref.Name, Arm: arm.Name, Task: r.task,
				RowID: r.rowID, ScoredBy: x.scoredBy(arm), Profile: g.Profile, Tokens: run.Tokens[i]})
		}
		if !refDone {
			for i, r := range rows {
				recs = append(recs, fidelity.StudyRecord{JobKind: g.JobKind, Reference: ref.Name, Arm: ref.Name, Task: r.task,
					RowID: r.rowID, ScoredBy: x.scoredBy(ref), Profile: g.Profile, Tokens: selfScored(run.Tokens[i])})
			}
			refDone = true
		}
		if err := fidelity.WriteStudy(path, recs); err != nil {
			return recs, err
		}
		x.env.Log.Info("fidelity scored", "study", x.study, "execution", x.exec.ID, "job_kind", g.JobKind, "profile", g.Profile,
			"arm", arm.Name, "reference", ref.Name, "tasks", len(rows), "scored_by", x.scoredBy(arm))
	}
	return recs, nil
}

// selfScored is the reference held to itself, read off its own pass in an
// arm's run: KL 0 and every top token agreeing, by definition, with the
// probabilities it gave its own tokens.
func selfScored(toks []fidelity.Token) []fidelity.Token {
	out := make([]fidelity.Token, len(toks))
	for i, t := range toks {
		out[i] = fidelity.Token{KL: 0, RefTop: t.RefTop, ArmTop: t.RefTop, RefLogprob: t.RefLogprob, ArmLogprob: t.RefLogprob}
	}
	return out
}

// referenceRow is one task's kept row of the reference, as a segment.
type referenceRow struct {
	task, rowID string
	seg         fidelity.Segment
}

// referenceRows takes, for each task of the group's job kind, the
// reference's kept row of its first counted repeat (a trial that failed at
// its card or in error keeps no answer to hold others to) and turns it into
// a segment: its own prompt and output ids where the runtime kept them
// (llama-server), else its rendered prompt and kept text tokenized with the
// reference's tokenizer (Ollama keeps no ids), which the log says. A row
// with nothing to score leaves its task out, said in the log.
func (x *execution) referenceRows(ctx context.Context, scorer fidelity.Scorer, g studies.FidelityGroup, refPath string, counted map[receipts.TrialKey]receipts.Receipt) ([]referenceRow, error) {
	ref := x.design.Arms[g.Reference]
	first := map[string]receipts.Receipt{}
	for _, r := range counted {
		if r.Arm != ref.Name || r.JobKind != g.JobKind || r.Outcome == receipts.FailedAtCard || r.Outcome == receipts.Error {
			continue
		}
		if f, ok := first[r.TaskID]; !ok || r.Repeat < f.Repeat {
			first[r.TaskID] = r
		}
	}
	if len(first) == 0 {
		x.env.Log.Warn("fidelity: the reference kept no counted row, so nothing is held to it", "study", x.study, "execution", x.exec.ID, "job_kind", g.JobKind, "reference", ref.Name)
		return nil, nil
	}
	kept, err := armRows(x.recDir, ref.Name)
	if err != nil {
		return nil, err
	}
	tasks := make([]string, 0, len(first))
	for t := range first {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	var tok *fidelity.RowTokenizer
	var out []referenceRow
	var readAsText []string
	for _, task := range tasks {
		call := TrialCallID(first[task])
		row, ok := kept[call]
		if !ok {
			return nil, fmt.Errorf("task %s: the reference's row %s is not in its generation record %s", task, call, x.records().Generation(ref.Name))
		}
		var seg fidelity.Segment
		if len(row.PromptTokenIDs) > 0 {
			seg, err = fidelity.RowSegment(task, row)
		} else {
			if tok == nil {
				if tok, err = fidelity.NewRowTokenizer(scorer, refPath); err != nil {
					return nil, err
				}
			}
			seg, err = tok.Segment(ctx, task, row)
			readAsText = append(readAsText, task)
		}
		if errors.Is(err, fidelity.ErrUnscorableRow) {
			// A row with nothing to score (an empty answer) holds no arm to
			// anything: the task is left out for every arm alike, so the
			// arms still pair task by task.
			x.env.Log.Warn("fidelity: a task is left out", "study", x.study, "execution", x.exec.ID, "job_kind", g.JobKind, "task", task, "why", err.Error())
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", task, err)
		}
		out = append(out, referenceRow{task: task, rowID: row.RowID, seg: seg})
	}
	if len(readAsText) > 0 {
		x.env.Log.Info("fidelity: the reference's rows keep no token ids (its runtime gives none); their rendered prompts and kept texts were tokenized with the reference's tokenizer",
			"study", x.study, "execution", x.exec.ID, "job_kind", g.JobKind, "reference", ref.Name, "model", refPath, "tasks", len(readAsText))
	}
	return out, nil
}

// armRows reads an arm's kept rows by row id: its generation record and any
// of its records from another stack (merged from workers).
func armRows(dir, arm string) (map[string]genrecord.Row, error) {
	rec := layout.Records(dir)
	files, err := filepath.Glob(rec.Generations())
	if err != nil {
		return nil, err
	}
	out := map[string]genrecord.Row{}
	for _, f := range files {
		name, ok := layout.ArmOfGeneration(f)
		if !ok || (name != arm && !strings.HasPrefix(name, arm+".")) {
			continue
		}
		_, rows, err := genrecord.ReadAll(f)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.RowID] = r
		}
	}
	return out, nil
}

// ranAny reports whether the arm has a counted trial of the job kind that
// ran at its card: a cell that did not fit has no figure.
func ranAny(counted map[receipts.TrialKey]receipts.Receipt, arm, jobKind string) bool {
	for _, r := range counted {
		if r.Arm == arm && r.JobKind == jobKind && r.Outcome != receipts.FailedAtCard {
			return true
		}
	}
	return false
}

// modelPath is the arm's frozen model file.
func (x *execution) modelPath(arm string) (string, error) {
	fa, ok := x.snap.Arm(arm)
	if !ok || fa.ModelPath == "" {
		return "", fmt.Errorf("arm %s has no model file in the snapshot", arm)
	}
	return fa.ModelPath, nil
}

// scoredBy says whose figure an arm's records are: its stack's where the
// arm runs llama-server from the scorer's own build folder (the same
// library on the same backend), else its model's (the GGUF through the
// pinned scorer; Ollama, a CUDA build, a harness, trials run on workers).
func (x *execution) scoredBy(a studies.Arm) string {
	if a.Runtime.Aider() || x.trialsElsewhere {
		return fidelity.ScoredByModel
	}
	kind, _ := x.snap.ArmRuntime(a)
	if kind != "llama-server" || x.installed.PrefillScorer == "" {
		return fidelity.ScoredByModel
	}
	b, err := runtimes.BuildOf(x.installed, kind)
	if err != nil || b.Binary == "" || filepath.Dir(b.Binary) != filepath.Dir(x.installed.PrefillScorer) {
		return fidelity.ScoredByModel
	}
	return fidelity.ScoredByStack
}

// errScorerWatch is a watch the governor would not give: the run waits for
// its gates and tries once more.
var errScorerWatch = errors.New("the governor would not watch the scorer")

// scoreWatched runs one scorer pass under the governor's watch, as a trial
// runs: it starts once the gates let counted work run, and a pass the
// governor preempts is run again, from the start, once they let it.
func (x *execution) scoreWatched(ctx context.Context, s fidelity.Scorer, what, refPath, armPath string, nctx int, segs []fidelity.Segment) (fidelity.Run, error) {
	s.Watch = func(ctx context.Context, sb *runtimes.Sandbox) (<-chan struct{}, func(), error) {
		g, err := x.env.Gates.Watch(ctx, what, sb, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errScorerWatch, err)
		}
		return g.Preempted(), func() { g.End() }, nil
	}
	refused := false
	for {
		if err := x.waitForGates(ctx); err != nil {
			return fidelity.Run{}, err
		}
		run, err := s.Score(ctx, refPath, armPath, nctx, segs)
		switch {
		case errors.Is(err, fidelity.ErrPreempted):
			x.env.Log.Info("fidelity: the governor preempted the scorer; it runs again once the gates allow", "what", what)
		case errors.Is(err, errScorerWatch) && !refused:
			refused = true
		default:
			return run, err
		}
	}
}
