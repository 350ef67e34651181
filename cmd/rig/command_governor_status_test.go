package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/governor"
)

// writePassRecord stores a record the way the fault suite names its files
// (governor-faults-<UTC time>.json), since only a full real run can pass.
func writePassRecord(t *testing.T, dir string, r governor.Record) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	name := "governor-faults-" + r.At.UTC().Format("20060102T150405.000Z") + ".json"
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestGovernorStatus(t *testing.T) {
	rec := func(age time.Duration, pass bool) governor.Record {
		return governor.Record{At: time.Now().Add(-age), Pass: pass, Host: "testhost", NVML: "simulated: no card", Runtime: "llama-server",
			Classes: []governor.ClassResult{{Class: "over-temperature", Expected: "preempt", Observed: []string{"preempt"}, Reps: 5, P50MS: 120, P99MS: 300, Pass: pass}}}
	}
	tests := []struct {
		name    string
		records []governor.Record
		wantIs  error
		wantOut string
	}{
		{name: "no record", wantIs: governor.ErrStale},
		{name: "only a failed run", records: []governor.Record{rec(time.Hour, false)}, wantIs: governor.ErrStale},
		{name: "fresh pass", records: []governor.Record{rec(time.Hour, true)}, wantOut: "over-temperature"},
		{name: "stale pass", records: []governor.Record{rec(48*time.Hour, true)}, wantIs: governor.ErrStale, wantOut: "testhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, r := range tt.records {
				writePassRecord(t, dir, r)
			}
			out, err := runRig(t, "governor", "status", "--state-dir", dir)
			if tt.wantIs != nil {
				if !errors.Is(err, tt.wantIs) {
					t.Errorf("err = %v, want errors.Is %v", err, tt.wantIs)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tt.wantOut) {
				t.Errorf("output lacks %q:\n%s", tt.wantOut, out)
			}
		})
	}
}
