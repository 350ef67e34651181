package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"rig/fidelity"
	"rig/genrecord"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/receipts"
	"rig/studies"
)

// The layout's name for the records is the one package fidelity reads.
func TestFidelityRecordsAreWhereTheReaderLooks(t *testing.T) {
	if got := filepath.Base(layout.Records("x").Fidelity()); got != fidelity.StudyFile {
		t.Errorf("layout names the fidelity records %s, package fidelity reads %s", got, fidelity.StudyFile)
	}
}

// The reference held to itself is read off its own pass: KL 0, its top
// token agreeing, its own log-probabilities on both sides.
func TestSelfScoredIsZeroDivergence(t *testing.T) {
	got := selfScored([]fidelity.Token{{KL: 0.3, RefTop: 4, ArmTop: 7, RefLogprob: -0.2, ArmLogprob: -1.5}})
	want := fidelity.Token{KL: 0, RefTop: 4, ArmTop: 4, RefLogprob: -0.2, ArmLogprob: -0.2}
	if len(got) != 1 || got[0] != want || !got[0].Agrees() {
		t.Errorf("selfScored = %+v, want %+v", got, want)
	}
}

// fidelityRun is one execution of a demo slice with a reference arm, run to
// its end, and its fidelity records.
type fidelityRun struct {
	design *studies.Design
	snap   *studies.Snapshot
	env    Env
	store  *receipts.Store
	exec   receipts.Execution
	info   ExecInfo
	recs   []fidelity.StudyRecord
}

// runWithReference freezes the demo's llama-server arms (SmolLM2 Q4_1 and
// its Q8_0 requantization) on tasks extract-json tasks, plus its Q8_0 arm
// on Ollama when withOllama, with reference as the job kind's reference,
// and runs the execution to its end on the real runtimes.
func runWithReference(t *testing.T, ctx context.Context, in provision.Installed, reference string, tasks int, withOllama bool) fidelityRun {
	t.Helper()
	env, snap, d, dir := freezeDemoSlice(t, ctx, in, func(m map[string]any) {
		jk := m["job_kinds"].([]any)[0].(map[string]any)
		jk["sample_tasks"], jk["reference"] = tasks, reference
		if withOllama {
			var demo map[string]any
			raw, err := os.ReadFile("../examples/demo-study/design.json")
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &demo); err != nil {
				t.Fatal(err)
			}
			for _, a := range demo["arms"].([]any) {
				if a.(map[string]any)["runtime"] == "ollama" {
					m["arms"] = append(m["arms"].([]any), a)
				}
			}
		}
	})
	st, exec := frozenExecution(t, ctx, dir, d, snap, "frozen for the fidelity test")
	h := runToEnd(t, ctx, env, Spec{Study: d.Name, Snapshot: snap, Store: st, Exec: exec, Dir: filepath.Join(dir, "executions", exec.ID)})
	info := h.Info()
	if info.Status != string(receipts.Done) || info.Error != "" {
		t.Fatalf("execution ended %s (%s)", info.Status, info.Error)
	}
	recs, err := fidelity.ReadStudy(layout.Records(info.Records).Fidelity())
	if err != nil {
		t.Fatal(err)
	}
	return fidelityRun{design: d, snap: snap, env: env, store: st, exec: exec, info: info, recs: recs}
}

