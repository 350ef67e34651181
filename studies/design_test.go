package studies

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

const demoPath = "../examples/demo-study/design.json"

func readDemo(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile(demoPath)
	if err != nil {
		t.Fatalf("read bundled example: %v", err)
	}
	return data
}

func demoDesign(t testing.TB) *Design {
	t.Helper()
	d, err := ParseDesign("design.json", readDemo(t))
	if err != nil {
		t.Fatalf("parse bundled example: %v", err)
	}
	return d
}

// mutated returns the demo design as JSON after edit changed its tree.
func mutated(t *testing.T, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readDemo(t), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func arm(m map[string]any, i int) map[string]any { return m["arms"].([]any)[i].(map[string]any) }
func pins(m map[string]any, i int) map[string]any {
	return arm(m, i)["pins"].(map[string]any)
}

func TestBundledExampleValidates(t *testing.T) {
	d := demoDesign(t)
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Fatalf("bundled example does not validate:\n%v", err)
	}
	if len(d.JobKinds) < 2 {
		t.Errorf("bundled example has %d job kinds, want at least 2", len(d.JobKinds))
	}
	runtimes := map[Runtime]bool{}
	for _, a := range d.Arms {
		runtimes[a.Runtime] = true
	}
	for _, rt := range []Runtime{"ollama", "llama-server"} {
		if !runtimes[rt] {
			t.Errorf("bundled example has no %s arm", rt)
		}
	}
	ids := map[string]bool{}
	for _, it := range d.Items {
		ids[it.RegistryID] = true
	}
	for _, id := range []string{"smollm2-135m-instruct", "smollm2-135m-instruct-q8_0", "llama-cpp", "ollama", "aider-chat", "rig-bank-extract-json", "rig-bank-fix-test"} {
		if !ids[id] {
			t.Errorf("bundled example lists no item with registry id %q", id)
		}
	}
}

func TestExampleDesignParsesAndValidates(t *testing.T) {
	ex := ExampleDesign()
	if !strings.Contains(string(ex), "# ") {
		t.Error("example design carries no comments")
	}
	d, err := ParseDesign("design.yaml", ex)
	if err != nil {
		t.Fatalf("example design: %v", err)
	}
	if err := Validate(context.Background(), d, ValidateOptions{File: "design.yaml"}); err != nil {
		t.Fatalf("example design does not validate:\n%v", err)
	}
	if d.Arms[0].Model.File != "${SMOLLM2_GGUF}" {
		t.Errorf("model file reference = %q, want it kept unexpanded", d.Arms[0].Model.File)
	}
}

func TestYAMLAndJSONDecodeTheSame(t *testing.T) {
	fromJSON := demoDesign(t)
	// JSON is a subset of YAML: the same bytes read as YAML must decode alike.
	fromYAML, err := ParseDesign("design.yaml", readDemo(t))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(fromJSON)
	b, _ := json.Marshal(fromYAML)
	if string(a) != string(b) {
		t.Errorf("YAML and JSON readings differ:\n%s\n%s", a, b)
	}
}

