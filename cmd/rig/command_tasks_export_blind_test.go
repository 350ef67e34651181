package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/tasks"
)

// blindFixture writes candidate and control outputs for the first two tasks
// of the bundled extract-json bank, each naming its arm and model in the
// text the way a chatty model does.
func blindFixture(t *testing.T) (dir, cands, ctrls string, bank *tasks.Bank) {
	t.Helper()
	b, err := tasks.LoadBank(repoFile("tasks", "banks", extractBank))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	write := func(name, arm, model string) string {
		var lines []string
		for i, task := range b.Tasks[:2] {
			o := tasks.Output{TrialID: arm + "-" + task.ID, TaskID: task.ID, Arm: arm, Model: model,
				Text: "As " + model + " I answer: {\"n\": " + string(rune('1'+i)) + "}"}
			j, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(j))
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return dir, write("cand.jsonl", "gemma3-ollama", "gemma3:270m"), write("ctrl.jsonl", "smollm2-llama-server", "smollm2:135m"), b
}

func TestTasksExportBlind(t *testing.T) {
	dir, cands, ctrls, b := blindFixture(t)
	items := filepath.Join(dir, "review.jsonl")
	mapFile := filepath.Join(dir, "review.map.json")
	args := []string{"tasks", "export-blind", "--bank", repoFile("tasks", "banks", extractBank),
		"--candidates", cands, "--controls", ctrls, "--out", items, "--map", mapFile, "--seed", "7"}
	out, err := runRig(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "4 items") {
		t.Errorf("summary does not count 4 items: %q", out)
	}
	text, err := os.ReadFile(items)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gemma", "smollm2", "ollama", "llama-server"} {
		if strings.Contains(strings.ToLower(string(text)), id) {
			t.Errorf("reviewer file names %q:\n%s", id, text)
		}
	}
	if !strings.Contains(string(text), b.Tasks[0].ID) {
		t.Errorf("reviewer file lacks the task id %s", b.Tasks[0].ID)
	}
	m, err := readBlindMap(mapFile)
	if err != nil {
		t.Fatal(err)
	}
	if m.Seed != 7 || len(m.Entries) != 4 {
		t.Errorf("map seed %d with %d entries, want seed 7 and 4 entries", m.Seed, len(m.Entries))
	}

	// Neither file is ever overwritten.
	if _, err := runRig(t, args...); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second export: err = %v, want an 'exists' refusal", err)
	}
}

func TestTasksExportBlindRefuses(t *testing.T) {
	dir, cands, _, _ := blindFixture(t)
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"task_id":"a","text":"x"}`+"\n"+`{"task":"b"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no map", []string{"--candidates", cands, "--out", filepath.Join(dir, "o1")}, "--map"},
		{"unknown field", []string{"--candidates", bad, "--out", filepath.Join(dir, "o2"), "--map", filepath.Join(dir, "m2")}, "bad.jsonl:2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runRig(t, append([]string{"tasks", "export-blind"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseOutputs(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{"two lines and a blank", "{\"task_id\":\"a\",\"text\":\"x\"}\n\n{\"task_id\":\"b\",\"files\":{\"f.py\":\"y\"}}\n", 2, ""},
		{"missing task_id", "{\"text\":\"x\"}\n", 0, "f.jsonl:1: task_id"},
		{"two objects on a line", "{\"task_id\":\"a\"}{\"task_id\":\"b\"}\n", 0, "f.jsonl:1"},
		{"empty", "\n", 0, "no outputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseOutputs(strings.NewReader(tt.in), "f.jsonl")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != tt.want {
				t.Errorf("got %d outputs, err %v; want %d", len(got), err, tt.want)
			}
		})
	}
}

func FuzzParseOutputs(f *testing.F) {
	f.Add("{\"task_id\":\"a\",\"arm\":\"x\",\"text\":\"hi\"}\n")
	f.Add("{\"task_id\":\"a\",\"files\":{\"m.py\":\"def f(): pass\"}}\n{\"task_id\":\"b\"}")
	f.Add("{\"task_id\":")
	f.Add("\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		outs, err := parseOutputs(strings.NewReader(in), "f.jsonl")
		if err != nil {
			return
		}
		lines := 0
		sc := bufio.NewScanner(strings.NewReader(in))
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) != "" {
				lines++
			}
		}
		if len(outs) != lines {
			t.Errorf("%d outputs from %d non-blank lines", len(outs), lines)
		}
		for _, o := range outs {
			if o.TaskID == "" {
				t.Error("an output without task_id was accepted")
			}
		}
	})
}