// checkRecords holds the records to one per task per arm of the job kind,
// each on the reference's row of that task with finite, non-negative KL
// over every output token of the row, and returns each arm's mean KL.
func checkRecords(t *testing.T, r fidelityRun, reference string, tasks int) map[string]float64 {
	t.Helper()
	jk := r.design.JobKinds[0].Name
	rows := map[string]genrecord.Row{}
	_, kept, err := genrecord.ReadAll(layout.Records(r.info.Records).Generation(reference))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range kept {
		rows[row.RowID] = row
	}
	mean := map[string]float64{}
	for _, a := range r.design.Arms {
		u := fidelity.StudyUnits(r.recs, jk, "", a.Name)
		if len(u.Names) != tasks {
			t.Fatalf("arm %s: %d records, want one per task (%d)", a.Name, len(u.Names), tasks)
		}
		n := 0
		for _, rec := range r.recs {
			if rec.Arm != a.Name {
				continue
			}
			row, ok := rows[rec.RowID]
			if !ok || rec.Reference != reference {
				t.Fatalf("arm %s task %s: row %s is not the reference %s's (reference %q)", a.Name, rec.Task, rec.RowID, reference, rec.Reference)
			}
			// A row with its ids is scored token for token; one without (an
			// Ollama reference's) is its text tokenized again.
			if len(row.PromptTokenIDs) > 0 && len(rec.Tokens) != len(row.Output) || len(rec.Tokens) == 0 {
				t.Errorf("arm %s task %s: %d tokens scored, the reference's row kept %d", a.Name, rec.Task, len(rec.Tokens), len(row.Output))
			}
			for _, tok := range rec.Tokens {
				if math.IsNaN(tok.KL) || math.IsInf(tok.KL, 0) || tok.KL < 0 {
					t.Errorf("arm %s task %s: KL %v, want finite and ≥ 0", a.Name, rec.Task, tok.KL)
				}
				mean[a.Name] += tok.KL
				n++
			}
		}
		mean[a.Name] /= float64(n)
	}
	return mean
}