func TestParseDesignErrors(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		data     []byte
		wantKind ProblemKind // zero: a *ParseError
		wantPath string
		wantMsg  string
	}{
		{name: "malformed JSON", file: "design.json", data: []byte(`{"name": "x",, }`), wantMsg: "design.json:1:"},
		{name: "truncated JSON", file: "design.json", data: []byte(`{"name": "x"`), wantMsg: "ends inside a value"},
		{name: "empty", file: "design.json", data: []byte("  \n"), wantMsg: "rig study init"},
		{name: "null", file: "design.json", data: []byte(`null`), wantMsg: "is null"},
		{name: "two values", file: "design.json", data: []byte(`{} {}`), wantMsg: "more than one JSON value"},
		{name: "malformed YAML", file: "design.yaml", data: []byte("name: [unclosed\n"), wantMsg: "design.yaml"},
		{name: "JSON duplicate key", file: "design.json", data: []byte(`{"arms":[{"name":"a"},{"pins":{"quant":"x","quant":"y"}}]}`), wantMsg: "arms[1].pins.quant: key appears twice"},
		{name: "YAML duplicate key", file: "d.yaml", data: []byte("name: a\nname: b\n"), wantMsg: `"name" appears twice`},
		{
			name: "unknown nested field", file: "design.json",
			data:     mutated(t, func(m map[string]any) { pins(m, 2)["quantisation"] = "Q4_1" }),
			wantKind: KindUnknownField, wantPath: "arms[2].pins.quantisation", wantMsg: "known fields here: context, effort",
		},
		{
			name: "unknown top-level field", file: "design.json",
			data:     mutated(t, func(m map[string]any) { m["repeat"] = 3 }),
			wantKind: KindUnknownField, wantPath: "repeat",
		},
		{
			name: "wrong type", file: "design.json",
			data:     mutated(t, func(m map[string]any) { pins(m, 1)["context"] = "2048" }),
			wantKind: KindWrongType, wantPath: "arms[1].pins.context", wantMsg: "want a whole number",
		},
		{
			name: "fraction where integer", file: "design.json",
			data:     mutated(t, func(m map[string]any) { m["repeats"] = 1.5 }),
			wantKind: KindWrongType, wantPath: "repeats",
		},
		{
			name: "unknown field in YAML", file: "design.yaml",
			data:     []byte("name: x\narms:\n  - name: a\n    pins: {quant: Q4_1, quant_x: 1}\n"),
			wantKind: KindUnknownField, wantPath: "arms[0].pins.quant_x",
		},
		{name: "top level not an object", file: "design.json", data: []byte(`[1,2]`), wantKind: KindWrongType, wantPath: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDesign(tc.file, tc.data)
			if err == nil {
				t.Fatalf("parsed %+v, want an error", d)
			}
			if tc.wantKind == "" {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error %T %v, want *ParseError", err, err)
				}
			} else {
				var ve *ValidationError
				if !errors.As(err, &ve) || !ve.Has(tc.wantKind, tc.wantPath) {
					t.Fatalf("error %v, want %s at %q", err, tc.wantKind, tc.wantPath)
				}
				if !errors.Is(err, ErrInvalidDesign) {
					t.Error("errors.Is(err, ErrInvalidDesign) is false")
				}
			}
			if !strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %q does not name the file %q", err, tc.file)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tc.wantMsg)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(m map[string]any)
		wantKind ProblemKind
		wantPath string
		wantMsg  string
	}{
		{"unknown runtime", func(m map[string]any) { arm(m, 1)["runtime"] = "vllm" }, KindUnknownRT, "arms[1].runtime", `"vllm" is not a runtime`},
		{"offload on a cpu build", func(m map[string]any) {
			pins(m, 0)["offload"] = map[string]any{"backend": "cpu", "gpu_layers": 12}
		}, KindInvalid, "arms[0].pins.offload", "a CPU build has no card"},
		{"offload backend unknown", func(m map[string]any) {
			pins(m, 0)["offload"] = map[string]any{"backend": "rocm"}
		}, KindInvalid, "arms[0].pins.offload", "not one of cpu, cuda"},
		{"kv on host on ollama", func(m map[string]any) {
			pins(m, 1)["offload"] = map[string]any{"backend": "cuda", "gpu_layers": -1, "kv_on_host": true}
		}, KindInvalid, "arms[1].pins.offload.kv_on_host", "Ollama has no setting"},
		{"missing sentence", func(m map[string]any) {
			m["sentences"].(map[string]any)["why_the_measure"] = ""
		}, KindMissing, "sentences.why_the_measure", "the measure is wrong"},
		{"repeats zero", func(m map[string]any) { m["repeats"] = 0 }, KindInvalid, "repeats", "at least 1"},
		{"pair with unknown arm", func(m map[string]any) {
			m["pairs"] = []any{map[string]any{"challenger": "gemma3-vllm", "incumbent": "smollm2-llama-server"}}
		}, KindUnknownRef, "pairs[0].challenger", `"gemma3-vllm" is not an arm`},
		{"shared pins differ", func(m map[string]any) { pins(m, 2)["context"] = 4096 }, KindPinsDiffer, "arms[2].pins.context", "differs from arms[0].pins.context 2048"},
		{"shared sampling differs", func(m map[string]any) {
			pins(m, 1)["sampling"].(map[string]any)["temperature"] = 0.7
		}, KindPinsDiffer, "arms[1].pins.sampling", `job kind "extract-json"`},
		{"duplicate arm", func(m map[string]any) { arm(m, 2)["name"] = "smollm2-q8-ollama" }, KindDuplicate, "arms[2].name", "already arms[1]"},
		{"two incumbents", func(m map[string]any) { arm(m, 1)["role"] = "incumbent" }, KindInvalid, "arms[1].role", "second incumbent"},
		{"no incumbent", func(m map[string]any) { arm(m, 0)["role"] = "candidate" }, KindMissing, "arms", "no incumbent"},
		{"guest in pair", func(m map[string]any) {
			arm(m, 1)["guest"] = true
			m["pairs"] = []any{map[string]any{"challenger": "smollm2-q8-ollama", "incumbent": "smollm2-llama-server"}}
		}, KindInvalid, "pairs[0]", "never ranks"},
		{"unknown job kind on arm", func(m map[string]any) { arm(m, 1)["job_kinds"] = []any{"summarise"} }, KindUnknownRef, "arms[1].job_kinds[0]", `"summarise" is not a job kind`},
		{"model not in items", func(m map[string]any) {
			arm(m, 1)["model"].(map[string]any)["registry_name"] = "Qwen3-0.6B"
		}, KindUnknownRef, "arms[1].model.registry_name", "not listed in items"},
		{"rule without no-decision", func(m map[string]any) {
			r := m["decision_rule"].(map[string]any)
			r["clauses"] = []any{map[string]any{"when": "challenger_better", "assign": "switch"}}
		}, KindMissing, "decision_rule", OutcomeNoDecision},
		{"unknown condition", func(m map[string]any) {
			r := m["decision_rule"].(map[string]any)
			r["clauses"].([]any)[0].(map[string]any)["when"] = "vibes"
		}, KindInvalid, "decision_rule.clauses[0].when", "use one of"},
		{"bad wall time", func(m map[string]any) { m["budget"].(map[string]any)["wall_time"] = "an hour" }, KindInvalid, "budget.wall_time", "positive duration"},
		{"bad sha256", func(m map[string]any) { arm(m, 0)["model"].(map[string]any)["sha256"] = "abc" }, KindInvalid, "arms[0].model.sha256", "64 lowercase hex"},
		{"stop cap above context", func(m map[string]any) {
			for i := range 3 {
				pins(m, i)["stop_cap"] = 4096
			}
		}, KindInvalid, "arms[0].pins.stop_cap", "not below the context"},
		{"bad pins source", func(m map[string]any) { arm(m, 0)["pins_source"] = "mine" }, KindInvalid, "arms[0].pins_source", "production-values"},
		{"bad study name", func(m map[string]any) { m["name"] = "My Study" }, KindInvalid, "name", "lowercase"},
		{"harness wall not a duration", func(m map[string]any) {
			m["job_kinds"].([]any)[0].(map[string]any)["harness_caps"] = map[string]any{"wall": "five minutes"}
		}, KindInvalid, "job_kinds[0].harness_caps.wall", `such as "5m"`},
		{"harness turns negative", func(m map[string]any) {
			m["job_kinds"].([]any)[0].(map[string]any)["harness_caps"] = map[string]any{"turns": -1}
		}, KindInvalid, "job_kinds[0].harness_caps.turns", "1 or more"},
		{"harness tokens negative", func(m map[string]any) {
			m["job_kinds"].([]any)[0].(map[string]any)["harness_caps"] = map[string]any{"tokens": -5}
		}, KindInvalid, "job_kinds[0].harness_caps.tokens", "1 or more"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := ParseDesign("design.json", mutated(t, tc.edit))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			err = Validate(context.Background(), d, ValidateOptions{})
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a *ValidationError", err)
			}
			if !ve.Has(tc.wantKind, tc.wantPath) {
				t.Fatalf("want %s at %q, got:\n%v", tc.wantKind, tc.wantPath, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error does not contain %q:\n%v", tc.wantMsg, err)
			}
			if !strings.Contains(err.Error(), "design.json: "+tc.wantPath) {
				t.Errorf("error does not name file and path:\n%v", err)
			}
		})
	}
}

