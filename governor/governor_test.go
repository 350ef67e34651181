package governor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTrial records Stop calls; stopErr makes Stop fail.
type fakeTrial struct {
	id      string
	stops   atomic.Int32
	stopErr error
	block   chan struct{}
}

func (f *fakeTrial) ID() string { return f.id }
func (f *fakeTrial) Stop(ctx context.Context, _ time.Duration) error {
	f.stops.Add(1)
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
		}
	}
	return f.stopErr
}

func allSimulated() []Sensor {
	return []Sensor{
		NewSimulated("gpu", normalGPU()), NewSimulated("host", normalHost()),
		NewSimulated("cgroup", map[string]float64{KeyCgOOMKill: 0}), NewProgress(),
	}
}

func runGov(t *testing.T, sensors []Sensor) (*Governor, *eventLog) {
	t.Helper()
	ev := &eventLog{}
	g, err := New(Options{Config: SuiteConfig(), Sensors: sensors, Sink: ev})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return g, ev
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGateClosedUntilFirstEvaluation(t *testing.T) {
	g, err := New(Options{Config: SuiteConfig(), Sensors: allSimulated(), Sink: &eventLog{}})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := g.MayStart(); ok || why == "" {
		t.Fatalf("gate open before Run: %v %q", ok, why)
	}
	if _, err := g.Begin(&fakeTrial{id: "a"}, Budget{}); !errors.Is(err, ErrHeld) {
		t.Fatalf("Begin before Run: %v", err)
	}
}

func TestSensorLossFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		sensors func() []Sensor
		breakIt func(ss []Sensor)
	}{
		{"missing gpu sensor", func() []Sensor { return allSimulated()[1:] }, nil},
		{"erroring sensor", allSimulated, func(ss []Sensor) { ss[0].(*Simulated).Fail(errors.New("lost")) }},
		{"stale sensor", allSimulated, func(ss []Sensor) { ss[1].(*Simulated).Freeze() }},
		{"hung sensor read", allSimulated, func(ss []Sensor) { ss[2].(*Simulated).Block() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := tt.sensors()
			if tt.breakIt != nil {
				tt.breakIt(ss)
			}
			g, ev := runGov(t, ss)
			waitFor(t, "sensor-loss trip", func() bool { _, ok := ev.find(EventTrip, ""); return ok })
			e, _ := ev.find(EventTrip, "")
			if e.Policy != PolicySensorLoss {
				t.Fatalf("tripped %s (%s), want sensor-loss", e.Policy, e.Reason)
			}
			if ok, _ := g.MayStart(); ok {
				t.Fatal("gate open with a lost sensor")
			}
			for _, s := range ss {
				if sim, ok := s.(*Simulated); ok {
					sim.Heal()
				}
			}
		})
	}
}

func TestPreemptHoldRelease(t *testing.T) {
	ss := allSimulated()
	gpu := ss[0].(*Simulated)
	g, ev := runGov(t, ss)
	waitFor(t, "gate open", func() bool { ok, _ := g.MayStart(); return ok })
	tr := &fakeTrial{id: "t1"}
	w, err := g.Begin(tr, Budget{CardMemBytes: 4 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Begin(&fakeTrial{id: "t1"}, Budget{}); err == nil {
		t.Fatal("same trial begun twice")
	}
	gpu.Set(KeyTempC, 95)
	select {
	case <-w.Preempted():
	case <-time.After(3 * time.Second):
		t.Fatal("not preempted")
	}
	<-w.Stopped()
	c := w.Cause()
	if c.Policy != PolicyOverTemperature || len(c.Readings) == 0 || tr.stops.Load() != 1 {
		t.Fatalf("cause %+v, stops %d", c, tr.stops.Load())
	}
	if p := w.End(); p == nil {
		t.Fatal("End after preemption returned nil: the result would be scored")
	}
	if ok, _ := g.MayStart(); ok {
		t.Fatal("gate open while over temperature")
	}
	if _, err := g.Begin(&fakeTrial{id: "t2"}, Budget{}); !errors.Is(err, ErrHeld) {
		t.Fatalf("Begin while held: %v", err)
	}
	gpu.Set(KeyTempC, 81) // inside the band: stays held
	time.Sleep(3 * g.Config().Poll)
	if ok, _ := g.MayStart(); ok {
		t.Fatal("gate reopened inside the hysteresis band")
	}
	gpu.Set(KeyTempC, 70)
	waitFor(t, "release", func() bool { ok, _ := g.MayStart(); return ok })
	for _, k := range []EventKind{EventTrip, EventHold, EventPreempt, EventStopped, EventClear, EventRelease} {
		if _, ok := ev.find(k, ""); !ok {
			t.Errorf("no %s event", k)
		}
	}
	// A trial that ends on its own is not preempted.
	w2, err := g.Begin(&fakeTrial{id: "t3"}, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * g.Config().Poll)
	if p := w2.End(); p != nil {
		t.Fatalf("healthy trial preempted: %+v", p)
	}
}

func TestStopFailureKeepsGateClosed(t *testing.T) {
	ss := allSimulated()
	g, ev := runGov(t, ss)
	waitFor(t, "gate open", func() bool { ok, _ := g.MayStart(); return ok })
	tr := &fakeTrial{id: "stuck", stopErr: errors.New("EPERM")}
	w, err := g.Begin(tr, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Preempt(context.Background(), "stuck", ReasonRecordWrite, "test"); err != nil {
		t.Fatal(err)
	}
	<-w.Stopped()
	if w.Cause().StopErr == "" {
		t.Fatal("stop error not on the preemption")
	}
	if _, ok := ev.find(EventStopFailed, "stuck"); !ok {
		t.Fatal("no stop-failed event")
	}
	time.Sleep(3 * g.Config().Poll)
	if ok, why := g.MayStart(); ok {
		t.Fatal("gate open beside a runtime that could not be stopped")
	} else if why == "" {
		t.Fatal("no reason given")
	}
}

func TestWatchdogStallPreempts(t *testing.T) {
	g, ev := runGov(t, allSimulated())
	waitFor(t, "gate open", func() bool { ok, _ := g.MayStart(); return ok })
	tr := &fakeTrial{id: "w1"}
	w, err := g.Begin(tr, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	g.Stall(time.Second)
	select {
	case <-w.Preempted():
	case <-time.After(3 * time.Second):
		t.Fatal("stalled loop did not lead to preemption")
	}
	if c := w.Cause(); c.Policy != ReasonHeartbeatStale {
		t.Fatalf("cause %s", c.Policy)
	}
	if ok, why := g.MayStart(); ok {
		t.Fatal("gate open with a stale heartbeat")
	} else if why == "" {
		t.Fatal("no reason")
	}
	waitFor(t, "heartbeat fresh again", func() bool { _, ok := ev.find(EventFresh, ""); return ok })
	waitFor(t, "gate open after the stall", func() bool { ok, _ := g.MayStart(); return ok })
}

func TestNewRejectsDuplicateSensors(t *testing.T) {
	ss := append(allSimulated(), NewSimulated("gpu", nil))
	if _, err := New(Options{Sensors: ss}); err == nil {
		t.Fatal("two gpu sensors accepted")
	}
}
