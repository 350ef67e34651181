package studies

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/gguf"
)

// The demo design's extract-json arms: the Q4_1 incumbent on llama-server,
// the Q8_0 requantization on Ollama and on llama-server.
const (
	demoQ4     = "smollm2-llama-server"
	demoQ8     = "smollm2-q8-llama-server"
	demoQ8Olla = "smollm2-q8-ollama"
	demoAider  = "smollm2-aider-llama-server"
)

func TestReferenceNamesARankedArmOfTheJobKind(t *testing.T) {
	d := demoDesign(t)
	d.JobKinds[0].Reference = demoQ8
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Fatalf("a reference among the job kind's arms is refused:\n%v", err)
	}
	g := d.FidelityGroups(d.JobKinds[0])
	if len(g) != 1 || d.Arms[g[0].Reference].Name != demoQ8 || g[0].Profile != "" {
		t.Fatalf("groups %+v, want one, with %s as reference", g, demoQ8)
	}
	var measured []string
	for _, i := range g[0].Arms {
		measured = append(measured, d.Arms[i].Name)
	}
	if got := strings.Join(measured, ","); got != demoQ4+","+demoQ8Olla {
		t.Errorf("measured arms %s, want %s,%s (the reference left out)", got, demoQ4, demoQ8Olla)
	}

	withJudge := func(d *Design) {
		j := d.Arms[0]
		j.Name, j.Role, j.JobKinds = "judge-1", RoleJudge, nil
		d.Arms = append(d.Arms, j)
	}
	tests := []struct {
		name string
		edit func(d *Design)
		kind ProblemKind
		msg  string
	}{
		{"unknown arm", func(d *Design) { d.JobKinds[0].Reference = "nobody" }, KindUnknownRef, "not an arm"},
		{"judge", func(d *Design) { withJudge(d); d.JobKinds[0].Reference = "judge-1" }, KindInvalid, "is a judge"},
		{"arm of another job kind", func(d *Design) { d.JobKinds[0].Reference = demoAider }, KindInvalid, "does not run job kind"},
		{"aider arm", func(d *Design) { d.JobKinds[1].Reference = demoAider }, KindInvalid, "repository"},
		{"nothing measured", func(d *Design) {
			d.Arms = d.Arms[:1]
			d.JobKinds[0].Reference = demoQ4
		}, KindInvalid, "no other arm"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := demoDesign(t)
			tc.edit(d)
			path := "job_kinds[0].reference"
			if d.JobKinds[1].Reference != "" {
				path = "job_kinds[1].reference"
			}
			err := Validate(context.Background(), d, ValidateOptions{})
			var ve *ValidationError
			if !errors.As(err, &ve) || !ve.Has(tc.kind, path) {
				t.Fatalf("err = %v, want %s at %s", err, tc.kind, path)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want it to say %q", err, tc.msg)
			}
		})
	}
}

