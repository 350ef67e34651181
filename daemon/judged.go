package daemon

import (
	"fmt"
	"strconv"

	"rig/receipts"
	"rig/studies"
	"rig/studies/analysis"
)

// judgedTrials puts the judge's grades (all, the execution's stored grades)
// in place of the task graders' for every job kind graded by a judge: the
// judge's score is the job kind's score. A counted trial the judge has not
// graded is missing (a warning, never a zero); one that blew its card budget
// keeps its failing grade.
func judgedTrials(d *studies.Design, all []receipts.GradeRecord, trials []analysis.Trial) []analysis.Trial {
	judgeOf := map[string]string{}
	for _, jk := range d.JobKinds {
		if jk.Grader.Name == studies.JudgeGrader {
			judgeOf[jk.Name] = studies.JudgeName(jk.Judge)
		}
	}
	if len(judgeOf) == 0 {
		return trials
	}
	version := strconv.Itoa(studies.JudgeGraderVersion)
	grade := map[string]receipts.GradeRecord{}
	for _, g := range all {
		if judgeOf[g.JobKind] == g.Grader && g.GraderVersion == version {
			grade[g.JobKind+"|"+g.Arm+"|"+g.TaskID+"|"+strconv.Itoa(g.Repeat)] = g
		}
	}
	for i := range trials {
		t := &trials[i]
		if judgeOf[t.JobKind] == "" || t.Missing || t.Preempted || t.BudgetBlown {
			continue
		}
		g, ok := grade[t.JobKind+"|"+t.Arm+"|"+t.Task+"|"+strconv.Itoa(t.Repeat)]
		if !ok {
			t.Missing, t.Score, t.Pass = true, 0, false
			continue
		}
		t.Score, t.Pass = g.Score, g.Pass
	}
	return trials
}

// judgeIDs gives every arm of a judged job kind its judge's identity (arm,
// grader version and model digest), so the analysis calls two arms graded
// by different judges not comparable.
func judgeIDs(ad *analysis.Design, d *studies.Design, snap *studies.Snapshot) {
	for _, jk := range d.JobKinds {
		if jk.Grader.Name != studies.JudgeGrader {
			continue
		}
		id := fmt.Sprintf("%s@v%d", studies.JudgeName(jk.Judge), studies.JudgeGraderVersion)
		if fa, ok := snap.Arm(jk.Judge); ok {
			id += "/" + shortHash(fa.ModelSHA256)
		}
		for i := range ad.Arms {
			if a := d.Arm(ad.Arms[i].Name); a != nil && a.Role != studies.RoleJudge && a.RunsJobKind(jk.Name) {
				ad.Arms[i].JudgeID = id
			}
		}
	}
}
