package speed

import (
	"strings"
	"testing"
)

// Fake probe numbers: a runtime whose time per token rises with the spare
// core taken, beyond the reference's rise, is read as needing that core;
// one whose time does not rise is read as slower in its kernels.
func TestCauseReadsTheSpareCoreProbe(t *testing.T) {
	needs := Cause{Runtime: "ollama", Model: "m", Threads: 2, Cores: 2, Gap: 4,
		IdleTPOT: 19, BusyTPOT: 23.5, RefIdleTPOT: 18.5, RefBusyTPOT: 19}
	if got := needs.read(); !strings.Contains(got, "needs 4.00 ms of a spare core") || !strings.Contains(got, "100% of the gap") {
		t.Errorf("rise 4.5 ms against the reference's 0.5 on a 4 ms gap: %q", got)
	}
	kernels := needs
	kernels.BusyTPOT = 19.6
	if got := kernels.read(); !strings.Contains(got, "the rest is in the compute threads") {
		t.Errorf("rise 0.6 ms against the reference's 0.5 on a 4 ms gap: %q", got)
	}
	kernels.TPOT, kernels.RefTPOT = 12.75, 9.0
	kernels.OpenMP, kernels.RefOpenMP = "no", "yes"
	if got := kernels.read(); !strings.Contains(got, "cut ollama's time per token 1.49× and llama-server's 2.06×") || !strings.Contains(got, "built without OpenMP") {
		t.Errorf("a second thread worth 1.49× against 2.06×, no OpenMP against OpenMP: %q", got)
	}
}