// writeVocab writes a GGUF header with the given token list.
func writeVocab(t *testing.T, path string, tokens []string) {
	t.Helper()
	meta := []gguf.KV{
		{Key: "general.architecture", Type: gguf.ValueString, Value: "llama"},
		{Key: "tokenizer.ggml.model", Type: gguf.ValueString, Value: "gpt2"},
		{Key: "tokenizer.ggml.tokens", Type: gguf.ValueArray, Value: tokens},
	}
	var b bytes.Buffer
	if err := gguf.Encode(&b, meta, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The check reads real GGUF headers: an arm whose token list differs from
// the reference's is refused naming both arms, both files and the ways on;
// the same token list passes.
func TestReferenceRefusesAnotherTokenizer(t *testing.T) {
	dir := t.TempDir()
	q4, q8 := filepath.Join(dir, "q4.gguf"), filepath.Join(dir, "q8.gguf")
	writeVocab(t, q4, []string{"<unk>", "<s>", "a", "b"})
	writeVocab(t, q8, []string{"<unk>", "<s>", "a", "c"})
	env := map[string]string{"SMOLLM2_GGUF": q4, "SMOLLM2_REQUANT_Q8_0_GGUF": q8}
	opts := ValidateOptions{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Vocab: GGUFVocab}

	d := demoDesign(t)
	d.JobKinds[0].Reference = demoQ8
	err := Validate(context.Background(), d, opts)
	var ve *ValidationError
	if !errors.As(err, &ve) || !ve.Has(KindVocabDiffers, "job_kinds[0].reference") {
		t.Fatalf("err = %v, want %s at job_kinds[0].reference", err, KindVocabDiffers)
	}
	if n := len(ve.Problems); n != 1 {
		t.Errorf("%d problems, want one (only %s's file differs):\n%v", n, demoQ4, err)
	}
	for _, want := range []string{`arm "` + demoQ4 + `"`, q4, `reference "` + demoQ8 + `"`, q8, "same tokenizer", "remove reference"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %s:\n%v", want, err)
		}
	}

	writeVocab(t, q8, []string{"<unk>", "<s>", "a", "b"})
	if err := Validate(context.Background(), d, opts); err != nil {
		t.Errorf("the same token list is refused:\n%v", err)
	}
	// A file that cannot be read is said, not passed over.
	env["SMOLLM2_GGUF"] = filepath.Join(dir, "missing.gguf")
	if err := Validate(context.Background(), d, opts); !errors.As(err, &ve) || !ve.Has(KindUnreadable, "arms[0].model.file") {
		t.Errorf("an unreadable measured file: err = %v, want %s at arms[0].model.file", err, KindUnreadable)
	}
}

// In a card sub-study the design names the arm as written; each profile's
// cells are held to the reference's cell at that profile, and a tokenizer
// mismatch is said once per arm, not once per cell.
func TestReferenceInACardStudy(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "examples", "card-study", "design.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDesign("design.json", data)
	if err != nil {
		t.Fatal(err)
	}
	d.JobKinds[0].Reference = "smollm2"
	groups := d.FidelityGroups(d.JobKinds[0])
	if len(groups) != len(d.CardProfilesRun()) {
		t.Fatalf("%d groups, want one per profile (%d)", len(groups), len(d.CardProfilesRun()))
	}
	for i, g := range groups {
		p := d.CardProfilesRun()[i].Name
		if g.Profile != p || d.Arms[g.Reference].Name != "smollm2@"+p || len(g.Arms) != 1 || d.Arms[g.Arms[0]].Name != "gemma3@"+p {
			t.Errorf("group %d: %+v, want smollm2@%s holding gemma3@%s", i, g, p, p)
		}
	}
	byFile := map[string]string{"smollm2.gguf": "aaaa", "gemma3.gguf": "bbbb"}
	env := map[string]string{"SMOLLM2_GGUF": "/models/smollm2.gguf", "GEMMA3_GGUF": "/models/gemma3.gguf"}
	opts := ValidateOptions{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		// A fake reader: the check's logic, not the header's.
		Vocab: func(path string) (string, error) { return byFile[filepath.Base(path)], nil }}
	err = Validate(context.Background(), d, opts)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || !ve.Has(KindVocabDiffers, "job_kinds[0].reference") {
		t.Fatalf("err = %v, want one %s", err, KindVocabDiffers)
	}
	if !strings.Contains(err.Error(), `arm "gemma3"`) {
		t.Errorf("the refusal names a cell, not the arm as written:\n%v", err)
	}

	d.JobKinds[0].Reference = "smollm2@" + d.CardProfile.Name
	if err := Validate(context.Background(), d, ValidateOptions{}); !errors.As(err, &ve) || !strings.Contains(err.Error(), `name the arm as written, "smollm2"`) {
		t.Errorf("a cell named as reference: err = %v, want the written name asked for", err)
	}
}

// A design without a reference hashes exactly as before the field existed;
// one with it hashes otherwise, so the reference is part of what is frozen.
func TestReferenceLeftOutHashesAsBefore(t *testing.T) {
	d := demoDesign(t)
	canon, err := Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(canon, []byte(`"reference"`)) {
		t.Error("the canonical design names reference although the design leaves it out")
	}
	if h, _ := DesignHash(d); h != demoHashBeforeSlots {
		t.Errorf("design hash %s, want %s as before", h, demoHashBeforeSlots)
	}
	d.JobKinds[0].Reference = demoQ8
	if h, _ := DesignHash(d); h == demoHashBeforeSlots {
		t.Error("a reference did not change the design hash")
	}
}

// The dry run prices the fidelity step as prefill: per measured arm and
// task, the reference's prompt and output through both models, at each
// model's prompt rate, both loaded once per arm, and says how.
func TestDryRunPricesTheFidelityStep(t *testing.T) {
	d := demoDesign(t)
	p, err := NewPlan(d, demoTasks(10, 4), PlanOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	prompt := func(TrialKey) int { return 400 }
	without, err := DryRun(d, p, demoSpeeds(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	d.JobKinds[0].Reference = demoQ8
	e, err := DryRun(d, p, demoSpeeds(), prompt)
	if err != nil {
		t.Fatal(err)
	}
	var fid *ArmCost
	for i, c := range e.Arms {
		if c.Arm == FidelityCostPrefix+"extract-json" {
			fid = &e.Arms[i]
		}
	}
	if fid == nil {
		t.Fatalf("no fidelity row in %+v", e.Arms)
	}
	// The reference (Q8_0 on llama-server: 1200 tok/s prompt, output at its
	// stop cap) held by the Q4_1 arm (2000 tok/s) and the Ollama arm (1000).
	speeds := demoSpeeds()
	n := 400.0 + float64(d.Arm(demoQ8).Pins.StopCap)
	ref := speeds[demoQ8]
	var want float64
	for _, arm := range []string{demoQ4, demoQ8Olla} {
		as := speeds[arm]
		want += ref.LoadSeconds + as.LoadSeconds + 10*n/ref.PromptTokensPerSec + 10*n/as.PromptTokensPerSec
	}
	if got := fid.WallTime.Seconds(); got < want-0.01 || got > want+0.01 || fid.Trials != 20 || fid.Loads != 4 {
		t.Errorf("fidelity priced %+v (%.2fs), want 20 scored tasks, 4 loads, %.2fs", *fid, got, want)
	}
	if d := e.WallTime - without.WallTime - fid.WallTime; d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("the total grew by %s besides the fidelity row's %s", e.WallTime-without.WallTime, fid.WallTime)
	}
	var buf bytes.Buffer
	if err := e.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), fidelityNote) {
		t.Errorf("the table does not say how fidelity was priced:\n%s", buf.String())
	}
}
