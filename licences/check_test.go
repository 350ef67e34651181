package licences

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testRegistry(t *testing.T) *Registry {
	t.Helper()
	data := `{"schema_version":1,"entries":[
 {"id":"model-a","item":"Model A","kind":"model","licence":"Apache-2.0","source_page":"PyPI model-a: LICENSE","clause":"§2","date_read":"2026-11-30",
  "verdicts":{"inference":{"verdict":"allowed","reading":"granted"},
              "training_on_outputs":{"verdict":"restricted","reading":"derived models inherit the terms","clause":"§1.1(e)"},
              "distillation":{"verdict":"banned","reading":"§7 bars distillation","clause":"§7"}}},
 {"id":"rt","item":"Runtime","kind":"runtime","licence":"MIT","source_page":"LICENSE","clause":"MIT","date_read":"2026-11-30",
  "verdicts":{"inference":{"verdict":"allowed","reading":"MIT grant"}}},
 {"id":"harness","item":"Aider","kind":"tool","licence":"Apache-2.0","source_page":"LICENSE","clause":"§2","date_read":"2026-11-30",
  "verdicts":{"inference":{"verdict":"allowed","reading":"granted"}}}
]}`
	reg, err := ParseRegistry("test.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

func TestCheckLines(t *testing.T) {
	reg := testRegistry(t)
	tests := []struct {
		item        Item
		want        string
		wantDefault bool
	}{
		{Item{RoleWriter, "Model-A-1B", "model-a", UseInference}, "writer: Model-A-1B (model-a, inference: allowed)", false},
		{Item{RoleCandidate, "Model-A-1B", "model-a", UseTrainingOnOutputs}, "candidate: Model-A-1B (model-a, training_on_outputs: restricted)", false},
		// evaluation is not a commonly banned use and no clause restricts it.
		{Item{RoleJudge, "Model-A-1B", "model-a", UseEvaluation}, "judge: Model-A-1B (model-a, evaluation: allowed)", true},
		{Item{RoleRuntime, "llama-server", "rt", UseInference}, "runtime: llama-server (rt, inference: allowed)", false},
		{Item{RoleRuntime, "aider", "harness", UseInference}, "runtime: aider (harness, inference: allowed)", false},
	}
	for _, tc := range tests {
		res := Check(reg, []Item{tc.item})
		if err := res.Err(); err != nil {
			t.Errorf("%s: blocked: %v", tc.want, err)
			continue
		}
		if len(res.Lines) != 1 {
			t.Fatalf("%d lines, want 1", len(res.Lines))
		}
		if got := res.Lines[0].String(); got != tc.want {
			t.Errorf("line = %q, want %q", got, tc.want)
		}
		if res.Lines[0].Default != tc.wantDefault {
			t.Errorf("%s: Default = %v, want %v", tc.want, res.Lines[0].Default, tc.wantDefault)
		}
	}
}

func TestCheckBlocks(t *testing.T) {
	reg := testRegistry(t)
	tests := []struct {
		name     string
		item     Item
		wantText []string
	}{
		{"missing entry", Item{RoleWriter, "Muse-30B", "muse-30b-card", UseInference},
			[]string{`no entry "muse-30b-card" in test.json`, `add an entry with id "muse-30b-card" to test.json`}},
		{"no registry id", Item{RoleCritic, "Muse Glimmer 30B", "", UseInference},
			[]string{`add an entry with id "muse-glimmer-30b"`}},
		{"banned use", Item{RoleWriter, "Model-A-1B", "model-a", UseDistillation},
			[]string{"distillation is banned", "§7 bars distillation"}},
		{"commonly banned without reading", Item{RoleWriter, "Model-A-1B", "model-a", UseCompetingModels},
			[]string{"commonly ban", "verdicts.competing_models", "PyPI model-a: LICENSE"}},
		{"kind mismatch", Item{RoleWriter, "Runtime", "rt", UseInference},
			[]string{`entry "rt" in test.json is a runtime`}},
		{"unknown use", Item{RoleWriter, "Model-A-1B", "model-a", "mining"},
			[]string{`use "mining" is not a use`}},
		{"unknown role", Item{"pilot", "Model-A-1B", "model-a", UseInference},
			[]string{`role "pilot" is not a role`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Check(reg, []Item{tc.item})
			err := res.Err()
			if !errors.Is(err, ErrBlocked) {
				t.Fatalf("err = %v, want ErrBlocked", err)
			}
			var be *BlockedError
			if !errors.As(err, &be) || len(be.Blocks) != 1 {
				t.Fatalf("err = %#v, want one block", err)
			}
			if be.Blocks[0].Item != tc.item {
				t.Errorf("block names %+v, want %+v", be.Blocks[0].Item, tc.item)
			}
			for _, s := range tc.wantText {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
}

// A commonly banned use whose reading is empty (a registry built in code, not
// parsed) still blocks.
func TestCheckEmptyReadingBlocks(t *testing.T) {
	reg := &Registry{SchemaVersion: 1, Entries: []Entry{{ID: "m", Kind: KindModel, SourcePage: "p",
		Verdicts: map[Use]Verdict{UseTrainingOnOutputs: {Verdict: Allowed}}}}}
	res := Check(reg, []Item{{RoleWriter, "M", "m", UseTrainingOnOutputs}})
	if !errors.Is(res.Err(), ErrBlocked) {
		t.Fatalf("empty reading of a commonly banned use passed: %+v", res)
	}
}

func TestCheckListsEveryBlock(t *testing.T) {
	reg := testRegistry(t)
	items := []Item{
		{RoleWriter, "Model-A-1B", "model-a", UseInference},
		{RoleWriter, "X", "x", UseInference},
		{RoleWriter, "Model-A-1B", "model-a", UseDistillation},
	}
	res := Check(reg, items)
	if len(res.Lines) != 1 || len(res.Blocks) != 2 {
		t.Fatalf("lines=%d blocks=%d, want 1 and 2", len(res.Lines), len(res.Blocks))
	}
	var buf bytes.Buffer
	if _, err := res.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 3 || strings.Count(out, "BLOCKED ") != 2 {
		t.Errorf("output:\n%s", out)
	}
}

func TestValidateItems(t *testing.T) {
	tests := []struct {
		item      Item
		wantField string
	}{
		{Item{"boss", "n", "id", UseInference}, "items[0].role"},
		{Item{RoleWriter, " ", "id", UseInference}, "items[0].name"},
		{Item{RoleWriter, "n", "id", "x"}, "items[0].use"},
		{Item{RoleWriter, "Qwen 2.5 7B", "", UseInference}, "items[0].registry_id"},
	}
	for _, tc := range tests {
		err := ValidateItems("design.json", "items", []Item{tc.item})
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Field != tc.wantField || pe.File != "design.json" {
			t.Errorf("%+v: err = %v, want field %s", tc.item, err, tc.wantField)
		}
	}
	if err := ValidateItems("design.json", "items", []Item{{RoleWriter, "n", "id", UseInference}}); err != nil {
		t.Errorf("valid item refused: %v", err)
	}
}

func TestRunCheck(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	items := []Item{
		{RoleCandidate, "SmolLM2-135M-Instruct", "smollm2-135m-instruct", UseEvaluation},
		{RoleCandidate, "gemma-3-270m", "gemma-3-270m", UseDistillation},
		{RoleRuntime, "llama-server", "llama-cpp", UseInference},
		{RoleRuntime, "ollama", "ollama", UseInference},
		{RoleTool, "aider", "aider-chat", UseInference},
	}
	if err := RunCheck(ctx, &buf, "", items); err != nil {
		t.Fatalf("bundled registry blocks the bundled items: %v\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "candidate: gemma-3-270m (gemma-3-270m, distillation: restricted)") {
		t.Errorf("output:\n%s", buf.String())
	}

	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, []byte(validRegistry), 0o600); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	err := RunCheck(ctx, &buf, path, []Item{{RoleWriter, "A", "model-a", UseDistillation}})
	if !errors.Is(err, ErrBlocked) || !strings.Contains(buf.String(), "BLOCKED writer: A") {
		t.Errorf("err = %v, output %q", err, buf.String())
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := RunCheck(cctx, &buf, "", items); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
}

func TestSuggestID(t *testing.T) {
	for in, want := range map[string]string{
		"Muse-Glimmer-30B": "muse-glimmer-30b",
		"Qwen 2.5 (7B)":    "qwen-2.5-7b",
		"!!!":              "new-item",
	} {
		got := suggestID(in)
		if got != want || !idPattern.MatchString(got) {
			t.Errorf("suggestID(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDemoDesignItems checks the bundled registry against the items of the
// bundled demo study, so the two cannot drift apart unnoticed.
func TestDemoDesignItems(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "examples", "demo-study", "design.json"))
	if err != nil {
		t.Skipf("demo design not present: %v", err)
	}
	var d struct {
		Items []Item `json:"items"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Items) == 0 {
		t.Fatal("demo design lists no items")
	}
	if err := ValidateItems("design.json", "items", d.Items); err != nil {
		t.Fatal(err)
	}
	reg, err := Bundled()
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(reg, d.Items).Err(); err != nil {
		t.Errorf("bundled registry blocks the demo study: %v", err)
	}
}
