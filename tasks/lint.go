package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Near-duplicate settings for tasks inside one bank: word 3-gram shingles
// of the prompt and files, flagged at Jaccard ≥ 0.9. Tasks from one template
// share wording by design; 0.9 is left for tasks that differ by a word or
// two, which add a count without adding a case.
const (
	lintShingle   = 3
	lintThreshold = 0.9
)

// Pair is two tasks and how alike they are (1 for exact duplicates).
type Pair struct {
	A          string  `json:"a"`
	B          string  `json:"b"`
	Similarity float64 `json:"similarity"`
}

// Report is what `rig tasks lint` prints. Templates is the count that
// matters: forty tasks from two templates are two cases, not forty.
type Report struct {
	File             string         `json:"file"`
	JobKind          string         `json:"job_kind"`
	BankVersion      string         `json:"bank_version"`
	Hash             string         `json:"hash"`
	Tasks            int            `json:"tasks"`
	Holdout          int            `json:"holdout"`
	Templates        int            `json:"templates"`
	TemplateCounts   map[string]int `json:"template_counts"`
	Difficulty       map[string]int `json:"difficulty"`
	PublicBenchmarks []string       `json:"public_benchmarks,omitempty"`
	ExactDuplicates  []Pair         `json:"exact_duplicates,omitempty"`
	NearDuplicates   []Pair         `json:"near_duplicates,omitempty"`
	NearMethod       string         `json:"near_method"`
	KeyFailures      []KeyFailure   `json:"key_failures,omitempty"`
	Warnings         []string       `json:"warnings,omitempty"`
}

// OK reports whether the lint found nothing that blocks an audit.
func (r Report) OK() bool {
	return len(r.ExactDuplicates) == 0 && len(r.KeyFailures) == 0
}

// Lint counts templates and difficulty, finds exact and near duplicates and
// runs every key through its grader. It reads only; nothing is written.
func Lint(ctx context.Context, b *Bank, reg *Registry) Report {
	r := Report{
		File: b.File, JobKind: b.Header.JobKind, BankVersion: b.Header.BankVersion, Hash: b.Hash,
		Tasks: len(b.Tasks), TemplateCounts: map[string]int{}, Difficulty: map[string]int{Easy: 0, Medium: 0, Hard: 0},
		PublicBenchmarks: b.PublicBenchmarks(),
		NearMethod:       NearMethod(),
	}
	for _, t := range b.Tasks {
		r.TemplateCounts[t.TemplateID]++
		r.Difficulty[t.Difficulty]++
		if t.Holdout {
			r.Holdout++
		}
	}
	r.Templates = len(r.TemplateCounts)
	r.ExactDuplicates, r.NearDuplicates = duplicates(b.Tasks)
	r.KeyFailures = checkKeys(ctx, b, reg)

	if r.Templates < 10 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("only %d distinct templates; the count that matters is templates, not tasks (aim for 10 or more)", r.Templates))
	}
	for _, d := range []string{Easy, Medium, Hard} {
		if r.Difficulty[d] == 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("no %s tasks; mix difficulty", d))
		}
	}
	if len(r.PublicBenchmarks) > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("tasks from public benchmarks (%s) are probably in pretraining: use them only as a change detector; a high score may be recall", strings.Join(r.PublicBenchmarks, ", ")))
	}
	if r.Holdout == 0 {
		r.Warnings = append(r.Warnings, "no hold-out tasks; keep a slice that never feeds prompt tuning")
	}
	return r
}

// duplicates finds exact duplicates (the same normalized words) and near
// duplicates (word-shingle Jaccard >= lintThreshold between different
// texts). Texts that normalize alike are compared once, and near pairs come
// from MinHash LSH candidates (nearPairs) instead of every pair, so a bank
// of 100,000 tasks takes seconds. Both lists are in bank order: by the
// first task's position, then the second's.
func duplicates(ts []Task) (exact, near []Pair) {
	norms := make([]string, len(ts))
	shs := make([][]uint64, len(ts))
	parallel(len(ts), workersFor(len(ts)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ws := words(taskText(ts[i]))
			norms[i] = strings.Join(ws, " ")
			shs[i] = sortedShingles(ws, lintShingle)
		}
	})
	group := map[string]int{} // normalized text -> index in members
	var members [][]int       // task indexes per distinct text, ascending
	var sets [][]uint64       // shingles per distinct text
	for i, norm := range norms {
		g, ok := group[norm]
		if !ok {
			g = len(members)
			group[norm] = g
			members = append(members, nil)
			sets = append(sets, shs[i])
		}
		members[g] = append(members[g], i)
	}
	var ex, nr []simPair
	for _, m := range members {
		for a := range m {
			for _, j := range m[a+1:] {
				ex = append(ex, simPair{i: m[a], j: j, s: 1})
			}
		}
	}
	for _, p := range nearPairs(sets, lintThreshold) {
		for _, a := range members[p.i] {
			for _, b := range members[p.j] {
				nr = append(nr, simPair{i: min(a, b), j: max(a, b), s: p.s})
			}
		}
	}
	return bankOrder(ts, ex), bankOrder(ts, nr)
}

