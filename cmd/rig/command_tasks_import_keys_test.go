package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/tasks"
)

// keyAll fills pass on every line of a reviewer file: true on even lines.
func keyAll(t *testing.T, items, keyed string, drop int) {
	t.Helper()
	data, err := os.ReadFile(items)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if i == drop {
			continue
		}
		var k tasks.KeyingItem
		if err := json.Unmarshal([]byte(line), &k); err != nil {
			t.Fatal(err)
		}
		pass := i%2 == 0
		k.Pass = &pass
		j, err := json.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(j))
	}
	if err := os.WriteFile(keyed, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTasksImportKeys(t *testing.T) {
	dir, cands, ctrls, _ := blindFixture(t)
	items := filepath.Join(dir, "review.jsonl")
	mapFile := filepath.Join(dir, "review.map.json")
	if _, err := runRig(t, "tasks", "export-blind", "--candidates", cands, "--controls", ctrls,
		"--out", items, "--map", mapFile, "--seed", "3"); err != nil {
		t.Fatal(err)
	}
	keyed := filepath.Join(dir, "keyed.jsonl")
	keyAll(t, items, keyed, -1)

	out, err := runRig(t, "tasks", "import-keys", keyed, "--map", mapFile)
	if err != nil {
		t.Fatal(err)
	}
	var arms = map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var k tasks.HumanKey
		if err := json.Unmarshal([]byte(line), &k); err != nil {
			t.Fatalf("output line is not a joined key: %v: %s", err, line)
		}
		if k.Pass == nil {
			t.Errorf("key %s lost its pass", k.Label)
		}
		arms[k.Arm]++
	}
	if arms["gemma3-ollama"] != 2 || arms["smollm2-llama-server"] != 2 {
		t.Errorf("joined arms %v, want 2 of each", arms)
	}

	joined := filepath.Join(dir, "joined.jsonl")
	out, err = runRig(t, "tasks", "import-keys", keyed, "--map", mapFile, "--out", joined)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "joined 4") {
		t.Errorf("summary %q does not count 4", out)
	}
	if _, err := os.Stat(joined); err != nil {
		t.Error(err)
	}

	short := filepath.Join(dir, "short.jsonl")
	keyAll(t, items, short, 1)
	if _, err := runRig(t, "tasks", "import-keys", short, "--map", mapFile); err == nil || !strings.Contains(err.Error(), "not keyed") {
		t.Errorf("an unkeyed item: err = %v, want 'not keyed'", err)
	}
	if _, err := runRig(t, "tasks", "import-keys", keyed); err == nil || !strings.Contains(err.Error(), "--map") {
		t.Errorf("no map: err = %v, want it to ask for --map", err)
	}
}
