package main

import (
	"strings"
	"testing"
)

// rig bench slots refuses a slot count or runtime it cannot run, before it
// reads what setup provisioned or starts anything.
func TestBenchSlotsRefusesBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--slots", "1,0"}, "--slots 0"},
		{[]string{"--runtime", "vllm"}, "--runtime vllm"},
		{[]string{"--reps", "-1"}, "are counts"},
	} {
		_, err := runRig(t, append([]string{"bench", "slots"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("rig bench slots %s: err = %v, want one naming %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
