package governor

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func startGroup(t *testing.T, script string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-done })
	return cmd, done
}

func TestProcessTargetStop(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		prep     func(pid int)
		grace    time.Duration
		wantKill bool // SIGKILL needed: took at least the grace
		withDone bool
	}{
		{"exits on SIGTERM", "sleep 60", nil, 3 * time.Second, false, true},
		{"ignores SIGTERM, killed after grace", "trap '' TERM; sleep 60 & wait; sleep 60", nil, 300 * time.Millisecond, true, true},
		{"stopped with SIGSTOP still ends gracefully", "sleep 60", func(pid int) { _ = syscall.Kill(-pid, syscall.SIGSTOP) }, 3 * time.Second, false, true},
		{"detects exit from /proc without Done", "sleep 60", nil, 3 * time.Second, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, done := startGroup(t, tt.script)
			time.Sleep(50 * time.Millisecond) // let sh install its trap
			if tt.prep != nil {
				tt.prep(cmd.Process.Pid)
			}
			target := ProcessTarget{TrialID: "t1", Pid: cmd.Process.Pid}
			if tt.withDone {
				target.Done = done
			}
			start := time.Now()
			if err := target.Stop(context.Background(), tt.grace); err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			if tt.wantKill != (took >= tt.grace) {
				t.Errorf("stop took %v with grace %v; want SIGKILL %v", took, tt.grace, tt.wantKill)
			}
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				t.Fatal("process still running after Stop")
			}
			// The whole group is gone, not just the leader.
			if groupLive(cmd.Process.Pid) {
				t.Error("process group still has members")
			}
		})
	}
}

func TestProcessTargetNoPid(t *testing.T) {
	if err := (ProcessTarget{TrialID: "x"}).Stop(context.Background(), time.Second); err == nil {
		t.Fatal("Stop without a pid succeeded")
	}
}
