package run

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"rig/runtimes"
)

// fakeRuntime is a runtime that runs nothing: the pool's logic (park, reuse
// by key, expiry, drain) is what these tests exercise, not a server.
type fakeRuntime struct {
	stopped atomic.Bool
	cfg     runtimes.Config
}

func (f *fakeRuntime) Name() string { return "fake" }
func (f *fakeRuntime) Generate(context.Context, runtimes.Request) (runtimes.Result, error) {
	return runtimes.Result{}, nil
}
func (f *fakeRuntime) Pins() runtimes.Pins            { return runtimes.Pins{} }
func (f *fakeRuntime) Endpoint() string               { return "" }
func (f *fakeRuntime) Sandbox() *runtimes.Sandbox     { return nil }
func (f *fakeRuntime) Stop(ctx context.Context) error { f.stopped.Store(true); return nil }

// fakeLaunch counts the runtimes it starts.
func fakeLaunch(n *int, made *[]*fakeRuntime) func(context.Context, runtimes.Build, runtimes.Config) (runtimes.Runtime, error) {
	return func(_ context.Context, _ runtimes.Build, cfg runtimes.Config) (runtimes.Runtime, error) {
		*n++
		f := &fakeRuntime{cfg: cfg}
		*made = append(*made, f)
		return f, nil
	}
}

// A runtime stopped by a try is parked and given back to the next try that
// asks for the same start; another context starts a new one; a stop cap is
// not part of a start, so it cannot change the key.
func TestTryPoolReusesByPins(t *testing.T) {
	ctx := context.Background()
	p := NewTryPool(t.TempDir(), time.Minute, nil)
	defer p.Close(ctx)
	var n int
	var made []*fakeRuntime
	launch := fakeLaunch(&n, &made)
	b := runtimes.Build{Runtime: "llama-server", BinarySHA256: "b1"}
	cfg := runtimes.Config{ModelSHA256: "m1", Context: 2048}
	rt, err := p.start(ctx, b, cfg, 0, launch)
	if err != nil {
		t.Fatal(err)
	}
	if rt.(*pooled).reused {
		t.Error("a first start was marked reused")
	}
	rt.Stop(ctx)
	if made[0].stopped.Load() || p.Parked() != 1 {
		t.Fatalf("Stop did not park the runtime (stopped %v, parked %d)", made[0].stopped.Load(), p.Parked())
	}
	again, _ := p.start(ctx, b, cfg, 0, launch)
	if n != 1 || !again.(*pooled).reused {
		t.Errorf("the same pins started %d runtimes; want the parked one back", n)
	}
	again.Stop(ctx)
	other := cfg
	other.Context = 4096
	third, _ := p.start(ctx, b, other, 0, launch)
	if n != 2 || third.(*pooled).reused {
		t.Errorf("another context got a parked runtime (started %d)", n)
	}
	third.Stop(ctx)
	if made[0].cfg.WorkDir == made[1].cfg.WorkDir {
		t.Error("two runtimes share one folder")
	}
	if err := os.MkdirAll(made[0].cfg.WorkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	p.Drain(ctx)
	if p.Parked() != 0 || !made[0].stopped.Load() || !made[1].stopped.Load() {
		t.Error("Drain did not stop the parked runtimes")
	}
	if _, err := os.Stat(made[0].cfg.WorkDir); err == nil {
		t.Error("a stopped runtime's folder was left behind")
	}
}

// A parked runtime not asked for within the keep time is stopped; a pool
// that keeps nothing stops at once.
func TestTryPoolExpires(t *testing.T) {
	ctx := context.Background()
	var n int
	var made []*fakeRuntime
	p := NewTryPool(t.TempDir(), 50*time.Millisecond, nil)
	defer p.Close(ctx)
	rt, _ := p.start(ctx, runtimes.Build{Runtime: "llama-server"}, runtimes.Config{}, 0, fakeLaunch(&n, &made))
	rt.Stop(ctx)
	deadline := time.Now().Add(5 * time.Second)
	for !made[0].stopped.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !made[0].stopped.Load() || p.Parked() != 0 {
		t.Error("a parked runtime outlived the keep time")
	}
	none := NewTryPool(t.TempDir(), -1, nil)
	rt, _ = none.start(ctx, runtimes.Build{Runtime: "llama-server"}, runtimes.Config{}, 0, fakeLaunch(&n, &made))
	rt.Stop(ctx)
	if !made[1].stopped.Load() || none.Parked() != 0 {
		t.Error("a pool that keeps nothing parked a runtime")
	}
}
