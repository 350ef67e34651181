// Package inspecttest reads eval logs with the real inspect-ai, for the
// tests of `rig export inspect` (interop/inspectlog's and cmd/rig's
// end-to-end test): Inspect's own reader and the JSON schema its CLI prints
// are the judges of the format, not rig's idea of it. Not for product code.
package inspecttest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

//go:embed read_eval.py
var readEval []byte

// quiet is the environment every inspect command runs with: no telemetry
// hook (INSPECT_TELEMETRY names one; empty is none), no terminal display.
// Nothing here reaches beyond loopback.
var quiet = []string{"INSPECT_TELEMETRY=", "INSPECT_DISPLAY=none", "DO_NOT_TRACK=1", "NO_COLOR=1"}

// Log is what read_eval.py prints of one log.
type Log struct {
	File         string             `json:"file"`
	Status       string             `json:"status"`
	Task         string             `json:"task"`
	Model        string             `json:"model"`
	Dataset      string             `json:"dataset"`
	Revision     string             `json:"revision"`
	Samples      []Sample           `json:"samples"`
	Metrics      map[string]float64 `json:"metrics"`
	SchemaErrors []string           `json:"schema_errors"`
}

// Sample is one sample as Inspect read it.
type Sample struct {
	ID         string             `json:"id"`
	Epoch      int                `json:"epoch"`
	Input      string             `json:"input"`
	Target     any                `json:"target"`
	Completion string             `json:"completion"`
	Scores     map[string]float64 `json:"scores"`
	Error      string             `json:"error"`
	Retries    int                `json:"retries"`
	Metadata   map[string]any     `json:"metadata"`
	Steps      []struct {
		Token   string   `json:"token"`
		Logprob float64  `json:"logprob"`
		Top     [][2]any `json:"top"`
	} `json:"steps"`
}

// Read runs read_eval.py on dir with inspect-ai's
// python, after `inspect log schema` wrote the schema it validates with.
// Neither reaches the network: no telemetry is configured and the reader
// only reads files.
func Read(t testing.TB, py, bin, dir string) []Log {
	t.Helper()
	env := append(os.Environ(), quiet...)
	schema := filepath.Join(t.TempDir(), "schema.json")
	cmd := exec.Command(bin, "log", "schema")
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("inspect log schema: %v", err)
	}
	if err := os.WriteFile(schema, out, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "read_eval.py")
	if err := os.WriteFile(script, readEval, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(py, script, dir, schema)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("inspect could not read the logs: %v\n%s", err, stderr.String())
	}
	var reads []Log
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var r Log
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("read_eval.py printed %v: %s", err, out)
		}
		reads = append(reads, r)
	}
	return reads
}
