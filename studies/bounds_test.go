package studies

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func jobKind(m map[string]any, i int) map[string]any {
	return m["job_kinds"].([]any)[i].(map[string]any)
}

// boundCases are design values no run can honour: each is refused at its
// field, with the value, the bound and what to write instead.
var boundCases = []struct {
	name string
	edit func(m map[string]any)
	path string
	want []string // in the problem's message
}{
	{"repeats negative", func(m map[string]any) { m["repeats"] = -3 }, "repeats", []string{"-3", "at most 100"}},
	{"repeats enormous", func(m map[string]any) { m["repeats"] = 1 << 40 }, "repeats", []string{"1099511627776", "at least 1 and at most 100"}},
	{"sample_tasks negative", func(m map[string]any) { jobKind(m, 0)["sample_tasks"] = -1 }, "job_kinds[0].sample_tasks", []string{"-1", "0..100000", "runs every task"}},
	{"sample_tasks enormous", func(m map[string]any) { jobKind(m, 1)["sample_tasks"] = 1 << 33 }, "job_kinds[1].sample_tasks", []string{"8589934592", "0..100000"}},
	{"thousands of arms", func(m map[string]any) {
		arms := m["arms"].([]any)
		for len(arms) < 2000 {
			arms = append(arms, arms[len(arms)%5])
		}
		m["arms"] = arms
	}, "arms", []string{"2000 arms", "at most 64", "several studies"}},
	{"context enormous", func(m map[string]any) { pins(m, 0)["context"] = 1 << 30 }, "arms[0].pins.context", []string{"1073741824", "1..1048576"}},
	{"sampling top_k enormous", func(m map[string]any) {
		pins(m, 0)["sampling"].(map[string]any)["top_k"] = 1 << 31
	}, "arms[0].pins.sampling.top_k", []string{"2147483648", "0 (off) to 1048576"}},
	{"harness turns enormous", func(m map[string]any) {
		jobKind(m, 0)["harness_caps"] = map[string]any{"turns": 1 << 20}
	}, "job_kinds[0].harness_caps.turns", []string{"1048576", "at most 1000", "default"}},
	{"harness tokens enormous", func(m map[string]any) {
		jobKind(m, 0)["harness_caps"] = map[string]any{"tokens": 1 << 40}
	}, "job_kinds[0].harness_caps.tokens", []string{"at most 10000000"}},
	{"harness wall a year", func(m map[string]any) {
		jobKind(m, 0)["harness_caps"] = map[string]any{"wall": "8760h"}
	}, "job_kinds[0].harness_caps.wall", []string{`"8760h"`, "up to 24h"}},
	{"grader version enormous", func(m map[string]any) {
		jobKind(m, 0)["grader"].(map[string]any)["version"] = 1 << 40
	}, "job_kinds[0].grader.version", []string{"1..1000", "version bump"}},
	{"budget wall a decade", func(m map[string]any) {
		m["budget"].(map[string]any)["wall_time"] = "87600h"
	}, "budget.wall_time", []string{`"87600h"`, "720h"}},
	{"budget energy enormous", func(m map[string]any) { m["budget"].(map[string]any)["energy_wh"] = 1e12 }, "budget.energy_wh", []string{"1e+12", "at most 1000000"}},
	{"task_count enormous", func(m map[string]any) { m["power"].(map[string]any)["task_count"] = 1 << 40 }, "power.task_count", []string{"1..100000"}},
	{"max_cost_ratio enormous", func(m map[string]any) {
		clauses := m["decision_rule"].(map[string]any)["clauses"].([]any)
		clauses[0].(map[string]any)["max_cost_ratio"] = 1e9
	}, "decision_rule.clauses[0].max_cost_ratio", []string{"1e+09", "at most 1000"}},
	{"card offload enormous", func(m map[string]any) {
		m["card_profile"].(map[string]any)["offload_layers"] = 1 << 20
	}, "card_profile.offload_layers", []string{"0..1024"}},
	{"card context enormous", func(m map[string]any) {
		m["card_profile"].(map[string]any)["context"] = 1 << 30
	}, "card_profile.context", []string{"1..1048576"}},
	{"p_best_bar above 1", func(m map[string]any) { m["p_best_bar"] = 7 }, "p_best_bar", []string{"between 0 and 1"}},
	{"alpha 1", func(m map[string]any) { m["decision_rule"].(map[string]any)["alpha"] = 1 }, "decision_rule.alpha", []string{"e.g. 0.05"}},
	{"power above 1", func(m map[string]any) { m["power"].(map[string]any)["power"] = 80 }, "power.power", []string{"between 0 and 1"}},
	{"top_k enormous", func(m map[string]any) { m["top_k"] = 1 << 20 }, "top_k", []string{"0..20", "0 or left out means 5"}},
	{"seed 2^63", func(m map[string]any) {
		pins(m, 0)["sampling"].(map[string]any)["seed"] = json.Number("9223372036854775808")
	}, "arms[0].pins.sampling.seed", []string{"9223372036854775808", "from -9223372036854775808 to 9223372036854775807"}},
	{"seed 2^32", func(m map[string]any) {
		pins(m, 0)["sampling"].(map[string]any)["seed"] = 1 << 32
	}, "arms[0].pins.sampling.seed", []string{"4294967296", "from 0 to 4294967294", "random"}},
	{"seed -1", func(m map[string]any) {
		pins(m, 0)["sampling"].(map[string]any)["seed"] = -1
	}, "arms[0].pins.sampling.seed", []string{"-1", "from 0 to 4294967294"}},
	{"task bank leaves the study", func(m map[string]any) { jobKind(m, 0)["task_bank"] = "../../../../etc/passwd" }, "job_kinds[0].task_bank", []string{`"../../../../etc/passwd"`, "outside", "allow_paths_outside"}},
	{"task bank absolute elsewhere", func(m map[string]any) { jobKind(m, 1)["task_bank"] = "/etc/passwd" }, "job_kinds[1].task_bank", []string{"/etc/passwd", "move the file inside"}},
	{"licence registry leaves the study", func(m map[string]any) { m["licence_registry"] = "../../elsewhere/registry.json" }, "licence_registry", []string{"outside", "allow_paths_outside"}},
}

