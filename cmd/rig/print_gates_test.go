package main

import (
	"strings"
	"testing"
	"time"

	"rig/api"
)

// TestPrintGates: status shows every arm's preflight verdict at its card
// with the margin, and every harness's validation run with when and its
// problems; before a gate ran it names the command that runs it.
func TestPrintGates(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		info    api.StudyInfo
		want    []string
		wantNot []string
	}{
		{name: "draft shows no gates", info: api.StudyInfo{Name: "s"}, wantNot: []string{"preflight", "validation"}},
		{name: "frozen, nothing run yet",
			info: api.StudyInfo{Name: "s", SnapshotHash: "abc", Preflight: []api.FitInfo{{Arm: "gemma", Card: "8g"}}},
			want: []string{"gemma at card 8g: not decided yet (run: rig study preflight s)", "validation\n  not run (run: rig study validate s)"}},
		{name: "both gates ran",
			info: api.StudyInfo{Name: "s", SnapshotHash: "abc",
				Preflight: []api.FitInfo{
					{Arm: "gemma", Card: "8g", Decided: true, Fits: true, MarginBytes: 3 << 29, DecidedAt: at},
					{Arm: "big", Card: "8g", Decided: true, Fits: false, MarginBytes: -(1 << 30), Reason: "weights exceed the card", DecidedAt: at}},
				Validation: []api.ValidationRecord{
					{Harness: "llama-server", Arm: "gemma", Pass: true, At: at},
					{Harness: "aider+ollama", Arm: "big", Pass: false, At: at, Problems: []string{"no generation record", "sandbox open"}}}},
			want: []string{"gemma at card 8g: fits, margin 1.50 GiB (decided 2026-03-01T12:00:00Z)",
				"big at card 8g: doesn't fit, margin -1.00 GiB: weights exceed the card",
				"llama-server (arm gemma): pass at 2026-03-01T12:00:00Z",
				"aider+ollama (arm big): FAIL at 2026-03-01T12:00:00Z: no generation record; sandbox open"},
			wantNot: []string{"not run", "not decided"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			printGates(&b, tc.info)
			for _, s := range tc.want {
				if !strings.Contains(b.String(), s) {
					t.Errorf("status lacks %q:\n%s", s, b.String())
				}
			}
			for _, s := range tc.wantNot {
				if strings.Contains(b.String(), s) {
					t.Errorf("status has %q:\n%s", s, b.String())
				}
			}
		})
	}
}
