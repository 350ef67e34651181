package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"rig/internal/metrics"
)

// The daemon and the worker take --metrics with a loopback default each;
// a value the user writes is no longer the default (a taken port then
// fails instead of moving), and an address with no host is refused before
// the worker dials anything.
func TestMetricsFlag(t *testing.T) {
	for _, c := range []struct {
		name string
		def  string
		cmd  *cobra.Command
	}{
		{"daemon", metrics.DaemonAddr, newDaemonCommand()},
		{"worker", metrics.WorkerAddr, newWorkerCommand()},
	} {
		addr, isDefault := metricsAddr(c.cmd)
		if addr != c.def || !isDefault {
			t.Errorf("%s: --metrics defaults to %q (default %v), want %q", c.name, addr, isDefault, c.def)
		}
		if lo, err := metrics.CheckAddr(addr); err != nil || !lo {
			t.Errorf("%s: the default %s is not loopback (%v)", c.name, addr, err)
		}
	}
	cmd := newWorkerCommand()
	if err := cmd.Flags().Set("metrics", "127.0.0.1:9999"); err != nil {
		t.Fatal(err)
	}
	if addr, isDefault := metricsAddr(cmd); addr != "127.0.0.1:9999" || isDefault {
		t.Errorf("a named address reads as %q, default %v", addr, isDefault)
	}
	if err := cmd.Flags().Set("metrics", ":9480"); err != nil {
		t.Fatal(err)
	}
	if m, err := workerMetrics(cmd); err == nil || m != nil || !strings.Contains(err.Error(), "every interface") {
		t.Errorf("--metrics :9480 was accepted: %v", err)
	}
	if err := cmd.Flags().Set("metrics", metrics.Off); err != nil {
		t.Fatal(err)
	}
	if m, err := workerMetrics(cmd); m != nil || err != nil {
		t.Errorf("--metrics off made a Set (%v)", err)
	}
}