// TestBoundsRefused: every bad value is a problem naming its field and the
// fix, and loading the design writes nothing.
func TestBoundsRefused(t *testing.T) {
	for _, tc := range boundCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "design.json")
			// The demo's banks sit in a repository the temporary folder is
			// not in: point them inside it, so only the edited path is wrong.
			data := mutated(t, func(m map[string]any) {
				for i := range m["job_kinds"].([]any) {
					jobKind(m, i)["task_bank"] = "banks/bank.jsonl"
				}
				tc.edit(m)
			})
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDesign(context.Background(), file, ValidateOptions{})
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("LoadDesign = %v, want a *ValidationError", err)
			}
			var msg string
			for _, p := range ve.Problems {
				if p.Path == tc.path {
					msg = p.Error()
				}
			}
			if msg == "" {
				t.Fatalf("no problem at %q, got:\n%v", tc.path, err)
			}
			for _, w := range append([]string{file + ": " + tc.path + ": "}, tc.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("problem %q does not say %q", msg, w)
				}
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("the folder holds %d entries after a refused design, want only design.json", len(ents))
			}
		})
	}
}

// TestPathsInsideTheRepository: the bundled examples read the repository's
// shared banks (../../tasks/banks), which stay inside the repository holding
// them; allow_paths_outside lets a design read a bank anywhere.
func TestPathsInsideTheRepository(t *testing.T) {
	for _, f := range []string{demoPath, quickPath, "../examples/card-study/design.json", stoppingExamplePath} {
		if _, err := LoadDesign(context.Background(), f, ValidateOptions{}); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	dir := t.TempDir()
	d := demoDesign(t)
	d.JobKinds[0].TaskBank = "/elsewhere/bank.jsonl"
	if err := Validate(context.Background(), d, ValidateOptions{BaseDir: dir}); err == nil || !err.(*ValidationError).Has(KindOutsideRoot, "job_kinds[0].task_bank") {
		t.Fatalf("bank outside accepted: %v", err)
	}
	d.AllowPathsOutside = true
	if err := Validate(context.Background(), d, ValidateOptions{BaseDir: dir}); err != nil {
		t.Fatalf("allow_paths_outside still refused: %v", err)
	}
	// A symbolic link inside the folder to a file outside it leaves it too.
	d.AllowPathsOutside = false
	outside := filepath.Join(t.TempDir(), "bank.jsonl")
	if err := os.WriteFile(outside, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "bank.jsonl")); err != nil {
		t.Skip(err)
	}
	d.JobKinds[0].TaskBank = "bank.jsonl"
	if err := Validate(context.Background(), d, ValidateOptions{BaseDir: dir}); err == nil || !err.(*ValidationError).Has(KindOutsideRoot, "job_kinds[0].task_bank") {
		t.Fatalf("a link out of the folder was followed: %v", err)
	}
}