func TestProductionValuesMayDiffer(t *testing.T) {
	data := mutated(t, func(m map[string]any) {
		pins(m, 2)["context"] = 4096
		arm(m, 2)["pins_source"] = "production-values"
	})
	d, err := ParseDesign("design.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(context.Background(), d, ValidateOptions{}); err != nil {
		t.Fatalf("production-values arm with its own context rejected: %v", err)
	}
}

// fakeQuants maps a model path to the quant its header would report.
type fakeQuants map[string]string

func (f fakeQuants) read(path string) (string, error) {
	q, ok := f[path]
	if !ok {
		return "", os.ErrNotExist
	}
	return q, nil
}

func TestQuantCheck(t *testing.T) {
	dir := t.TempDir()
	smol, gemma := filepath.Join(dir, "smol.gguf"), filepath.Join(dir, "smol-q8_0.gguf")
	env := map[string]string{"SMOLLM2_GGUF": smol, "SMOLLM2_REQUANT_Q8_0_GGUF": gemma}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	tests := []struct {
		name     string
		quants   fakeQuants
		lookup   func(string) (string, bool)
		wantKind ProblemKind
		wantPath string
		wantMsg  string
	}{
		{name: "all match", quants: fakeQuants{smol: "Q4_1", gemma: "q8_0"}, lookup: lookup},
		{name: "q8 file holds another quant", quants: fakeQuants{smol: "Q4_1", gemma: "Q4_1"}, lookup: lookup,
			wantKind: KindQuantMismatch, wantPath: "arms[1].pins.quant",
			wantMsg: `arms[1].pins.quant: "Q8_0" differs from the model file's "Q4_1" (pins hold for the whole run; add a separate arm for another quant)`},
		{name: "file missing", quants: fakeQuants{gemma: "Q8_0"}, lookup: lookup,
			wantKind: KindUnreadable, wantPath: "arms[0].model.file", wantMsg: "smol.gguf"},
		{name: "reference unset", quants: fakeQuants{}, lookup: func(string) (string, bool) { return "", false },
			wantKind: KindUnreadable, wantPath: "arms[0].model.file", wantMsg: "SMOLLM2_GGUF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := demoDesign(t)
			err := Validate(context.Background(), d, ValidateOptions{Quant: tc.quants.read, Lookup: tc.lookup})
			if tc.wantKind == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !ve.Has(tc.wantKind, tc.wantPath) {
				t.Fatalf("want %s at %q, got %v", tc.wantKind, tc.wantPath, err)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error does not contain %q:\n%v", tc.wantMsg, err)
			}
		})
	}
}

