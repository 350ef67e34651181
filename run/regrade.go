package run

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"rig/genrecord"
	"rig/internal/layout"
	"rig/receipts"
	"rig/studies"
	"rig/tasks"
)

// ErrNotRegradable is a trial whose output rig did not keep in a form a
// grader can read again.
var ErrNotRegradable = errors.New("output not kept for re-grading")

// RegradeStore is the part of a study's store a re-grade reads and writes.
type RegradeStore interface {
	Counted(ctx context.Context, executionID string) (map[receipts.TrialKey]receipts.Receipt, error)
	Grades(ctx context.Context, executionID string) ([]receipts.GradeRecord, error)
	PutGrades(ctx context.Context, grades []receipts.GradeRecord) error
}

// RegradeInput is what Regrade reads; the daemon fills it from a study.
type RegradeInput struct {
	Store    RegradeStore
	Exec     string
	RecDir   string // the execution's generation records
	Banks    map[string]*tasks.Bank
	Registry *tasks.Registry
	// Grader limits the re-grade to trials whose task grader has this
	// name; empty re-grades every trial with its own task grader.
	Grader string
	// Version is the grader version to grade with; 0 means the newest
	// registered one.
	Version int
	// Now is the clock the new grades are stamped with; nil is the wall
	// clock in UTC.
	Now func() time.Time
}

// RegradeRow compares a trial's stored grade with its re-grade.
type RegradeRow struct {
	JobKind    string  `json:"job_kind"`
	Task       string  `json:"task"`
	Arm        string  `json:"arm"`
	Repeat     int     `json:"repeat"`
	OldGrader  string  `json:"old_grader"`
	OldScore   float64 `json:"old_score"`
	OldPass    bool    `json:"old_pass"`
	NewGrader  string  `json:"new_grader"`
	NewScore   float64 `json:"new_score"`
	NewPass    bool    `json:"new_pass"`
	Changed    bool    `json:"changed"`
	AlreadyHad bool    `json:"already_had,omitempty"` // this version's grade was stored by an earlier re-grade
}

// RegradeReport is what a re-grade stored and how it compares.
type RegradeReport struct {
	Study     string       `json:"study"`
	Execution string       `json:"execution"`
	Rows      []RegradeRow `json:"rows"`
	Written   int          `json:"written"`
	Changed   int          `json:"changed"`
	// Skipped says which trials were left alone and why.
	Skipped []string `json:"skipped,omitempty"`
}

