package run

// The judge in a try: a job kind graded by a judge arm is graded in a try
// as in a study, by the study's own judge phase (judge.go: blind labels, the
// identity checks, the blinding key apart from the prompt), run over a
// receipts store of the try's own in its folder. That store is frozen under
// the draft's hash only because the judge phase reads receipts from a frozen
// store; nothing in it is counted, and it goes with the try when pruned.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/studies"
)

// judged reports whether the try ran a task of a job kind graded by a
// judge arm.
func judged(d *studies.Design, picked map[string][]string) bool {
	for _, jk := range d.JobKinds {
		if jk.Grader.Name == studies.JudgeGrader && len(picked[jk.Name]) > 0 {
			return true
		}
	}
	return false
}

// tryJudge runs the judge phase over the try's trials and returns the
// judge's grades by trial key (TrialKey.String()). The judge's runtime comes
// from the try's pool as the arms' do.
func tryJudge(ctx context.Context, x *trialRunner, spec TrySpec, got map[string]receipts.Receipt) (map[string]receipts.GradeRecord, error) {
	records := layout.Records(spec.Dir)
	st, err := receipts.Open(records.Store(), x.study)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	hash := spec.Snapshot.DesignHash
	why := "a try's own store, so the judge phase can grade its trials; nothing in it is counted"
	if err := st.Freeze(ctx, hash, receipts.Transition{From: "", To: "frozen", Who: "rig try", Why: why, At: time.Now()}); err != nil {
		return nil, err
	}
	if err := st.PutExecution(ctx, receipts.Execution{ID: spec.ID, Attempt: 1, Status: receipts.Running, DesignHash: hash, CreatedAt: time.Now()}); err != nil {
		return nil, err
	}
	for _, rec := range got {
		if err := st.PutReceipt(ctx, rec); err != nil {
			return nil, err
		}
	}
	ex := &execution{trialRunner: x, store: st, recDir: spec.Dir, state: &Handle{}, writers: map[string]*genrecord.Writer{}}
	defer func() {
		for _, w := range ex.writers {
			w.Close()
		}
	}()
	if err := ex.judge(ctx); err != nil {
		return nil, err
	}
	out := map[string]receipts.GradeRecord{}
	for _, jk := range x.design.JobKinds {
		if jk.Grader.Name != studies.JudgeGrader {
			continue
		}
		gs, err := st.GradesBy(ctx, spec.ID, studies.JudgeName(jk.Judge), strconv.Itoa(studies.JudgeGraderVersion))
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			if len(g) > 0 {
				last := g[len(g)-1]
				out[studies.TrialKey{Arm: last.Arm, JobKind: last.JobKind, Task: last.TaskID, Repeat: last.Repeat}.String()] = last
			}
		}
	}
	return out, nil
}

// judgeGrades puts the judge's grade in place of the bank key's on each
// trial of a judged job kind: the judge's is the grade a study counts. A
// trial the judge left ungraded (its answer unreadable) says so.
func judgeGrades(d *studies.Design, trials []TryTrial, grades map[string]receipts.GradeRecord) {
	for n, t := range trials {
		i := slices.IndexFunc(d.JobKinds, func(jk studies.JobKind) bool { return jk.Name == t.JobKind })
		if i < 0 || d.JobKinds[i].Grader.Name != studies.JudgeGrader {
			continue
		}
		jk := d.JobKinds[i]
		if t.Outcome != string(receipts.Scored) && t.Outcome != string(receipts.Capped) {
			continue
		}
		g, ok := grades[studies.TrialKey{Arm: t.Arm, JobKind: t.JobKind, Task: t.Task, Repeat: 1}.String()]
		if !ok {
			trials[n].Graded, trials[n].Pass, trials[n].Score = false, false, 0
			trials[n].Detail = fmt.Sprintf("the judge %s left it ungraded (its answer did not score every label)", jk.Judge)
			continue
		}
		trials[n].Graded, trials[n].Pass, trials[n].Score = true, g.Pass, g.Score
		trials[n].Grader = g.Grader
	}
}

// awaitJudge marks the trials of a judged job kind ungraded until the judge
// has graded them: while a try runs, the bank key's grade is not the one
// the try will show.
func awaitJudge(d *studies.Design, trials []TryTrial) []TryTrial {
	for n, t := range trials {
		i := slices.IndexFunc(d.JobKinds, func(jk studies.JobKind) bool { return jk.Name == t.JobKind })
		if i >= 0 && d.JobKinds[i].Grader.Name == studies.JudgeGrader {
			trials[n].Graded, trials[n].Pass, trials[n].Score = false, false, 0
			trials[n].Detail = "waiting for the judge " + d.JobKinds[i].Judge
		}
	}
	return trials
}
