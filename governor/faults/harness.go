package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"rig/governor"
	"rig/internal/atomicfile"
)

// suiteEnv is one governor wired to injectable sensors, a ledger and an
// event log, as the daemon would wire it to real ones and the study store.
type suiteEnv struct {
	g      *governor.Governor
	cancel context.CancelFunc
	done   chan struct{}
	gpu    *governor.Simulated
	host   *governor.Simulated
	cgDir  string
	prog   *governor.Progress
	events *eventLog
	ledger *ledger
	dir    string
}

// eventLog is the suite's EventSink: it keeps every event for the checks.
type eventLog struct {
	mu  sync.Mutex
	evs []governor.Event
}

func (l *eventLog) Emit(_ context.Context, e governor.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
	return nil
}

func (l *eventLog) find(kind governor.EventKind, trialID string) (governor.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evs {
		if e.Kind == kind && (trialID == "" || e.TrialID == trialID) {
			return e, true
		}
	}
	return governor.Event{}, false
}

// writeCgroupV1 writes the v1 memory files the Cgroup sensor reads, so the
// OOM class drives the real sensor code over a file tree it controls.
func writeCgroupV1(dir string, usage, peak uint64, oomKill int) error {
	files := map[string]string{
		"memory.usage_in_bytes":     fmt.Sprint(usage),
		"memory.max_usage_in_bytes": fmt.Sprint(peak),
		"memory.oom_control":        fmt.Sprintf("oom_kill_disable 0\nunder_oom 0\noom_kill %d\n", oomKill),
	}
	for n, v := range files {
		if err := atomicfile.WriteBytes(filepath.Join(dir, n), []byte(v+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func newSuiteEnv(ctx context.Context, dir string, cfg governor.Config, extra ...governor.Sensor) (*suiteEnv, error) {
	e := &suiteEnv{
		gpu: governor.SimulatedGPU(), host: governor.SimulatedHost(),
		cgDir: filepath.Join(dir, "cgroup"), prog: governor.NewProgress(), events: &eventLog{}, dir: dir,
	}
	if err := os.MkdirAll(e.cgDir, 0o755); err != nil {
		return nil, err
	}
	if err := writeCgroupV1(e.cgDir, 1<<30, 1<<30, 0); err != nil {
		return nil, err
	}
	l, err := openLedger(filepath.Join(dir, "ledger"))
	if err != nil {
		return nil, err
	}
	e.ledger = l
	sensors := append([]governor.Sensor{e.gpu, e.host, governor.NewCgroup("cgroup", e.cgDir), e.prog}, extra...)
	g, err := governor.New(governor.Options{Config: cfg, Sensors: sensors, Sink: e.events})
	if err != nil {
		return nil, err
	}
	e.g = g
	rctx, cancel := context.WithCancel(ctx)
	e.cancel, e.done = cancel, make(chan struct{})
	go func() {
		defer close(e.done)
		_ = g.Run(rctx)
	}()
	return e, nil
}

func (e *suiteEnv) close() {
	e.cancel()
	<-e.done
}

// waitGate waits until the gate opens or d passes.
func (e *suiteEnv) waitGate(ctx context.Context, d time.Duration) (bool, string) {
	deadline := time.Now().Add(d)
	for {
		ok, why := e.g.MayStart()
		if ok || time.Now().After(deadline) || ctx.Err() != nil {
			return ok, why
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// standIn is a real process standing in for a runtime in the classes whose
// fault is in a sensor, so preemption still stops a real process group.
type standIn struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startStandIn() (*standIn, error) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start stand-in runtime: %w", err)
	}
	s := &standIn{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

func (s *standIn) target(id string) governor.ProcessTarget {
	return governor.ProcessTarget{TrialID: id, Pid: s.cmd.Process.Pid, Done: s.done}
}