func TestModelPath(t *testing.T) {
	lookup := func(k string) (string, bool) {
		if k == "M" {
			return "/models/m.gguf", true
		}
		return "", false
	}
	tests := []struct {
		ref, base, want string
		wantErr         bool
	}{
		{ref: "${M}", want: "/models/m.gguf"},
		{ref: "rel/m.gguf", base: "/study", want: "/study/rel/m.gguf"},
		{ref: "/abs/m.gguf", base: "/study", want: "/abs/m.gguf"},
		{ref: "${NOPE}", wantErr: true},
	}
	for _, tc := range tests {
		got, err := ModelPath(tc.ref, lookup, tc.base)
		if tc.wantErr {
			if !errors.Is(err, ErrUnsetReference) {
				t.Errorf("ModelPath(%q) err = %v, want ErrUnsetReference", tc.ref, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ModelPath(%q, %q) = %q, %v; want %q", tc.ref, tc.base, got, err, tc.want)
		}
	}
}

func TestResolvedPairsDefault(t *testing.T) {
	d := demoDesign(t)
	got := d.ResolvedPairs()
	want := []Pair{
		{Challenger: "smollm2-q8-ollama", Incumbent: "smollm2-llama-server", JobKind: "extract-json"},
		{Challenger: "smollm2-q8-llama-server", Incumbent: "smollm2-llama-server", JobKind: "extract-json"},
		{Challenger: "smollm2-q8-aider-ollama", Incumbent: "smollm2-aider-llama-server", JobKind: "fix-test"},
	}
	if len(got) != len(want) {
		t.Fatalf("pairs = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("pair %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	d.Arms[1].Guest = true
	for _, p := range d.ResolvedPairs() {
		if p.Challenger == d.Arms[1].Name {
			t.Errorf("guest arm %q was paired by default", p.Challenger)
		}
	}
}

func FuzzParseDesign(f *testing.F) {
	f.Add(readDemo(f), false)
	f.Add(ExampleDesign(), true)
	f.Add([]byte(`{"name":"x","arms":[{"pins":{"quant":1}}]}`), false)
	f.Add([]byte("name: x\nrepeats: 0x10\ntop_k: .inf\n"), true)
	f.Add([]byte("a: &x 1\nb: *x\n"), true)
	f.Add([]byte("{\n\"name\": \"x\",\n\"sentences\": \"\xff\"}"), false)
	f.Add([]byte("name: x\nrepeats: 1\nsentences: \xff\n"), true)
	// Values no run can honour (see boundCases): parsed, then refused by Validate.
	f.Add([]byte("name: x\nrepeats: 1099511627776\njob_kinds:\n- sample_tasks: -1\n  task_bank: ../../../etc/passwd\n"), true)
	f.Add([]byte(`{"repeats": -3, "top_k": 1048576, "budget": {"energy_wh": 1e308}, "arms": [{"pins": {"context": 1073741824}}]}`), false)
	// Whole numbers with a fraction or an exponent, seeds past 64 bits, null.
	f.Add([]byte("name: x\nrepeats: 1.0\njob_kinds:\n- grader: {name: regex, version: 1.0}\n"), true)
	f.Add([]byte(`{"repeats": 2e0, "top_k": 1e-999999999, "arms": [{"pins": {"sampling": {"seed": 18446744073709551616}, "context": 0.5e4}}], "pairs": null}`), false)
	f.Fuzz(func(t *testing.T, data []byte, asYAML bool) {
		file := "design.json"
		if asYAML {
			file = "design.yaml"
		}
		d, err := ParseDesign(file, data)
		if err != nil {
			if d != nil {
				t.Fatal("design returned with an error")
			}
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if !utf8.Valid(data) {
			t.Fatal("a design that is not UTF-8 was accepted")
		}
		// Whatever parses must validate without panicking, and a design
		// that validates must survive a round trip through JSON.
		if Validate(context.Background(), d, ValidateOptions{BaseDir: "testdata"}) == nil {
			if d.Repeats > MaxRepeats || len(d.Arms) < 2 {
				t.Fatalf("accepted %d repeats, %d arms", d.Repeats, len(d.Arms))
			}
			for _, jk := range d.JobKinds {
				if jk.SampleTasks < 0 || jk.SampleTasks > MaxSampleTasks {
					t.Fatalf("accepted sample_tasks %d", jk.SampleTasks)
				}
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseDesign("design.json", out); err != nil {
				t.Fatalf("valid design does not reparse: %v", err)
			}
		}
	})
}

// A job kind's harness_caps replace the defaults field by field, for that job
// kind only; every arm of the job kind gets the same caps.
func TestHarnessCapsOverrideTheDefaultsPerJobKind(t *testing.T) {
	d, err := ParseDesign("design.json", mutated(t, func(m map[string]any) {
		m["job_kinds"].([]any)[0].(map[string]any)["harness_caps"] = map[string]any{"wall": "5m", "turns": 2}
	}))
	if err != nil {
		t.Fatal(err)
	}
	name := d.JobKinds[0].Name
	got := d.AiderCapsFor(name)
	if got.Wall != 5*time.Minute || got.Turns != 2 || got.Tokens != defaultAiderCaps.Tokens {
		t.Errorf("caps of %s: %+v, want wall 5m, 2 turns, default tokens", name, got)
	}
	if other := d.AiderCapsFor("no-such-kind"); other != defaultAiderCaps {
		t.Errorf("a job kind without harness_caps got %+v, want the defaults %+v", other, defaultAiderCaps)
	}
}
