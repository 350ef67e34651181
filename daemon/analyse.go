package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"rig/analysis"
	"rig/fidelity"
	"rig/genrecord"
	"rig/internal/atomicfile"
	"rig/receipts"
	"rig/report"
	"rig/report/findings"
	"rig/run"
	"rig/studies"
	"rig/tasks"
)

// stopStore is the store's early-stopping record, read when a design has
// a stopping rule.
type stopStore interface {
	Stop(ctx context.Context, executionID string) (json.RawMessage, bool, error)
}

// inputStore is the part of the store the report path reads.
type inputStore interface {
	Receipts(ctx context.Context, executionID string) ([]receipts.Receipt, error)
	Grades(ctx context.Context, executionID string) ([]receipts.GradeRecord, error)
	run.PreflightReader
}

// readInputs reads what an analysis of execID (the latest finished
// execution when empty) needs, once.
func (rp Reports) readInputs(ctx context.Context, name, execID string) (*findings.Evidence, error) {
	if execID != "" {
		if _, err := rp.s.execution(name, execID); err != nil {
			return nil, err
		}
	}
	snap, d, err := rp.s.frozen(name)
	if err != nil {
		return nil, err
	}
	if execID == "" {
		l, err := rp.s.lifecycle(name)
		if err != nil {
			return nil, err
		}
		if len(l.Finished) == 0 {
			return nil, fmt.Errorf("study %s has no finished execution to analyse", name)
		}
		execID = l.Finished[len(l.Finished)-1]
	}
	st, err := rp.s.store(name)
	if err != nil {
		return nil, err
	}
	x, err := rp.s.execution(name, execID)
	if err != nil {
		return nil, err
	}
	ev := &findings.Evidence{Study: name, Execution: execID, Snapshot: snap, Design: d}
	rp.generationRows(name, execID, ev.Kept.Add)
	var p studies.Plan
	if err := atomicfile.ReadJSON(x.Plan(), &p); err == nil {
		ev.Plan = &p
	}
	if err := readStore(ctx, st, ev); err != nil {
		return nil, err
	}
	if err := readFidelity(ctx, x.Records().Fidelity(), ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// readFidelity reads the execution's fidelity records, when it kept any,
// and computes their figures with the analysis seed, so the report and the
// fidelity_kl guardrail read one computation. Records that do not read
// fail the request: a guardrail on them must not pass for want of them.
func readFidelity(ctx context.Context, path string, ev *findings.Evidence) error {
	recs, err := fidelity.ReadStudy(path)
	if err != nil {
		return fmt.Errorf("study %s: its fidelity records: %w (the report reads them whole, since the fidelity section and a fidelity_kl guardrail read them; restore the file the run wrote)", ev.Study, err)
	}
	if len(recs) == 0 {
		return nil
	}
	ev.Fidelity, err = findings.ComputeFidelity(ctx, recs, ev.Design, findings.FidelityOptions(ev.Snapshot.DesignHash))
	if err != nil {
		return fmt.Errorf("study %s: %w", ev.Study, err)
	}
	return nil
}

// readStore reads the execution's receipts, its grades when a judge grades
// a job kind, and a card sub-study's preflight verdicts. A verdict that
// cannot be read fails the request: without it the cells that do not fit
// would be ranked.
func readStore(ctx context.Context, st inputStore, ev *findings.Evidence) error {
	var err error
	if ev.Receipts, err = st.Receipts(ctx, ev.Execution); err != nil {
		return err
	}
	if slices.ContainsFunc(ev.Design.JobKinds, func(jk studies.JobKind) bool { return jk.Grader.Name == studies.JudgeGrader }) {
		if ev.Grades, err = st.Grades(ctx, ev.Execution); err != nil {
			return err
		}
	}
	if ss, ok := st.(stopStore); ok && ev.Design.Stopping != nil {
		raw, found, err := ss.Stop(ctx, ev.Execution)
		if err != nil {
			return err
		}
		if found {
			var seq analysis.Sequential
			if err := json.Unmarshal(raw, &seq); err != nil {
				return fmt.Errorf("execution %s: its early-stopping record: %w (rig study check %s)", ev.Execution, err, ev.Study)
			}
			ev.Sequential = &seq
		}
	}
	if ev.Design.IsCardStudy() {
		if ev.Verdicts, err = run.ReadCardVerdicts(ctx, st, ev.Design); err != nil {
			return fmt.Errorf("study %s: %w; without it rig cannot tell which cells fit and ranks none (check the store: rig study check %s; rig study preflight %s decides the cells with no verdict)",
				ev.Study, err, ev.Study, ev.Study)
		}
	}
	return nil
}

// Analysis is one execution's analysis with the inputs it read.
type Analysis struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
	// Seed is the analysis seed, drawn from the design (SeedFrom says how).
	Seed     uint64           `json:"seed"`
	SeedFrom string           `json:"seed_from"`
	Input    analysis.Input   `json:"input"`
	Report   *analysis.Report `json:"report"`
}

// Analyse runs the pre-registered analysis on an execution (the latest
// finished one when execID is empty).
func (rp Reports) Analyse(ctx context.Context, name, execID string) (*Analysis, error) {
	in, err := rp.readInputs(ctx, name, execID)
	if err != nil {
		return nil, err
	}
	return analyse(ctx, in)
}

// analyse runs the analysis on what readInputs read (findings.Input says
// what of it the analysis reads).
func analyse(ctx context.Context, ev *findings.Evidence) (*Analysis, error) {
	ai := findings.Input(ev)
	rep, err := analysis.Analyse(ctx, ai)
	if err != nil {
		return nil, err
	}
	return &Analysis{Study: ev.Study, Execution: ev.Execution, Seed: ai.Design.Seed, SeedFrom: analysis.SeedFrom, Input: ai, Report: rep}, nil
}

// ReportFiles are the paths `rig study report` wrote.
type ReportFiles struct {
	HTML     string `json:"html"`
	JSON     string `json:"json"`
	Markdown string `json:"markdown"`
	Summary  string `json:"summary"`
}

// Report analyses an execution and writes the self-contained HTML report
// with its JSON and Markdown twins under the study's reports/ directory.
func (rp Reports) Report(ctx context.Context, name string, opts ReportOptions) (ReportFiles, error) {
	in, err := rp.readInputs(ctx, name, opts.Execution)
	if err != nil {
		return ReportFiles{}, err
	}
	a, err := analyse(ctx, in)
	if err != nil {
		return ReportFiles{}, err
	}
	if opts.ReplaySample > 0 {
		if _, err := rp.ReplaySample(ctx, name, a.Execution, opts.ReplaySample); err != nil {
			return ReportFiles{}, fmt.Errorf("replaying a sample of %s's generation records: %w", a.Execution, err)
		}
	}
	data := rp.reportData(in, a)
	sd, err := rp.s.study(name)
	if err != nil {
		return ReportFiles{}, err
	}
	dir, err := sd.Report(a.Execution)
	if err != nil {
		return ReportFiles{}, err
	}
	if err := os.MkdirAll(dir.Dir(), 0o700); err != nil {
		return ReportFiles{}, err
	}
	files := ReportFiles{HTML: dir.HTML(), JSON: dir.JSON(), Markdown: dir.Markdown()}
	for path, write := range map[string]func(w io.Writer) error{
		files.HTML:     func(w io.Writer) error { return report.WriteHTML(w, data) },
		files.JSON:     func(w io.Writer) error { return report.WriteJSON(w, data) },
		files.Markdown: func(w io.Writer) error { return report.WriteMarkdown(w, data) },
	} {
		if err := atomicfile.Write(path, 0o600, write); err != nil {
			return ReportFiles{}, err
		}
	}
	var sb strings.Builder
	a.Report.WriteSummary(&sb)
	files.Summary = sb.String()
	if err := atomicfile.WriteJSON(dir.Analysis(), a, 0o600); err != nil {
		return ReportFiles{}, err
	}
	return files, nil
}

// reportData reads what the report shows beyond the evidence and the
// analysis, and maps it all onto the report (findings.ReportData). Besides
// ev, it reads only the study's own files and store: its registration's
// licences, the frozen banks, the governor events, the execution's kept
// replay and the recorded decision.
func (rp Reports) reportData(ev *findings.Evidence, a *Analysis) report.Data {
	x := findings.Extras{GeneratedAt: time.Now().UTC(), Banks: map[string]*tasks.Bank{}}
	// The verdicts as the study's own registry gives them, not the bundled
	// one. Only the registry is read from the registration: its design is
	// the snapshot's, already parsed.
	var reg studies.Registration
	if sd, err := rp.s.study(ev.Study); err == nil && atomicfile.ReadJSON(sd.Registration(), &reg) == nil {
		if res, err := studies.LicenceResultFor(ev.Design.Items, reg.Licences); err == nil {
			x.Licences = res.Lines
		}
	}
	for _, fb := range ev.Snapshot.Banks {
		// A bank that no longer reads at its frozen hash only leaves the
		// rows' category and tags empty.
		if b, err := tasks.LoadBank(fb.Path); err == nil && b.Hash == fb.SHA256 {
			x.Banks[fb.JobKind] = b
		}
	}
	if st, err := rp.s.store(ev.Study); err == nil {
		x.Events, _ = st.GovernorEvents(context.Background())
	}
	var sums []genrecord.Summary
	if ex, err := rp.s.execution(ev.Study, a.Execution); err == nil && atomicfile.ReadJSON(ex.Replay(), &sums) == nil {
		x.Replay = sums // never replayed (or unreadable): no section
	}
	if rec, err := rp.decision(ev.Study); err == nil {
		x.Decision = &findings.Decided{Actor: rec.Actor, At: rec.At, Rationale: rec.Rationale, Amendments: rp.amendments(ev.Study)}
	}
	return findings.ReportData(ev, a.Input, a.Report, x)
}

// shortHash is the first 12 hex digits of a digest, as proposals name
// comparisons and models.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// generationRows calls each for every row of the execution's generation
// records, in file order; a record that does not read is passed over (the
// report's sample and echo checks are best effort, the record's own check
// is rig study check's).
func (rp Reports) generationRows(name, execID string, each func(genrecord.Row)) {
	x, err := rp.s.execution(name, execID)
	if err != nil {
		return
	}
	files, _ := filepath.Glob(x.Generations())
	for _, f := range files {
		_, rows, err := genrecord.ReadAll(f)
		if err != nil {
			continue
		}
		for _, r := range rows {
			each(r)
		}
	}
}
