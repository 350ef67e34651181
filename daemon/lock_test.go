package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSecondDaemonIsRefused: while one daemon holds the machine-wide lock, a
// second one (any RIG_HOME) is refused with the lock file and the holder's
// pid and home, and starts once the first lets go.
func TestSecondDaemonIsRefused(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "daemon.lock")
	release, err := Lock(lock, "/srv/rig-a", "/srv/rig-a/rig.sock")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{lock, fmt.Sprintf("pid %d", os.Getpid()), "RIG_HOME /srv/rig-a", "one daemon per machine"}
	tests := []struct {
		name  string
		start func() error
	}{
		{"lock taken directly", func() error {
			r, err := Lock(lock, "/srv/rig-b", "/srv/rig-b/rig.sock")
			if err == nil {
				r()
			}
			return err
		}},
		{"a daemon on another home", func() error {
			t.Setenv(daemonLockEnv, lock)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			home := t.TempDir()
			err := Run(ctx, Options{Home: home, Socket: filepath.Join(home, "rig.sock")})
			if _, serr := os.Stat(filepath.Join(home, "rig.sock")); serr == nil {
				t.Error("the refused daemon opened a socket")
			}
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.start()
			if err == nil {
				t.Fatal("a second daemon started while the lock was held")
			}
			for _, s := range want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
		})
	}
	release()
	r, err := Lock(lock, "/srv/rig-b", "/srv/rig-b/rig.sock")
	if err != nil {
		t.Fatalf("the lock was not free after release: %v", err)
	}
	r()
}
