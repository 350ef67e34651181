package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A daemon given half a scale-out config (a cluster and no spool, or a
// spool and no cluster) refuses to start, naming what is missing and its
// flag, before it takes the lock or serves anything.
func TestDaemonRefusesHalfAnEngineConfig(t *testing.T) {
	t.Setenv("RIG_TEMPORAL", "")
	t.Setenv("RIG_SPOOL", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--temporal", "127.0.0.1:7233"}, "scale-out config: missing spool (the folder the workers and the coordinator share; --spool)"},
		{[]string{"--spool", "/srv/rig-spool"}, "scale-out config: missing address (the Temporal frontend, host:port; --temporal)"},
	} {
		home := t.TempDir()
		t.Setenv("RIG_DAEMON_LOCK", filepath.Join(home, "daemon.lock"))
		// A daemon that wrongly started would serve until the deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		root := newRootCommand()
		root.SetArgs(append([]string{"daemon", "--home", home, "--policy", ""}, c.args...))
		root.SetOut(&strings.Builder{})
		root.SetErr(&strings.Builder{})
		err := root.ExecuteContext(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the daemon started with %v", c.args)
		}
		cancel()
		if err == nil || err.Error() != c.want {
			t.Errorf("daemon %s = %v; want %q", strings.Join(c.args, " "), err, c.want)
		}
		if _, err := os.Stat(filepath.Join(home, "rig.sock")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the refused daemon left a socket (%v)", err)
		}
	}
}
