package metrics

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// scrapeOwn serves s on a loopback port of its own, the way a command does
// with an explicit --metrics, and scrapes it once.
func scrapeOwn(t *testing.T, s *Set) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	addr, err := s.Start(sctx, "127.0.0.1:0", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	fams, err := Scrape(ctx, "http://"+addr.String()+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// known stands in for the daemon's label values (daemon.NewMetrics fills
// them in from receipts and governor).
var known = Known{Outcomes: []string{"scored", "capped", "failed_at_card", "preempted", "error"},
	GovernorEvents: []string{"trip", "clear", "preempt", "hold", "release"}}

type sample struct {
	name   string
	labels map[string]string
	want   float64
}

func checkSamples(t *testing.T, fams map[string]*dto.MetricFamily, samples []sample) {
	t.Helper()
	for _, tc := range samples {
		got, ok := Value(fams, tc.name, tc.labels)
		if !ok || got != tc.want {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
}

func TestDaemonEventsAreScrapedWithNamesLabelsAndUnits(t *testing.T) {
	s := New(Daemon, known)
	s.TrialFinished("scored", 3.25)
	s.TrialFinished("scored", 4)
	s.TrialFinished("preempted", 1)
	s.QueueDepths(map[string]int{"local": 7})
	s.QueueDepths(map[string]int{"temporal": 3}) // local's execution ended
	s.GovernorEvent("hold")
	s.GovernorEvent("trip")
	s.Hold(true)
	s.MergeObserved("merged", 0.02)
	s.CardSample(CardSample{Index: 1, UUID: "GPU-1234", UsedBytes: 3 << 30, TotalBytes: 80 << 30, PowerWatts: 212.5, EnergyJoule: 9.5e6, HasEnergy: true})
	refreshed := 0
	s.OnScrape(func() { refreshed++; s.CardSample(CardSample{Index: 0, UUID: "GPU-0", PowerWatts: 50}) })

	fams := scrapeOwn(t, s)
	if refreshed != 1 {
		t.Errorf("OnScrape ran %d times for one scrape", refreshed)
	}
	card1 := map[string]string{"gpu": "1", "UUID": "GPU-1234"}
	checkSamples(t, fams, []sample{
		{"rig_trials_total", map[string]string{"outcome": "scored"}, 2},
		{"rig_trials_total", map[string]string{"outcome": "preempted"}, 1},
		{"rig_trials_total", map[string]string{"outcome": "capped"}, 0},
		{"rig_trial_duration_seconds", map[string]string{"outcome": "scored"}, 2},
		{"rig_trial_duration_seconds", map[string]string{"outcome": "error"}, 0},
		{"rig_queue_depth", map[string]string{"queue": "temporal"}, 3},
		// A queue whose executions ended is 0, not gone.
		{"rig_queue_depth", map[string]string{"queue": "local"}, 0},
		{"rig_governor_events_total", map[string]string{"kind": "hold"}, 1},
		{"rig_governor_events_total", map[string]string{"kind": "preempt"}, 0},
		{"rig_governor_held", nil, 1},
		{"rig_merge_duration_seconds", map[string]string{"result": "merged"}, 1},
		{"rig_merge_duration_seconds", map[string]string{"result": "divergent"}, 0},
		{"rig_card_memory_used_bytes", card1, 3 << 30},
		{"rig_card_memory_total_bytes", card1, 80 << 30},
		{"rig_card_power_watts", card1, 212.5},
		{"rig_card_energy_joules_total", card1, 9.5e6},
		{"rig_card_power_watts", map[string]string{"gpu": "0", "UUID": "GPU-0"}, 50},
	})
	for _, worker := range []string{"rig_trials_started_total", "rig_trial_attempts_total", "rig_trial_attempt_duration_seconds", "rig_trials_in_flight", "rig_worker_state"} {
		if _, ok := fams[worker]; ok {
			t.Errorf("the daemon exports %s, a worker's metric", worker)
		}
	}
	if _, ok := Value(fams, "rig_card_energy_joules_total", map[string]string{"gpu": "0"}); ok {
		t.Error("a card without an energy counter exports one")
	}
	// Types and the histogram's sum, in the unit the name says.
	if f := fams["rig_trials_total"]; f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("rig_trials_total is a %v", f.GetType())
	}
	if f := fams["rig_card_energy_joules_total"]; f.GetType() != dto.MetricType_COUNTER {
		t.Errorf("rig_card_energy_joules_total is a %v", f.GetType())
	}
	for _, m := range fams["rig_trial_duration_seconds"].GetMetric() {
		if m.GetLabel()[0].GetValue() != "scored" {
			continue
		}
		if h := m.GetHistogram(); math.Abs(h.GetSampleSum()-7.25) > 1e-9 {
			t.Errorf("rig_trial_duration_seconds{scored} sum = %v s, want 7.25 s", h.GetSampleSum())
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("the Go runtime's metrics are missing")
	}
}

func TestWorkerEventsAreScrapedWithNamesAndLabels(t *testing.T) {
	s := New(Worker, known)
	s.TaskQueues([]string{"rig.trials.llama-server.abc.cpu", "rig.trials.ollama.def.cpu"})
	s.TrialStarted("rig.trials.llama-server.abc.cpu")
	s.TrialStarted("rig.trials.llama-server.abc.cpu")
	s.AttemptFinished("scored", 12.5)
	s.TrialFinished("scored", 3) // a daemon's count: kept out of a worker's exposition
	s.WorkerState(StateHeld)
	s.GovernorEvent("preempt")
	s.MergeObserved("merged", 0.02)
	fams := scrapeOwn(t, s)
	checkSamples(t, fams, []sample{
		{"rig_trials_started_total", map[string]string{"task_queue": "rig.trials.llama-server.abc.cpu"}, 2},
		{"rig_trials_started_total", map[string]string{"task_queue": "rig.trials.ollama.def.cpu"}, 0},
		{"rig_trials_in_flight", nil, 1},
		{"rig_trial_attempts_total", map[string]string{"outcome": "scored"}, 1},
		{"rig_trial_attempts_total", map[string]string{"outcome": OutcomeRefused}, 0},
		{"rig_trial_attempts_total", map[string]string{"outcome": OutcomeFailed}, 0},
		{"rig_trial_attempts_total", map[string]string{"outcome": "preempted"}, 0},
		{"rig_trial_attempt_duration_seconds", map[string]string{"outcome": "scored"}, 1},
		{"rig_worker_state", map[string]string{"state": "held"}, 1},
		{"rig_worker_state", map[string]string{"state": "idle"}, 0},
		{"rig_worker_state", map[string]string{"state": "running"}, 0},
		{"rig_governor_events_total", map[string]string{"kind": "preempt"}, 1},
		{"rig_governor_events_total", map[string]string{"kind": "trip"}, 0},
		{"rig_governor_held", nil, 0},
	})
	for _, daemon := range []string{"rig_trials_total", "rig_trial_duration_seconds", "rig_queue_depth", "rig_merge_duration_seconds"} {
		if _, ok := fams[daemon]; ok {
			t.Errorf("a worker exports %s, the daemon's metric", daemon)
		}
	}
}

func TestNamesFollowPrometheusConventions(t *testing.T) {
	for _, role := range []Role{Daemon, Worker} {
		s := New(role, known)
		// Every family has a sample, so the linter sees them all.
		s.TaskQueues([]string{"q"})
		s.WorkerState(StateIdle)
		s.Hold(false)
		s.CardSample(CardSample{UUID: "GPU-0", HasEnergy: true})
		problems, err := testutil.GatherAndLint(s.Registry())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: promlint: %s: %s", role, p.Metric, p.Text)
		}
	}
}

func TestNilSetRecordsNothing(t *testing.T) {
	var s *Set
	s.TaskQueues([]string{"q"})
	s.TrialStarted("q")
	s.TrialFinished("scored", 1)
	s.AttemptFinished("scored", 1)
	s.GovernorEvent("hold")
	s.Hold(true)
	s.WorkerState(StateIdle)
	s.QueueDepths(nil)
	s.MergeObserved("merged", 1)
	s.CardSample(CardSample{})
	s.OnScrape(func() { t.Error("ran") })
}

func TestAddresses(t *testing.T) {
	tests := []struct {
		addr     string
		loopback bool
		bad      string // a word of the refusal; empty when accepted
	}{
		{"127.0.0.1:9479", true, ""},
		{"[::1]:9479", true, ""},
		{"localhost:9479", true, ""},
		{"10.0.0.5:9479", false, ""},
		{"0.0.0.0:9479", false, ""},
		{":9479", false, "every interface"},
		{"metrics.example:9479", false, "not an IP"},
		{"127.0.0.1", false, "HOST:PORT"},
		{"127.0.0.1:http-alt-x", false, "port"},
	}
	for _, tc := range tests {
		lo, err := CheckAddr(tc.addr)
		var ae *AddrError
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s refused: %v", tc.addr, err)
		case tc.bad != "" && (!errors.As(err, &ae) || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("%s: err %v, want a refusal saying %q", tc.addr, err, tc.bad)
		case tc.bad == "" && lo != tc.loopback:
			t.Errorf("%s: loopback %v, want %v", tc.addr, lo, tc.loopback)
		}
	}
	// A default is never anything but loopback; only the flag names others.
	// (Checked without binding: tests never listen off loopback.)
	if _, err := Listen("10.0.0.5:9479", true); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a non-loopback default was accepted: %v", err)
	}
	if _, err := Scrape(context.Background(), "http://10.0.0.5:9479/metrics"); err == nil {
		t.Error("Scrape read a non-loopback address")
	}
}

func TestTakenPort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	// The user's own port, taken: an error naming it.
	if _, err := Listen(addr, false); err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "--metrics") {
		t.Errorf("a taken explicit port: %v", err)
	}
	// The default, taken: another loopback port, served.
	ln, err := Listen(addr, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ln.Addr().(*net.TCPAddr); got.String() == addr || !got.IP.IsLoopback() {
		t.Errorf("the fallback listens on %s", got)
	}
}

func TestOnlyMetricsIsServed(t *testing.T) {
	s := New(Daemon, Known{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := s.Start(ctx, "127.0.0.1:0", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Scrape(context.Background(), "http://"+addr.String()+"/debug/pprof/"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("another path answered: %v", err)
	}
	if a, err := s.Start(ctx, Off, false, nil); a != nil || err != nil {
		t.Errorf("off served at %v (%v)", a, err)
	}
}
