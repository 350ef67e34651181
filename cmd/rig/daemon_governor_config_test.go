package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/governor"
)

// A studio's governor.json under RIG_HOME is read when the daemon starts; an
// impossible threshold or an unknown policy stops the daemon at once with
// the file, the field and the fix, before it serves or resumes anything.
func TestDaemonRefusesBadGovernorConfig(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string
	}{
		{"negative threshold", `{"policies":{"host-memory":{"limit":-0.5}}}`, []string{"policies.host-memory.limit", "-0.5", "finite number ≥ 0"}},
		{"temperature above shutdown", `{"policies":{"over-temperature":{"limit":95,"shutdown":90}}}`, []string{"policies.over-temperature.limit", "shutdown threshold 90", "set limit below shutdown"}},
		{"unknown policy", `{"policies":{"overheat":{"limit":80}}}`, []string{"policies.overheat", `unknown policy "overheat"`, "known policies:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			t.Setenv("RIG_DAEMON_LOCK", filepath.Join(home, "daemon.lock"))
			cfg := filepath.Join(home, "governor.json")
			if err := os.WriteFile(cfg, []byte(tt.json), 0o600); err != nil {
				t.Fatal(err)
			}
			// A daemon that wrongly accepted the file would serve until the
			// deadline; the error must come long before it.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			root := newRootCommand()
			root.SetArgs([]string{"daemon", "--home", home})
			root.SetOut(&strings.Builder{})
			root.SetErr(&strings.Builder{})
			err := root.ExecuteContext(ctx)
			if ctx.Err() != nil {
				t.Fatalf("the daemon started with %s", tt.json)
			}
			var ce *governor.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *governor.ConfigError", err)
			}
			for _, w := range append([]string{cfg}, tt.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := os.Stat(filepath.Join(home, "rig.sock")); err == nil {
				t.Error("the daemon opened its socket before refusing its config")
			}
		})
	}
}
