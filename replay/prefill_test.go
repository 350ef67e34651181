package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/internal/offload"
	"rig/runtimes"
)

// TestPrefillReplayOnTheRealScorer scores SmolLM2 rows recorded on the real
// llama-server with rig-prefill-score in one batched pass each: genuine rows
// reproduce within rig's default prefill tolerance, with the mode and the
// scorer's fingerprint on the result and the kept fields still checked
// through the pinned server's tokenizer; a one-token edit is caught; a row
// longer than the scorer's context is refused naming the row; a
// calibration of the other mode is refused naming both.
func TestPrefillReplayOnTheRealScorer(t *testing.T) {
	in := replayProvisioned(t)
	if in.PrefillScorer == "" {
		t.Fatal("installed.env names no PREFILL_SCORER_BIN: run make setup (it builds rig-prefill-score)")
	}
	ctx := context.Background()
	work := t.TempDir()
	stack, err := startReplayStack(ctx, in, "llama-server", goalModel, work, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.stop()
	if err := stack.withPrefill(ctx, in, in.Models[goalModel].Path, filepath.Join(work, "prefill"), false); err != nil {
		t.Fatal(err)
	}
	// Rows longer than the CPU flash-attention tile (64 queries), which a
	// pass in one physical batch would score through another kernel.
	live, err := stack.generateRows(ctx, "pf", 6, 96, "")
	if err != nil {
		t.Fatal(err)
	}
	// And prompts of 64 tokens or more, which llama-server ran through the
	// tiled kernel: the scorer must run them the same way.
	longRows, err := stack.generateRows(ctx, "pf-long", 2, 24, longAsk)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range longRows {
		if len(r.row.PromptTokenIDs) < 64 {
			t.Fatalf("row %s has a prompt of %d tokens; the test needs 64 or more", r.row.RowID, len(r.row.PromptTokenIDs))
		}
	}
	live = append(live, longRows...)
	set := replaySet{work: work}
	rec, err := set.record("genuine.jsonl", stack.header.Pins, rowsOf(live))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := genrecord.Replay(ctx, rec, stack.rs(), genrecord.ReplayOptions{Tolerance: DefaultPrefillTolerance})
	if err != nil {
		t.Fatal(err)
	}
	// Every genuine row is scored by the batched pass to within numerical
	// noise (1e-3 nats), as its decode steps take the same attention kernel
	// (docs/generations.md), and every row still runs the field checks.
	if sc := stack.scorer; !strings.Contains(sc.fingerprint(), fmt.Sprintf("output in calls of %d", sc.outputBatch)) || sc.outputBatch < 1 || sc.outputBatch >= 64 || sc.promptBatch != 512 {
		t.Errorf("the scorer's prompt batch %d and output calls of %d (stack %q): want llama-server's 512, and one below the CPU flash-attention tile of 64", sc.promptBatch, sc.outputBatch, sc.fingerprint())
	}
	for _, r := range sum.Results {
		if r.Comparison.MaxAbsDiff > 1e-3 || r.Status != genrecord.StatusReproduced {
			t.Errorf("row %s (%d steps) in one batched pass: %s, max |Δ| %g nats", r.RowID, r.Comparison.Steps, r.Status, r.Comparison.MaxAbsDiff)
		}
		if len(r.Comparison.FieldChecks) == 0 || r.Comparison.Checked != r.Comparison.Steps {
			t.Errorf("row %s: field checks %v, %d of %d steps scored", r.RowID, r.Comparison.FieldChecks, r.Comparison.Checked, r.Comparison.Steps)
		}
	}
	t.Logf("prefill on %d genuine rows: %d within the default tolerance, max |Δ| %.3g nats", len(live), sum.Reproduced, sum.MaxAbsDiff)

	// One token changed for another of its top-K: caught.
	edited, _, err := set.edits("edited.jsonl", stack.header.Pins, rowsOf(live), editOneToken)
	if err != nil {
		t.Fatal(err)
	}
	es, err := genrecord.Replay(ctx, edited, stack.rs(), genrecord.ReplayOptions{Tolerance: DefaultPrefillTolerance})
	if err != nil {
		t.Fatal(err)
	}
	if es.Reproduced != 0 || es.Mismatched == 0 {
		t.Errorf("one-token edits in prefill mode: %d reproduced, %d mismatched, want none reproduced", es.Reproduced, es.Mismatched)
	}

	// A row past the scorer's context is refused, naming the row.
	long := make([]int, stack.scorer.nctx)
	if _, err := stack.scorer.score("too-long", 4, long, []int{1}); err == nil || !strings.Contains(err.Error(), "row too-long") || !strings.Contains(err.Error(), "past the scorer's context") {
		t.Errorf("a row past the context: %v", err)
	}
	// And the scorer still answers after a refusal.
	row := rowsOf(live)[0]
	ids, _ := row.TokenIDs()
	if steps, err := stack.scorer.score(row.RowID, row.K, row.PromptTokenIDs, ids); err != nil || len(steps) != len(ids) {
		t.Errorf("after a refusal: %d steps, %v", len(steps), err)
	}

	// Through ReplayRecord: mode, fingerprint and tolerance source on the result.
	full, err := ReplayRecord(ctx, ReplayRequest{File: rec, Mode: ModePrefill, WorkDir: filepath.Join(work, "record")})
	if err != nil {
		t.Fatal(err)
	}
	// Rows the pass disputes fall back to decode steps: every genuine row
	// ends reproduced, and the result says how many fell back.
	if full.Mode != ModePrefill || !strings.Contains(full.Stack, "rig-prefill-score sha256:") || full.ToleranceSource != DefaultPrefillToleranceSource || full.Status != genrecord.StatusReproduced || full.Reproduced != len(live) {
		t.Errorf("ReplayRecord in prefill mode: mode %q, stack %q, tolerance from %q, %s, %d of %d reproduced", full.Mode, full.Stack, full.ToleranceSource, full.Status, full.Reproduced, len(live))
	}
	if full.Fallback != len(live)-sum.Reproduced || full.FallbackHeld != full.Fallback {
		t.Errorf("fallback: %d rows re-checked (%d held); the pass disputed %d", full.Fallback, full.FallbackHeld, len(live)-sum.Reproduced)
	}
	// The edits are still caught after the fallback.
	fe, err := ReplayRecord(ctx, ReplayRequest{File: edited, Mode: ModePrefill, WorkDir: filepath.Join(work, "record-edited")})
	if err != nil {
		t.Fatal(err)
	}
	if fe.Reproduced != 0 || fe.Status != genrecord.StatusMismatch {
		t.Errorf("one-token edits through prefill and its fallback: %s, %d reproduced", fe.Status, fe.Reproduced)
	}

	// A calibration measured in exact mode is refused in prefill mode.
	cal := ReplayCalibration{Model: goalModel, Control: "gemma-3-270m", Runtimes: []RuntimeCalibration{{Runtime: "llama-server",
		Calibration: genrecord.Calibration{Separable: true, Tolerance: genrecord.Tolerance{Token: 0.1, Row: 0.01}}}}}
	raw, _ := json.Marshal(cal)
	path := filepath.Join(work, "exact-calibration.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = ReplayRecord(ctx, ReplayRequest{File: rec, Mode: ModePrefill, Calibration: path, WorkDir: filepath.Join(work, "record2")})
	if err == nil || !strings.Contains(err.Error(), `mode is "exact"`) || !strings.Contains(err.Error(), `"prefill"`) {
		t.Errorf("an exact-mode calibration in prefill mode: %v", err)
	}
}

// TestPrefillReplayOfARepackedQuant: Gemma 3's Q4_K_M weights are the kind
// the CPU backend repacks, and repacked weights go through one kernel for a
// batch and another for a single row; and Gemma 3 has sliding-window
// attention, for which llama-server cuts a prompt into batches to save
// context checkpoints. rig runs llama-server with neither and says so on the
// record; the scorer, told the record's way, scores Gemma's rows (long
// prompts included) to within numerical noise of their decode steps. A
// record whose server ran as before (both on) is replayed that way, and its
// decode steps still reproduce exactly.
func TestPrefillReplayOfARepackedQuant(t *testing.T) {
	in := replayProvisioned(t)
	if in.PrefillScorer == "" {
		t.Fatal("installed.env names no PREFILL_SCORER_BIN: run make setup (it builds rig-prefill-score)")
	}
	ctx := context.Background()
	work := t.TempDir()
	stack, err := startReplayStack(ctx, in, "llama-server", goalControl, work, false)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.stop()
	if p := stack.header.Pins; p.WeightRepack != "off" || p.PromptCheckpoints != "off" {
		t.Fatalf("rig's llama-server records weight_repack %q, prompt_checkpoints %q; want both off", p.WeightRepack, p.PromptCheckpoints)
	}
	live, err := stack.generateRows(ctx, "gemma", 4, 80, "")
	if err != nil {
		t.Fatal(err)
	}
	longRows, err := stack.generateRows(ctx, "gemma-long", 2, 24, longAsk)
	if err != nil {
		t.Fatal(err)
	}
	live = append(live, longRows...)
	set := replaySet{work: work}
	rec, err := set.record("gemma.jsonl", stack.header.Pins, rowsOf(live))
	if err != nil {
		t.Fatal(err)
	}
	if err := stack.withPrefill(ctx, in, in.Models[goalControl].Path, filepath.Join(work, "prefill"), false); err != nil {
		t.Fatal(err)
	}
	pass, err := genrecord.Replay(ctx, rec, stack.rs(), genrecord.ReplayOptions{Tolerance: DefaultPrefillTolerance})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range pass.Results {
		if f := r.Comparison.First; f != nil {
			t.Logf("row %s disputed by the pass at step %d: %s %s", r.RowID, f.Step, f.Reason, f.Detail)
		}
	}
	full, err := ReplayRecord(ctx, ReplayRequest{File: rec, Mode: ModePrefill, WorkDir: filepath.Join(work, "record")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(full.Stack, "weight repacking off") || full.Status != genrecord.StatusReproduced || full.Fallback != 0 {
		t.Errorf("Gemma rows in prefill mode: %s, %d rows fell back to decode steps, stack %q", full.Status, full.Fallback, full.Stack)
	}
	// Numerical noise of a batched pass on this model: measured up to
	// 1.6e-3 nats (its 262,144-entry output head), against 0.28-1.1 nats
	// with repacking on and 0.3 nats and more for the nearest control.
	for _, r := range full.Results {
		if r.Comparison.MaxAbsDiff > 5e-3 {
			t.Errorf("row %s (%d steps): max |Δ| %g nats in one batched pass", r.RowID, r.Comparison.Steps, r.Comparison.MaxAbsDiff)
		}
	}
	t.Logf("Gemma 3 without repacking: %d rows, max |Δ| %.3g nats, stack %s", len(live), full.MaxAbsDiff, full.Stack)

	// A record made with repacking on is replayed with it on: a server of
	// that kind started for the record reproduces its decode steps exactly.
	rstack, err := startReplayStackOf(ctx, in, "llama-server", in.Models[goalControl], filepath.Join(work, "repacked"), false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rstack.stop()
	if p := rstack.header.Pins; p.WeightRepack != "on" || p.PromptCheckpoints != "on" {
		t.Fatalf("a server run as before rig pinned them records weight_repack %q, prompt_checkpoints %q; want both on", p.WeightRepack, p.PromptCheckpoints)
	}
	rlive, err := rstack.generateRows(ctx, "gemma-repacked", 2, 48, "")
	if err != nil {
		t.Fatal(err)
	}
	rrec, err := set.record("gemma-repacked.jsonl", rstack.header.Pins, rowsOf(rlive))
	if err != nil {
		t.Fatal(err)
	}
	exact, err := ReplayRecord(ctx, ReplayRequest{File: rrec, WorkDir: filepath.Join(work, "record-repacked")})
	if err != nil {
		t.Fatal(err)
	}
	if exact.Status != genrecord.StatusReproduced || exact.MaxAbsDiff != 0 {
		t.Errorf("a repacked record by decode steps: %s, max |Δ| %g nats, want reproduced exactly", exact.Status, exact.MaxAbsDiff)
	}
	pf, err := ReplayRecord(ctx, ReplayRequest{File: rrec, Mode: ModePrefill, WorkDir: filepath.Join(work, "record-repacked-prefill")})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pf.Stack, "weight repacking on") || pf.Status != genrecord.StatusReproduced {
		t.Errorf("a repacked record in prefill mode: %s, stack %q", pf.Status, pf.Stack)
	}
	t.Logf("Gemma 3 repacked, one batched pass: max |Δ| %.3g nats, %d of %d rows fell back to decode steps", pf.MaxAbsDiff, pf.Fallback, len(rlive))
}

// emptyRecord writes a record of no rows with pins for runtime, edited by
// edit; replay reads its header before it starts anything.
func emptyRecord(t *testing.T, runtime string, edit func(*genrecord.Pins)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "generations-"+runtime+".jsonl")
	pins := genrecord.Pins{ModelSHA256: strings.Repeat("a", 64), ModelName: "m", Runtime: runtime, RuntimeVersion: "0", BinarySHA256: strings.Repeat("b", 64),
		Libraries: map[string]string{}, BuildFlags: "x", MachineLine: "m", DesignHash: "d"}
	if edit != nil {
		edit(&pins)
	}
	w, err := genrecord.OpenWriter(path, pins)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	return path
}

// TestPrefillRefusesOllamaRecords: Ollama's rows replay by regeneration,
// and prefill says why before anything starts.
func TestPrefillRefusesOllamaRecords(t *testing.T) {
	_, err := ReplayRecord(context.Background(), ReplayRequest{File: emptyRecord(t, "ollama", nil), Mode: ModePrefill})
	if !errors.Is(err, ErrNoPrefill) || !strings.Contains(err.Error(), "regeneration") {
		t.Errorf("prefill of an Ollama record: %v", err)
	}
}

// TestPrefillRefusesCardRecords: the scorer is CPU llama.cpp, so a record
// made on the card is sent to the exact path on the card's build, before
// anything starts, never scored on another stack.
func TestPrefillRefusesCardRecords(t *testing.T) {
	path := emptyRecord(t, "llama-server", func(p *genrecord.Pins) {
		p.Offload = &offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers, FlashAttention: "on"}
	})
	_, err := ReplayRecord(context.Background(), ReplayRequest{File: path, Mode: ModePrefill})
	if !errors.Is(err, ErrNoPrefill) || !strings.Contains(err.Error(), "--mode exact") || !strings.Contains(err.Error(), offload.ComponentLlamaServerCUDA) {
		t.Errorf("prefill of a record made on the card: %v", err)
	}
	// A card's record from before the offload pin shows the card only in
	// its machine line: refused in both modes, never run on the CPU.
	old := emptyRecord(t, "llama-server", func(p *genrecord.Pins) {
		p.MachineLine = runtimes.Machine{CPU: "EPYC", Cores: 16, GPUs: []string{"NVIDIA H200"}, CUDADriver: "13.0", Backend: offload.BackendCUDA}.String()
	})
	for _, mode := range []string{ModeExact, ModePrefill} {
		_, err := ReplayRecord(context.Background(), ReplayRequest{File: old, Mode: mode})
		if err == nil || !strings.Contains(err.Error(), "before records carried the offload pin") {
			t.Errorf("--mode %s of a card's record without its offload pin: %v", mode, err)
		}
	}
}
