package main

import (
	"strings"
	"testing"
)

// card-check refuses a budget it cannot read, a zero budget and a missing
// model before it starts anything, each naming the flag and an example.
func TestGovernorCardCheckRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "m.gguf", "--budget", "lots"}, `--budget "lots": give card memory, e.g. 256MiB`},
		{[]string{"--model", "m.gguf", "--budget", "0"}, `--budget "0": give card memory, e.g. 256MiB`},
		{[]string{"--budget", "256MiB"}, "--model: give a GGUF (rig runtimes synth-model writes one)"},
	} {
		_, err := runRig(t, append([]string{"governor", "card-check"}, c.args...)...)
		if err == nil || err.Error() != c.want {
			t.Errorf("card-check %s = %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
