package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"rig/governor"
	"rig/internal/metrics"
	"rig/receipts"
	"rig/run"
)

// logBuffer is a log a test reads while the daemon writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// addrRE finds the address the daemon logs that it serves metrics on.
var addrRE = regexp.MustCompile(`msg=metrics addr=(http://127\.0\.0\.1:\d+/metrics)`)

// TestDaemonServesMetrics starts a real daemon the way `rig daemon` does
// (its --metrics default, which gives way to a free loopback port when
// 9479 is taken), with a governor.json whose host-memory limit every
// machine is over, and scrapes its endpoint on loopback: the governor's
// real trip and hold reach the metrics through the daemon's sink.
func TestDaemonServesMetrics(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("HOME", tmp) // the governor's state folder is under HOME
	t.Setenv(daemonLockEnv, filepath.Join(tmp, "daemon.lock"))
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	gov := `{"policies":{"host-memory":{"limit":0.01,"band":0.001}}}`
	if err := os.WriteFile(filepath.Join(home, "governor.json"), []byte(gov), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Home: home, Socket: filepath.Join(tmp, "rig.sock"), Log: slog.New(slog.NewTextHandler(logs, nil)),
			Metrics: metrics.DaemonAddr, MetricsDefault: true})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("daemon: %v", err)
		}
	}()
	var url string
	var held, holds float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no hold scraped within 30 s (url %q, held %v, holds %v); log:\n%s", url, held, holds, logs.String())
		}
		if url == "" {
			if m := addrRE.FindStringSubmatch(logs.String()); m != nil {
				url = m[1]
			}
			continue
		}
		fams, err := metrics.Scrape(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		held, _ = metrics.Value(fams, "rig_governor_held", nil)
		holds, _ = metrics.Value(fams, "rig_governor_events_total", map[string]string{"kind": string(governor.EventHold)})
		trips, _ := metrics.Value(fams, "rig_governor_events_total", map[string]string{"kind": string(governor.EventTrip)})
		if held == 1 && holds >= 1 && trips >= 1 {
			// A worker's metric: the daemon holds no trial attempt, and
			// does not export a gauge standing at 0 for ever.
			if _, ok := fams["rig_trials_in_flight"]; ok {
				t.Error("the daemon exports rig_trials_in_flight, a worker's metric")
			}
			return
		}
	}
}

// fakeExec is an execution handle with fixed progress (a fake: the
// arithmetic of the queue depth is what is tested).
type fakeExec struct{ info run.ExecInfo }

func (f fakeExec) Info() run.ExecInfo  { return f.info }
func (fakeExec) Cancel()               {}
func (fakeExec) Done() <-chan struct{} { return nil }

func TestQueueDepthAndReceiptsAreRecorded(t *testing.T) {
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &logBuffer{}
	if err := svc.startMetrics(ctx, Options{Metrics: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(logs, nil))); err != nil {
		t.Fatal(err)
	}
	url := addrRE.FindStringSubmatch(logs.String())
	if url == nil {
		t.Fatalf("no metrics address logged:\n%s", logs)
	}
	running := string(receipts.Running)
	svc.Executions().track("a", fakeExec{run.ExecInfo{Status: running, Planned: 10, Done: 4}})
	svc.Executions().track("b", fakeExec{run.ExecInfo{Status: running, Planned: 6, Done: 1, Engine: "temporal"}})
	svc.Executions().track("c", fakeExec{run.ExecInfo{Status: string(receipts.Done), Planned: 6, Done: 6}})
	svc.receiptStored(receipts.Receipt{Outcome: receipts.Capped, WallMS: 1500})
	_ = storeSink{svc, slog.Default()}.Emit(ctx, governor.Event{Kind: governor.EventRelease})

	fams, err := metrics.Scrape(ctx, url[1])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"rig_queue_depth", map[string]string{"queue": "local"}, 6},
		{"rig_queue_depth", map[string]string{"queue": "temporal"}, 5},
		{"rig_trials_total", map[string]string{"outcome": "capped"}, 1},
		{"rig_trial_duration_seconds", map[string]string{"outcome": "capped"}, 1},
		{"rig_governor_events_total", map[string]string{"kind": "release"}, 1},
		{"rig_governor_held", nil, 0},
	} {
		if got, ok := metrics.Value(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}

// TestCardMetricsOnARealCard samples the first NVIDIA card the way the
// daemon and each worker do, and reads it back from the endpoint: memory
// in bytes, power in watts and energy in joules, labelled gpu and UUID as
// DCGM's exporter labels the card. Skipped where NVML finds no card.
func TestCardMetricsOnARealCard(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nv, err := governor.OpenNVML(ctx, 0)
	if err != nil {
		t.Skipf("no NVIDIA card here: %v", err)
	}
	nv.Close()
	m := NewMetrics(metrics.Worker) // the card is read the same on the daemon
	WatchCard(ctx, m, 0, slog.Default())
	addr, err := m.Start(ctx, "127.0.0.1:0", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() (used, total, watts, joules float64, uuid string) {
		fams, err := metrics.Scrape(ctx, "http://"+addr.String()+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		f := fams["rig_card_memory_total_bytes"]
		if f == nil || len(f.GetMetric()) != 1 {
			t.Fatalf("rig_card_memory_total_bytes: %v", f)
		}
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() == "UUID" {
				uuid = l.GetValue()
			}
		}
		card := map[string]string{"gpu": "0", "UUID": uuid}
		used, _ = metrics.Value(fams, "rig_card_memory_used_bytes", card)
		total, _ = metrics.Value(fams, "rig_card_memory_total_bytes", card)
		watts, _ = metrics.Value(fams, "rig_card_power_watts", card)
		joules, _ = metrics.Value(fams, "rig_card_energy_joules_total", card)
		return
	}
	used, total, watts, j1, uuid := scrape()
	time.Sleep(2 * time.Second)
	_, _, _, j2, _ := scrape()
	t.Logf("card 0 %s: used %.0f of %.0f bytes, %.1f W, energy %.1f J then %.1f J", uuid, used, total, watts, j1, j2)
	if len(uuid) < 5 || uuid[:4] != "GPU-" {
		t.Errorf("UUID label %q is not NVML's GPU-… (DCGM's UUID label)", uuid)
	}
	// Bytes, not MiB: any card today has more than 1 GiB.
	if total < 1<<30 || used <= 0 || used > total {
		t.Errorf("memory used %.0f of total %.0f bytes", used, total)
	}
	// Watts, not milliwatts: an idle card draws a few tens of watts.
	if watts <= 0 || watts > 2000 {
		t.Errorf("power %.3f W", watts)
	}
	// Joules, not millijoules: two seconds at the power read is about 2×W.
	if j1 <= 0 || j2 <= j1 || j2-j1 > 10*2000 {
		t.Errorf("energy %.1f J then %.1f J over 2 s at %.1f W", j1, j2, watts)
	}
}