// bankOrder sorts pairs by (i, j) and names their tasks.
func bankOrder(ts []Task, ps []simPair) []Pair {
	if len(ps) == 0 {
		return nil
	}
	slices.SortFunc(ps, func(x, y simPair) int {
		if x.i != y.i {
			return x.i - y.i
		}
		return x.j - y.j
	})
	out := make([]Pair, len(ps))
	for k, p := range ps {
		out[k] = Pair{A: ts[p.i].ID, B: ts[p.j].ID, Similarity: p.s}
	}
	return out
}

// baselineChecker is implemented by graders that can also check the task
// before its fix (the code grader: unfixed tests must fail).
type baselineChecker interface {
	CheckBaseline(ctx context.Context, t Task) error
}

// checkKeys runs every key through its own grader: the key must pass.
func checkKeys(ctx context.Context, b *Bank, reg *Registry) []KeyFailure {
	var fails []KeyFailure
	for i, err := range checkAll(ctx, reg, b.Tasks) {
		if err != nil {
			fails = append(fails, KeyFailure{TaskID: b.Tasks[i].ID, Reason: fmt.Sprintf("line %d: %v", b.Tasks[i].line, err)})
		}
	}
	return fails
}

// checkAll checks keys on all CPUs: code keys run test suites, and a bank
// of them takes minutes one at a time. Errors come back in task order.
func checkAll(ctx context.Context, reg *Registry, ts []Task) []error {
	errs := make([]error, len(ts))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = checkKey(ctx, reg, t)
		}()
	}
	wg.Wait()
	return errs
}

func checkKey(ctx context.Context, reg *Registry, t Task) error {
	g, err := reg.Get(t.Grader)
	if err != nil {
		return err
	}
	if err := g.CheckKey(t); err != nil {
		return err
	}
	out, err := g.KeyOutput(t)
	if err != nil {
		return err
	}
	gr, err := g.Grade(ctx, t, out)
	if err != nil {
		return err
	}
	if !gr.Pass {
		if len(gr.Details) == 0 {
			return fmt.Errorf("the key scores %.2f and does not pass its own grader (make the key's answer one the grader accepts)", gr.Score)
		}
		// The grader's details as JSON, as a report shows them, not Go's map[...].
		details, _ := json.Marshal(gr.Details)
		return fmt.Errorf("the key scores %.2f and does not pass its own grader (the grader's details: %s)", gr.Score, details)
	}
	if bc, ok := g.(baselineChecker); ok {
		if err := bc.CheckBaseline(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// WriteText prints the report for a person.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: job kind %s, bank_version %s, hash %s\n", r.File, r.JobKind, r.BankVersion, short(r.Hash))
	fmt.Fprintf(&b, "tasks %d (hold-out %d), distinct templates %d\n", r.Tasks, r.Holdout, r.Templates)
	fmt.Fprintf(&b, "difficulty: easy %d, medium %d, hard %d\n", r.Difficulty[Easy], r.Difficulty[Medium], r.Difficulty[Hard])
	names := make([]string, 0, len(r.TemplateCounts))
	for n := range r.TemplateCounts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  template %-24s %d\n", n, r.TemplateCounts[n])
	}
	fmt.Fprintf(&b, "exact duplicates: %d\n", len(r.ExactDuplicates))
	for _, p := range r.ExactDuplicates {
		fmt.Fprintf(&b, "  %s = %s\n", p.A, p.B)
	}
	fmt.Fprintf(&b, "near duplicates (%s): %d\n", r.NearMethod, len(r.NearDuplicates))
	for _, p := range r.NearDuplicates {
		fmt.Fprintf(&b, "  %s ~ %s (%.2f)\n", p.A, p.B, p.Similarity)
	}
	fmt.Fprintf(&b, "keys failing their own grader: %d\n", len(r.KeyFailures))
	for _, f := range r.KeyFailures {
		fmt.Fprintf(&b, "  %s: %s\n", f.TaskID, f.Reason)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// RunLint is the body of `rig tasks lint BANK`: parse, lint, print. It
// returns an error when the bank does not parse or the lint finds keys that
// fail or exact duplicates.
func RunLint(ctx context.Context, w io.Writer, file string, reg *Registry) (Report, error) {
	b, err := LoadBank(file)
	if err != nil {
		return Report{}, err
	}
	r := Lint(ctx, b, reg)
	if err := r.WriteText(w); err != nil {
		return r, err
	}
	if !r.OK() {
		return r, errors.New(file + ": lint found exact duplicates or failing keys (see above)")
	}
	return r, nil
}
