package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/runtimes"
)

// synth-model needs no card: it refuses a shape it does not know and a
// missing --out, naming the choices and an example, and writes a tiny GGUF
// whose printed sha256 is the file's.
func TestRuntimesSynthModel(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shape", "7b", "--out", "x.gguf"}, `--shape "7b": use one of tiny, 135m, 1b, 3b`},
		{[]string{"--shape", "1b"}, "--out: give the file to write, e.g. --out /tmp/synth-1b.gguf"},
	} {
		if _, err := runRig(t, append([]string{"runtimes", "synth-model"}, c.args...)...); err == nil || err.Error() != c.want {
			t.Errorf("synth-model %s = %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	out := filepath.Join(t.TempDir(), "tiny.gguf")
	printed, err := runRig(t, "runtimes", "synth-model", "--shape", "tiny", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := runtimes.FileSHA256(out)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := os.ReadFile(out)
	if !bytes.HasPrefix(head, []byte("GGUF")) {
		t.Errorf("%s is not a GGUF", out)
	}
	if !strings.HasPrefix(printed, "wrote "+out+": shape tiny, ") || !strings.Contains(printed, "sha256 "+sum+", in ") || !strings.Contains(printed, "(random weights: output is noise)") {
		t.Errorf("synth-model printed %q; want the file, shape and sha256 %s", printed, sum)
	}
}

// The backend comparison counts the steps that chose the same token, up to
// the first that did not, and the largest log-probability gap over them.
func TestPrintBackendDiff(t *testing.T) {
	step := func(id int, lp float64) runtimes.Step {
		return runtimes.Step{Candidate: runtimes.Candidate{ID: id, Logprob: lp}}
	}
	cpu := runtimes.Result{Steps: []runtimes.Step{step(1, -0.10), step(2, -0.50), step(3, -1.0), step(4, -0.2)}}
	cuda := runtimes.Result{Steps: []runtimes.Step{step(1, -0.12), step(2, -0.45), step(9, -0.9)}}
	var b bytes.Buffer
	printBackendDiff(&b, "synth-1b", cpu, cuda)
	want := "== cpu vs cuda × synth-1b: 2 of 4 steps chose the same token; largest |Δ logprob| over them 0.05 nats\n"
	if b.String() != want {
		t.Errorf("printBackendDiff:\n%q\nwant\n%q", b.String(), want)
	}
}
