package main

import (
	"testing"
)

// A backend smoke does not know is refused naming the choices, also with
// --model and on a machine where setup never ran (an empty cache here).
func TestRuntimesSmokeRefusesAnUnknownBackend(t *testing.T) {
	t.Setenv("RIG_CACHE", t.TempDir())
	for _, args := range [][]string{{"--backend", "rocm"}, {"--backend", "gpu", "--model", "m.gguf"}} {
		_, err := runRig(t, append([]string{"runtimes", "smoke"}, args...)...)
		if want := `--backend "` + args[1] + `": use cpu or cuda`; err == nil || err.Error() != want {
			t.Errorf("smoke %v = %v; want %q", args, err, want)
		}
	}
}