// TestFidelityStepOnRealRuntimes runs a two-arm slice of the demo on the
// real llama-server with the Q8_0 arm as the job kind's reference: after
// the trials, fidelity.jsonl holds one record per task per arm, every
// token's KL finite and non-negative, the Q4_1 arm's mean KL above zero
// and the reference's own zero; both arms are scored on their stack. A
// second pass of the step scores nothing again, and an arm whose records
// were lost is scored again, alone.
func TestFidelityStepOnRealRuntimes(t *testing.T) {
	testenv.Long(t, "starts the real llama-server and scorer")
	in, err := provision.Load()
	testenv.NeedsSetup(t, "rig's provisioned runtimes, models and rig-prefill-score", err)
	if in.PrefillScorer == "" {
		testenv.NeedsSetup(t, "rig-prefill-score", errors.New("installed.env names no PREFILL_SCORER_BIN"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const tasks, q4, q8 = 3, "smollm2-llama-server", "smollm2-q8-llama-server"
	r := runWithReference(t, ctx, in, q8, tasks, false)
	mean := checkRecords(t, r, q8, tasks)
	if !(mean[q4] > 0) || mean[q8] != 0 {
		t.Errorf("mean KL: Q4_1 %v (want > 0), the reference %v (want 0)", mean[q4], mean[q8])
	}
	for _, rec := range r.recs {
		if rec.ScoredBy != fidelity.ScoredByStack {
			t.Errorf("arm %s: scored_by %q, want %q (llama-server from the scorer's build)", rec.Arm, rec.ScoredBy, fidelity.ScoredByStack)
		}
	}
	t.Logf("mean KL per token: Q4_1 %.5f nats", mean[q4])

	// A resumed execution does not score again: with no scorer at all the
	// step passes over the records it has and leaves the file as it was.
	path := layout.Records(r.info.Records).Fidelity()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	x := stepOf(t, r, provision.Installed{})
	if err := x.fidelity(ctx); err != nil {
		t.Fatalf("a finished step was run again: %v", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a finished step rewrote its records")
	}
	// Records lost for one arm: that arm, and it alone, is scored again.
	var kept []fidelity.StudyRecord
	for _, rec := range r.recs {
		if rec.Arm != q4 {
			kept = append(kept, rec)
		}
	}
	if err := fidelity.WriteStudy(path, kept); err != nil {
		t.Fatal(err)
	}
	if err := x.fidelity(ctx); !errors.Is(err, fidelity.ErrNoScorer) {
		t.Fatalf("with records missing and no scorer, the step says %v, want ErrNoScorer", err)
	}
	x = stepOf(t, r, in)
	if err := x.fidelity(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("the arm scored again differs from its first records (temperature 0, the same rows and files):\n%s\nwant\n%s", after, before)
	}
}

// TestFidelityStepWithAnOllamaReference holds the llama-server arms to the
// Q8_0 model on Ollama, whose rows keep no token ids: its rendered prompts
// and kept texts are tokenized with its own GGUF. The llama-server arm on
// the very same Q8_0 file diverges from it by nothing, the Q4_1 arm by
// more; the Ollama reference is labelled the model's, not its runtime's.
func TestFidelityStepWithAnOllamaReference(t *testing.T) {
	testenv.Long(t, "starts the real llama-server, Ollama and scorer")
	in, err := provision.Load()
	testenv.NeedsSetup(t, "rig's provisioned runtimes, models and rig-prefill-score", err)
	if in.PrefillScorer == "" || in.Ollama == "" {
		testenv.NeedsSetup(t, "rig-prefill-score and Ollama", errors.New("installed.env names no PREFILL_SCORER_BIN or OLLAMA_BIN"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const tasks, q4, q8, q8Ollama = 2, "smollm2-llama-server", "smollm2-q8-llama-server", "smollm2-q8-ollama"
	r := runWithReference(t, ctx, in, q8Ollama, tasks, true)
	mean := checkRecords(t, r, q8Ollama, tasks)
	if mean[q8] > 1e-6 || !(mean[q4] > mean[q8]) {
		t.Errorf("mean KL: Q8_0 on llama-server %v (want ≈ 0: the reference's own file), Q4_1 %v (want more)", mean[q8], mean[q4])
	}
	for _, rec := range r.recs {
		want := fidelity.ScoredByStack
		if rec.Arm == q8Ollama {
			want = fidelity.ScoredByModel
		}
		if rec.ScoredBy != want {
			t.Errorf("arm %s: scored_by %q, want %q", rec.Arm, rec.ScoredBy, want)
		}
	}
	t.Logf("mean KL per token against the Ollama reference: Q8_0 %.6f, Q4_1 %.5f nats", mean[q8], mean[q4])
}

// stepOf is the finished execution's runner again, as a resumed execution
// makes it, with installed in place of the provisioned components.
func stepOf(t *testing.T, r fidelityRun, installed provision.Installed) *execution {
	t.Helper()
	tr, err := newTrialRunner(r.env, r.design.Name, r.snap, r.exec, layout.Records(r.info.Records).Work(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.installed = installed
	return &execution{trialRunner: tr, store: r.store, recDir: r.info.Records, state: &Handle{}, writers: map[string]*genrecord.Writer{}}
}

// Only a design whose job kind names a reference has the step; and where
// the trials ran on other machines (an engine execution's workers) every
// arm's figure is its model's, though the daemon's own llama-server sits
// beside its scorer: the worker's build and backend are not the scorer's.
func TestMergedFidelityScoresEveryArmAsItsModel(t *testing.T) {
	bin := t.TempDir()
	// Fake binaries: scoredBy reads only where they are and their digests.
	in := provision.Installed{LlamaServer: filepath.Join(bin, "llama-server"), PrefillScorer: filepath.Join(bin, "rig-prefill-score")}
	for _, f := range []string{in.LlamaServer, in.PrefillScorer} {
		if err := os.WriteFile(f, []byte("fake "+filepath.Base(f)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	d := &studies.Design{JobKinds: []studies.JobKind{{Name: "qa"}},
		Arms: []studies.Arm{{Name: "ref", Runtime: "llama-server"}, {Name: "q4", Runtime: "llama-server"}}}
	if HasFidelityStep(d) {
		t.Error("a design with no reference arm has a fidelity step")
	}
	d.JobKinds[0].Reference = "ref"
	if !HasFidelityStep(d) {
		t.Error("a design whose job kind names a reference has no fidelity step")
	}
	for _, tc := range []struct {
		elsewhere bool
		want      string
	}{{false, fidelity.ScoredByStack}, {true, fidelity.ScoredByModel}} {
		x := &execution{trialRunner: &trialRunner{design: d, snap: &studies.Snapshot{}, installed: in}, trialsElsewhere: tc.elsewhere}
		if got := x.scoredBy(d.Arms[1]); got != tc.want {
			t.Errorf("trials elsewhere %v: scored_by %q, want %q", tc.elsewhere, got, tc.want)
		}
	}
}
