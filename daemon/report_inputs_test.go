package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"rig/analysis"
	"rig/internal/atomicfile"
	"rig/preflight"
	"rig/receipts"
	"rig/report"
	"rig/report/findings"
	"rig/run"
	"rig/studies"
	"rig/studies/studytest"
)

// cardStudy is a frozen card sub-study on a Service, written the way freeze
// and a finished execution leave it: two models at the reference card and at
// a 1 GiB step-down, six scored extract-json tasks per cell, and a stored
// preflight verdict per cell. unfit is the cell whose verdict says it does
// not fit.
type cardStudy struct {
	svc   *Service
	name  string
	snap  *studies.Snapshot
	d     *studies.Design
	st    *receipts.Store
	unfit string
}

// newCardStudy freezes the demo's extract-json arms as a card sub-study;
// sentence changes the design (and so its hash) without changing the study.
// verdict, when set, replaces the stored verdict of the unfit cell.
func newCardStudy(t *testing.T, sentence string, verdict json.RawMessage) *cardStudy {
	t.Helper()
	ctx := context.Background()
	demo := studytest.DemoDesign(t)
	demo.Name = "cards"
	demo.Sentences.WhyTheMeasure += sentence
	demo.JobKinds = demo.JobKinds[:1]
	var arms []studies.Arm
	for _, a := range demo.Arms {
		if a.Name == "smollm2-llama-server" || a.Name == "smollm2-q8-llama-server" {
			arms = append(arms, a)
		}
	}
	demo.Arms = arms
	demo.Kind = studies.KindCard
	demo.CardProfiles = []studies.CardProfile{{Name: "simulated-1gib", MemoryMiB: 1024, Simulated: true}}
	raw, err := json.Marshal(demo)
	if err != nil {
		t.Fatal(err)
	}
	d, err := studies.ParseDesign("design.json", raw) // expands the cells
	if err != nil {
		t.Fatal(err)
	}
	canon, err := studies.Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	dh, err := studies.DesignHash(d)
	if err != nil {
		t.Fatal(err)
	}
	snap := &studies.Snapshot{Version: studies.SnapshotVersion, DesignHash: dh, Design: canon}
	if snap.Hash, err = studies.Hash(snap); err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	c := &cardStudy{svc: svc, name: d.Name, snap: snap, d: d, unfit: "smollm2-q8-llama-server@simulated-1gib"}
	dir := studyDir(t, svc, c.name).Dir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for file, v := range map[string]any{
		"registration.json": studies.Registration{Name: c.name, DesignHash: dh, Design: canon},
		"lifecycle.json":    studies.Lifecycle{State: studies.Frozen, DesignHash: dh, SnapshotHash: snap.Hash, Finished: []string{"exec-1"}},
		"snapshot.json":     snap,
	} {
		if err := atomicfile.WriteJSON(filepath.Join(dir, file), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if c.st, err = svc.store(c.name); err != nil {
		t.Fatal(err)
	}
	if err := c.st.Transition(ctx, receipts.Transition{From: "", To: "approved", Who: "d", Why: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := c.st.Freeze(ctx, dh, receipts.Transition{From: "approved", To: "frozen", Who: "d", Why: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := c.st.PutExecution(ctx, receipts.Execution{ID: "exec-1", Attempt: 1, Status: receipts.Done, DesignHash: dh}); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(d.Arms, func(a studies.Arm) bool { return a.Name == c.unfit }) {
		t.Fatalf("no cell %s among %v", c.unfit, d.Arms)
	}
	for ai, a := range d.Arms {
		prof := studies.PreflightProfile(d, a)
		v := preflight.Verdict{Outcome: preflight.OutcomeFits, Fits: true, Reason: "fits", Profile: prof}
		if a.Name == c.unfit {
			v = preflight.Verdict{Outcome: preflight.OutcomeDoesntFit, Reason: "needs 2 GiB, the card has 1 GiB", Profile: prof}
		}
		rawV, err := v.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if a.Name == c.unfit && verdict != nil {
			rawV = verdict
		}
		if err := c.st.PutPreflight(ctx, a.Name, prof.Name, rawV); err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			pass := (i+ai)%3 != 0
			score := 0.0
			if pass {
				score = 1
			}
			r := receipts.Receipt{SchemaVersion: receipts.SchemaVersion, StudyID: c.name, ExecutionID: "exec-1", DesignHash: dh, Arm: a.Name,
				JobKind: "extract-json", TaskID: "t" + string(rune('1'+i)), Repeat: 1, Attempt: 1, Outcome: receipts.Scored,
				ModelDigest: strings.Repeat("a", 64), Runtime: "llama-server", Harness: "llama-server", HarnessVersion: "b1",
				Pins: map[string]string{"quant": a.Pins.Quant}, Machine: "test machine", WallMS: int64(1000 + 100*ai),
				GenerationSHA256: strings.Repeat("d", 64), Grade: &receipts.Grade{Score: score, Pass: pass, Grader: "json", GraderVersion: "1"}}
			if err := c.st.PutReceipt(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c
}

func rankedArms(a *Analysis) []string {
	var out []string
	for _, k := range a.Report.Kinds {
		for _, ar := range k.Arms {
			out = append(out, ar.Arm)
		}
	}
	return out
}

// TestReportLeavesOutCellsThatDontFit: with readable verdicts the cell the
// preflight says does not fit is not ranked, and the report says why.
func TestReportLeavesOutCellsThatDontFit(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	a, err := c.svc.Reports().Analyse(ctx, c.name, "")
	if err != nil {
		t.Fatal(err)
	}
	if ranked := rankedArms(a); len(ranked) != 3 || slices.Contains(ranked, c.unfit) {
		t.Errorf("ranked %v; want the three cells that fit, not %s", ranked, c.unfit)
	}
	files, err := c.svc.Reports().Report(ctx, c.name, ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var data report.Data
	if err := atomicfile.ReadJSON(files.JSON, &data); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(data.Warnings, func(w string) bool { return strings.HasPrefix(w, c.unfit+" doesn't fit") }) {
		t.Errorf("warnings %q do not say %s doesn't fit", data.Warnings, c.unfit)
	}
}

// TestReportFailsOnUnreadablePreflight: a stored verdict that does not
// decode, or decodes to no verdict, fails Analyse, Report and Decide with
// the study's name and what to run. Before, the unreadable verdict was
// dropped and every cell was ranked, the one that does not fit included.
func TestReportFailsOnUnreadablePreflight(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{`[1, 2]`, `{"fits": "yes"}`, `{}`, `null`, `{"outcome": "fits", "fits": false}`} {
		c := newCardStudy(t, "", json.RawMessage(bad))
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, run.ErrVerdictUnreadable) {
				t.Errorf("%s with verdict %s: err = %v; want ErrVerdictUnreadable", what, bad, err)
				return
			}
			for _, want := range []string{"study cards", c.unfit, "rig study check cards", "rig study preflight cards"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s with verdict %s: %q does not name %q", what, bad, err, want)
				}
			}
		}
		a, err := c.svc.Reports().Analyse(ctx, c.name, "")
		if err == nil {
			t.Errorf("verdict %s: Analyse ranked %v; want an error", bad, rankedArms(a))
		}
		check("Analyse", err)
		_, err = c.svc.Reports().Report(ctx, c.name, ReportOptions{})
		check("Report", err)
		_, err = c.svc.Reports().Decide(ctx, DecideRequest{Study: c.name, ComparisonHash: "00000000", Rationale: "r", Actor: "a"})
		check("Decide", err)
		if _, err := os.Stat(filepath.Join(studyDir(t, c.svc, c.name).Dir(), "reports")); !os.IsNotExist(err) {
			t.Errorf("verdict %s: a report was written (%v)", bad, err)
		}
	}
}

// countingStore counts the reads of the report path and can fail the
// preflight read as a store would.
type countingStore struct {
	inputStore
	receipts, grades, preflights int
	preflightErr                 error
}

func (c *countingStore) Receipts(ctx context.Context, id string) ([]receipts.Receipt, error) {
	c.receipts++
	return c.inputStore.Receipts(ctx, id)
}

func (c *countingStore) Grades(ctx context.Context, id string) ([]receipts.GradeRecord, error) {
	c.grades++
	return c.inputStore.Grades(ctx, id)
}

func (c *countingStore) Preflight(ctx context.Context, arm, profile string) (json.RawMessage, error) {
	c.preflights++
	if c.preflightErr != nil {
		return nil, c.preflightErr
	}
	return c.inputStore.Preflight(ctx, arm, profile)
}

// TestReportInputsReadOnce: one request reads the receipts once and each
// cell's verdict once; the analysis and the report data read nothing more
// from the store (they are not given it). A store that fails the preflight
// read fails the request.
func TestReportInputsReadOnce(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	in := &findings.Evidence{Study: c.name, Execution: "exec-1", Snapshot: c.snap, Design: c.d}
	cs := &countingStore{inputStore: c.st}
	if err := readStore(ctx, cs, in); err != nil {
		t.Fatal(err)
	}
	if cs.receipts != 1 || cs.grades != 0 || cs.preflights != len(c.d.Arms) {
		t.Errorf("read receipts %d, grades %d, verdicts %d times; want 1, 0 (no judge) and %d (one per cell)", cs.receipts, cs.grades, cs.preflights, len(c.d.Arms))
	}
	a, err := analyse(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	data := c.svc.Reports().reportData(in, a)
	if data.Cards == nil || len(data.Cards.Rows) != len(c.d.Arms) || data.Machine != "test machine" {
		t.Errorf("report data from the inputs: cards %+v, machine %q", data.Cards, data.Machine)
	}

	failing := &countingStore{inputStore: c.st, preflightErr: errors.New("bolt: read failed")}
	err = readStore(ctx, failing, &findings.Evidence{Study: c.name, Execution: "exec-1", Snapshot: c.snap, Design: c.d})
	if !errors.Is(err, run.ErrVerdictUnreadable) || !strings.Contains(err.Error(), "bolt: read failed") {
		t.Errorf("a failing preflight read gave %v; want ErrVerdictUnreadable with the cause", err)
	}
}

// TestAnalysisSeedFromDesign: the analysis seed is drawn from the design's
// hash: the same design gets the same seed, designs with different hashes
// get different seeds, and the report and the analysis record it.
func TestAnalysisSeedFromDesign(t *testing.T) {
	if a, b := analysis.SeedForDesign(strings.Repeat("ab", 32)), analysis.SeedForDesign(strings.Repeat("ab", 32)); a != b || a != 0xabababababababab {
		t.Errorf("seed of one hash: %x and %x; want abababababababab twice", a, b)
	}
	ctx := context.Background()
	seedOf := func(c *cardStudy) (uint64, report.Data) {
		t.Helper()
		files, err := c.svc.Reports().Report(ctx, c.name, ReportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var data report.Data
		if err := atomicfile.ReadJSON(files.JSON, &data); err != nil {
			t.Fatal(err)
		}
		var a Analysis
		if err := atomicfile.ReadJSON(filepath.Join(filepath.Dir(files.JSON), "analysis.json"), &a); err != nil {
			t.Fatal(err)
		}
		want := analysis.SeedForDesign(c.snap.DesignHash)
		if data.AnalysisSeed != want || a.Seed != want || a.Input.Design.Seed != want || a.Report.Seed != want {
			t.Errorf("design %s: report seed %d, analysis seed %d, input %d, result %d; want %d", c.snap.DesignHash[:12], data.AnalysisSeed, a.Seed, a.Input.Design.Seed, a.Report.Seed, want)
		}
		if data.AnalysisSeedFrom != analysis.SeedFrom {
			t.Errorf("report says the seed is from %q; want %q", data.AnalysisSeedFrom, analysis.SeedFrom)
		}
		md, err := os.ReadFile(files.Markdown)
		if err != nil {
			t.Fatal(err)
		}
		html, err := os.ReadFile(files.HTML)
		if err != nil {
			t.Fatal(err)
		}
		for what, text := range map[string]string{"markdown": string(md), "html": string(html)} {
			if !strings.Contains(text, "Analysis seed") || !strings.Contains(text, strconv.FormatUint(want, 10)) {
				t.Errorf("the %s report does not show the analysis seed %d", what, want)
			}
		}
		return data.AnalysisSeed, data
	}
	one := newCardStudy(t, "", nil)
	same := newCardStudy(t, "", nil)
	other := newCardStudy(t, " Changed.", nil)
	if one.snap.DesignHash != same.snap.DesignHash || one.snap.DesignHash == other.snap.DesignHash {
		t.Fatal("fixture: want two equal design hashes and one different")
	}
	s1, d1 := seedOf(one)
	s2, _ := seedOf(same)
	s3, _ := seedOf(other)
	if s1 != s2 {
		t.Errorf("the same design got seeds %d and %d", s1, s2)
	}
	if s1 == s3 {
		t.Errorf("designs %s and %s share seed %d", one.snap.DesignHash[:12], other.snap.DesignHash[:12], s1)
	}
	if s1 == 20261130 {
		t.Error("the seed is still the old constant")
	}
	for _, k := range d1.Kinds {
		if !strings.Contains(k.Interval, "seed "+strconv.FormatUint(s1, 10)) {
			t.Errorf("job kind %s's interval %q does not name the seed", k.Name, k.Interval)
		}
	}
}

// TestReportLicencesFromTheRegistry: each of the design's items reaches the
// report with the use and verdict the study's registry (here the bundled
// one) rules for it, taken from the registry's lines as values.
func TestReportLicencesFromTheRegistry(t *testing.T) {
	c := newCardStudy(t, "", nil)
	ctx := context.Background()
	in, err := c.svc.Reports().readInputs(ctx, c.name, "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := analyse(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	data := c.svc.Reports().reportData(in, a)
	if len(c.d.Items) == 0 || len(data.Licences) != len(c.d.Items) {
		t.Fatalf("licence rows %+v for items %+v; want one per item", data.Licences, c.d.Items)
	}
	for i, it := range c.d.Items {
		l := data.Licences[i]
		if l.Item != it.Name || l.Entry != it.RegistryID || l.Use != it.Use || l.Verdict == "" {
			t.Errorf("licence row %+v for item %+v; want its name, entry, use and a verdict", l, it)
		}
	}
}
