package governor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// suiteEnv is one governor wired to injectable sensors, a ledger and an
// event log, as the daemon would wire it to real ones and the study store.
type suiteEnv struct {
	g      *Governor
	cancel context.CancelFunc
	done   chan struct{}
	gpu    *Simulated
	host   *Simulated
	cgDir  string
	prog   *Progress
	events *eventLog
	ledger *ledger
	dir    string
}

// eventLog is the suite's EventSink: it keeps every event for the checks.
type eventLog struct {
	mu  sync.Mutex
	evs []Event
}

func (l *eventLog) Emit(_ context.Context, e Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, e)
	return nil
}

func (l *eventLog) find(kind EventKind, trialID string) (Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.evs {
		if e.Kind == kind && (trialID == "" || e.TrialID == trialID) {
			return e, true
		}
	}
	return Event{}, false
}

// SimulatedGPU is a simulated card sensor reading as a healthy 24 GiB card
// (its energy counter included): what a worker's fault injection and the
// energy path's tests put where NVML would be.
func SimulatedGPU() *Simulated { return NewSimulated("gpu", normalGPU()) }

// Normal readings of a healthy 24 GiB card and host, used as the baseline
// the simulated classes depart from.
func normalGPU() map[string]float64 {
	return map[string]float64{
		KeyTempC: 62, KeyTempSlowdownC: 87, KeyTempShutdownC: 92,
		KeyPowerW: 180, KeyPowerLimitW: 300, KeyEnergyJ: 1e6,
		KeyCardMemBytes: 3 << 30, KeyCardTotalBytes: 24 << 30,
		KeyClockEvents: 0, KeyThermalThrottle: 0, KeyXIDEvents: 0, KeyXIDLast: 0, KeyDBEEvents: 0,
	}
}

func normalHost() map[string]float64 {
	return map[string]float64{KeyMemUsedFrac: 0.4, KeyMemAvailBytes: 8 << 30, KeyCPUPercent: 30, KeyLoad1: 1,
		KeyDiskFreeBytes: 50 << 30, KeyDiskFreeFrac: 0.5}
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
		if err := writeFileAtomic(filepath.Join(dir, n), []byte(v+"\n")); err != nil {
			return err
		}
	}
	return nil
}

func newSuiteEnv(ctx context.Context, dir string, cfg Config, extra ...Sensor) (*suiteEnv, error) {
	e := &suiteEnv{
		gpu: NewSimulated("gpu", normalGPU()), host: NewSimulated("host", normalHost()),
		cgDir: filepath.Join(dir, "cgroup"), prog: NewProgress(), events: &eventLog{}, dir: dir,
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
	sensors := append([]Sensor{e.gpu, e.host, NewCgroup("cgroup", e.cgDir), e.prog}, extra...)
	g, err := New(Options{Config: cfg, Sensors: sensors, Sink: e.events})
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

func (s *standIn) target(id string) ProcessTarget {
	return ProcessTarget{TrialID: id, Pid: s.cmd.Process.Pid, Done: s.done}
}
