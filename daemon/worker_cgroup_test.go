package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/cgroup"
	"rig/internal/provision"
)

// A worker killed while a runtime ran in a simulated card leaves that
// card's cgroup behind. On a machine that runs only workers no coordinator
// ever starts there to remove it: the next worker must, before anything
// else (here it then fails to reach its engine, which is no matter).
func TestWorkerStartRemovesAKilledWorkersCardGroups(t *testing.T) {
	live, err := cgroup.Reserve(context.Background(), 64<<20)
	if errors.Is(err, cgroup.ErrNoCgroup) {
		t.Skipf("no writable memory cgroup here (needs root and the memory controller): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Close() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	// The name a killed worker's reservation had: rig-<its pid>-<n>.
	stale := filepath.Join(filepath.Dir(live.Dir()), fmt.Sprintf("rig-%d-1", dead.Process.Pid))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(stale) })

	t.Setenv("RIG_STATE_DIR", t.TempDir())
	home := t.TempDir()
	err = RunWorker(context.Background(), WorkerOptions{
		Engine: EngineConfig{Address: "127.0.0.1:1", Spool: t.TempDir()}, ID: "w-cgroup", Home: home,
		InstalledEnv: provision.Path(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("a worker with no engine at 127.0.0.1:1: %v", err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed worker's card group %s survives a worker's start (stat: %v)", stale, err)
	}
	if _, err := os.Stat(live.Dir()); err != nil {
		t.Errorf("this process's live reservation %s was removed: %v", live.Dir(), err)
	}
}