// Regrade re-grades an execution's stored outputs with another version of
// their graders and stores the new grades beside the old ones, which are
// never touched. Unknown graders and versions, and outputs rig did not
// keep, are refused before anything is written; all new grades are written
// in one call to the store. The report's Study is left for the caller.
func Regrade(ctx context.Context, in RegradeInput) (*RegradeReport, error) {
	if in.Now == nil {
		in.Now = func() time.Time { return time.Now().UTC() }
	}
	if strings.HasPrefix(in.Grader, studies.JudgeGrader) {
		return nil, fmt.Errorf("--grader %s: a judge's grades come from running its arm; re-grade them by rerunning the study as a new execution (rig study rerun STUDY EXECUTION)", in.Grader)
	}
	if in.Grader != "" {
		// Refuse an unknown grader or version before reading any output.
		if _, err := pickGrader(in.Registry, in.Grader, in.Version); err != nil {
			return nil, err
		}
	}
	counted, err := in.Store.Counted(ctx, in.Exec)
	if err != nil {
		return nil, err
	}
	keys := make([]receipts.TrialKey, 0, len(counted))
	for k := range counted {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	existing, err := in.Store.Grades(ctx, in.Exec)
	if err != nil {
		return nil, err
	}
	rg := &regrading{in: in, stored: map[gradeKey]receipts.GradeRecord{}, rep: &RegradeReport{Execution: in.Exec}}
	for _, g := range existing {
		rg.stored[gradeKey{g.Trial(), g.Grader, g.GraderVersion}] = g
	}
	for _, k := range keys {
		if err := rg.regradeTrial(ctx, k, counted[k]); err != nil {
			return nil, err
		}
	}
	return rg.finish(ctx)
}

// gradeKey is what a grade is stored once per: a trial and a grader version.
type gradeKey struct {
	trial           receipts.TrialKey
	grader, version string
}

// regrading is one re-grade under way: the grades already stored and what
// it has graded so far.
type regrading struct {
	in      RegradeInput
	stored  map[gradeKey]receipts.GradeRecord
	rep     *RegradeReport
	texts   map[string]string // the records' texts, read at the first grade to make
	grades  []receipts.GradeRecord
	notKept []string
}

// regradeTrial re-grades one counted trial, or records why it is skipped.
func (rg *regrading) regradeTrial(ctx context.Context, k receipts.TrialKey, r receipts.Receipt) error {
	in := rg.in
	if r.Grade == nil || r.Outcome == receipts.FailedAtCard {
		rg.rep.Skipped = append(rg.rep.Skipped, fmt.Sprintf("%s: %s, nothing to re-grade", k, r.Outcome))
		return nil
	}
	bank := in.Banks[r.JobKind]
	if bank == nil {
		return fmt.Errorf("job kind %s of trial %s has no bank in the snapshot", r.JobKind, k)
	}
	task, ok := bank.Task(r.TaskID)
	if !ok {
		return fmt.Errorf("trial %s: task %s is not in bank %s", k, r.TaskID, bank.File)
	}
	if in.Grader != "" && task.Grader.Name != in.Grader {
		return nil
	}
	g, err := pickGrader(in.Registry, task.Grader.Name, in.Version)
	if err != nil {
		return fmt.Errorf("trial %s (task %s grades with %s): %w", k, task.ID, task.Grader.Name, err)
	}
	newVer := strconv.Itoa(g.Version())
	if g.Name() == r.Grade.Grader && newVer == r.Grade.GraderVersion {
		if in.Version == 0 {
			return fmt.Errorf("trial %s was graded by %s@v%s, the newest version registered (known: %s): nothing newer to re-grade with", k, g.Name(), newVer, strings.Join(in.Registry.Known(), ", "))
		}
		return fmt.Errorf("trial %s was graded by %s@v%s already; re-grading is with another version (pass another --version)", k, g.Name(), newVer)
	}
	var repo map[string]string
	if r.Harness == "aider" {
		var kept bool
		if repo, kept = KeptRepo(layout.Records(in.RecDir), TrialCallID(r)); !kept {
			rg.notKept = append(rg.notKept, k.String())
			return nil
		}
	}
	row := RegradeRow{JobKind: r.JobKind, Task: r.TaskID, Arm: r.Arm, Repeat: r.Repeat,
		OldGrader: r.Grade.Grader + "@v" + r.Grade.GraderVersion, OldScore: r.Grade.Score, OldPass: r.Grade.Pass,
		NewGrader: g.Name() + "@v" + newVer}
	if old, ok := rg.stored[gradeKey{k, g.Name(), newVer}]; ok {
		row.NewScore, row.NewPass, row.AlreadyHad = old.Score, old.Pass, true
	} else if err := rg.gradeAgain(ctx, k, r, task, g, repo, &row); err != nil {
		return err
	}
	row.Changed = row.NewScore != row.OldScore || row.NewPass != row.OldPass
	if row.Changed {
		rg.rep.Changed++
	}
	rg.rep.Rows = append(rg.rep.Rows, row)
	return nil
}

// gradeAgain runs grader g on the trial's kept output (its text, or for a
// code trial its repository) and fills in row's new grade.
func (rg *regrading) gradeAgain(ctx context.Context, k receipts.TrialKey, r receipts.Receipt, task tasks.Task, g tasks.Grader, repo map[string]string, row *RegradeRow) error {
	in := rg.in
	if rg.texts == nil {
		var err error
		if rg.texts, err = RecordTexts(in.RecDir); err != nil {
			return err
		}
	}
	call := TrialCallID(r)
	text, ok := rg.texts[call]
	if !ok && repo == nil && r.GenerationSHA256 != genrecord.EmptySum {
		return fmt.Errorf("trial %s: %w: no row %s in %s", k, ErrNotRegradable, call, in.RecDir)
	}
	ng, err := in.Registry.Regrade(ctx, task, tasks.Output{TrialID: call, TaskID: task.ID, Text: text, Files: repo}, g.Version())
	if err != nil {
		return err
	}
	row.NewScore, row.NewPass = ng.Score, ng.Pass
	rg.grades = append(rg.grades, receipts.GradeRecord{ExecutionID: in.Exec, Arm: r.Arm, JobKind: r.JobKind, TaskID: r.TaskID,
		Repeat: r.Repeat, Attempt: r.Attempt, Grader: ng.Grader, GraderVersion: strconv.Itoa(g.Version()), Score: ng.Score, Pass: ng.Pass,
		Detail: "re-grade of " + row.OldGrader, GradedAt: in.Now()})
	return nil
}

// finish says what could not be re-graded, refuses a re-grade with nothing
// in it and stores the new grades.
func (rg *regrading) finish(ctx context.Context) (*RegradeReport, error) {
	in, rep := rg.in, rg.rep
	if len(rg.notKept) > 0 {
		msg := fmt.Sprintf("%d code trials (%s): their execution predates kept repositories (only the model calls are kept), so the code grader cannot run again on them", len(rg.notKept), strings.Join(firstN(rg.notKept, 3), ", "))
		if in.Grader != "" {
			return nil, fmt.Errorf("%w: %s; rerun the study as a new execution to grade code with a new version", ErrNotRegradable, msg)
		}
		rep.Skipped = append(rep.Skipped, msg)
	}
	if len(rep.Rows) == 0 {
		return nil, fmt.Errorf("execution %s has no trial to re-grade%s", in.Exec, graderClause(in.Grader))
	}
	if err := in.Store.PutGrades(ctx, rg.grades); err != nil {
		return nil, err
	}
	rep.Written = len(rg.grades)
	return rep, nil
}

func graderClause(name string) string {
	if name == "" {
		return ""
	}
	return " graded by " + name
}

func firstN(xs []string, n int) []string {
	if len(xs) > n {
		return append(xs[:n:n], "…")
	}
	return xs
}

// pick returns the named grader at version, or its newest version when
// version is 0.
func pickGrader(r *tasks.Registry, name string, version int) (tasks.Grader, error) {
	if version == 0 {
		return r.Latest(name)
	}
	return r.Get(tasks.GraderRef{Name: name, Version: version})
}
