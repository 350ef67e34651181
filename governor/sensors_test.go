package governor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSimulated(t *testing.T) {
	ctx := context.Background()
	s := NewSimulated("gpu", map[string]float64{KeyTempC: 60})
	r, err := s.Read(ctx)
	if err != nil || r.Values[KeyTempC] != 60 || r.Sensor != "gpu" {
		t.Fatalf("first read %+v %v", r, err)
	}
	s.Set(KeyTempC, 91)
	if r, _ := s.Read(ctx); r.Values[KeyTempC] != 91 {
		t.Fatalf("Set not seen: %v", r.Values)
	}
	boom := errors.New("boom")
	s.Fail(boom)
	if _, err := s.Read(ctx); !errors.Is(err, boom) {
		t.Fatalf("Fail: %v", err)
	}
	s.Heal()
	first, _ := s.Read(ctx)
	s.Freeze()
	time.Sleep(5 * time.Millisecond)
	frozen, _ := s.Read(ctx)
	if !frozen.At.Equal(first.At) {
		t.Fatalf("frozen read has a new timestamp: %v vs %v", frozen.At, first.At)
	}
	s.Heal()
	time.Sleep(time.Millisecond)
	if r, _ := s.Read(ctx); !r.At.After(first.At) {
		t.Fatal("healed read still stale")
	}
	s.Script(Step{Set: map[string]float64{KeyTempC: 70}}, Step{Err: boom}, Step{Stale: true})
	step1, _ := s.Read(ctx)
	if step1.Values[KeyTempC] != 70 {
		t.Fatalf("script step 1: %v", step1.Values)
	}
	if _, err := s.Read(ctx); !errors.Is(err, boom) {
		t.Fatalf("script step 2: %v", err)
	}
	time.Sleep(time.Millisecond)
	if st, _ := s.Read(ctx); !st.At.Equal(step1.At) {
		t.Fatalf("script stale step has a new timestamp")
	}
	if r, err := s.Read(ctx); err != nil || r.Values[KeyTempC] != 70 {
		t.Fatalf("after the script the state stays: %v %v", r.Values, err)
	}
	s.Block()
	bctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := s.Read(bctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked read: %v", err)
	}
	if s.Reads() < 8 {
		t.Fatalf("Reads = %d", s.Reads())
	}
}

func TestCgroupSensor(t *testing.T) {
	ctx := context.Background()
	write := func(dir string, files map[string]string) {
		for n, v := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	v1 := t.TempDir()
	write(v1, map[string]string{"memory.usage_in_bytes": "1000\n", "memory.max_usage_in_bytes": "2000\n",
		"memory.oom_control": "oom_kill_disable 0\nunder_oom 1\noom_kill 3\n"})
	v2 := t.TempDir()
	write(v2, map[string]string{"memory.current": "500\n", "memory.peak": "900\n",
		"memory.events": "low 0\nhigh 7\nmax 2\noom 1\noom_kill 4\noom_group_kill 0\n"})
	bad := t.TempDir()
	write(bad, map[string]string{"memory.current": "lots\n"})
	tests := []struct {
		name string
		dir  string
		want map[string]float64
		err  bool
	}{
		{"v1", v1, map[string]float64{KeyCgMemBytes: 1000, KeyCgPeakBytes: 2000, KeyCgOOM: 1, KeyCgOOMKill: 3}, false},
		{"v2", v2, map[string]float64{KeyCgMemBytes: 500, KeyCgPeakBytes: 900, KeyCgHigh: 7, KeyCgOOM: 1, KeyCgOOMKill: 4}, false},
		{"empty dir", t.TempDir(), nil, true},
		{"garbage", bad, nil, true},
	}
	for _, tt := range tests {
		r, err := NewCgroup("cgroup", tt.dir).Read(ctx)
		if (err != nil) != tt.err {
			t.Fatalf("%s: err %v", tt.name, err)
		}
		for k, v := range tt.want {
			if r.Values[k] != v {
				t.Errorf("%s: %s = %v, want %v", tt.name, k, r.Values[k], v)
			}
		}
	}
}

func TestCgroupRetarget(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for i, d := range []string{a, b} {
		if err := writeCgroupV1(d, uint64(100*(i+1)), 0, i); err != nil {
			t.Fatal(err)
		}
	}
	c := NewCgroup("cgroup", a)
	c.Retarget(b)
	r, err := c.Read(context.Background())
	if err != nil || r.Values[KeyCgMemBytes] != 200 || r.Values[KeyCgOOMKill] != 1 {
		t.Fatalf("after Retarget: %v %v", r.Values, err)
	}
}

func TestCgroupSensorOnThisHost(t *testing.T) {
	dir, err := SelfCgroupDir()
	if err != nil {
		t.Skipf("no readable memory cgroup here: %v", err)
	}
	r, err := NewCgroup("cgroup", dir).Read(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	if r.Values[KeyCgMemBytes] <= 0 {
		t.Fatalf("%s: memory %v", dir, r.Values)
	}
}

func TestHostSensor(t *testing.T) {
	r, err := NewHost(t.TempDir()).Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Values[KeyMemUsedFrac]; f <= 0 || f >= 1 {
		t.Errorf("mem_used_frac %v", f)
	}
	if r.Values[KeyDiskFreeBytes] <= 0 || r.Values[KeyDiskFreeFrac] <= 0 {
		t.Errorf("disk free %v", r.Values)
	}
	if _, err := NewHost(filepath.Join(t.TempDir(), "nope")).Read(context.Background()); err == nil {
		t.Error("missing store dir read without error")
	}
}

// TestNVMLAbsentIsTyped checks what a host without a card gets: a typed
// error that the daemon and the suite can test for, naming the gpu sensor.
func TestNVMLAbsentIsTyped(t *testing.T) {
	n, err := OpenNVML(context.Background(), 0)
	if err == nil {
		n.Close()
		t.Skip("NVML is present here: the absent path cannot be shown (TestNVMLReading covers the card)")
	}
	var ae *AbsentError
	if !errors.Is(err, ErrAbsent) || !errors.As(err, &ae) || ae.Sensor != "gpu" {
		t.Fatalf("err = %v, want *AbsentError for gpu", err)
	}
	if !strings.Contains(err.Error(), "gpu") || ae.Reason == "" {
		t.Errorf("absent error does not say which sensor and why: %q", err)
	}
}

// TestNVMLReading reads the real card through NVML.
func TestNVMLReading(t *testing.T) {
	n, err := OpenNVML(context.Background(), 0)
	if err != nil {
		t.Skipf("no NVIDIA GPU/NVML on this machine: %v (the NVML-backed policies are tested on simulated sensors)", err)
	}
	defer n.Close()
	r, err := n.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Values[KeyTempC] <= 0 || r.Values[KeyPowerLimitW] <= 0 || r.Values[KeyCardTotalBytes] <= 0 {
		t.Fatalf("real NVML reading implausible: %v", r.Values)
	}
}

func TestProgress(t *testing.T) {
	ctx := context.Background()
	p := NewProgress()
	if r, _ := p.Read(ctx); r.Values[KeyActive] != 0 {
		t.Fatalf("idle progress active: %v", r.Values)
	}
	p.Begin()
	time.Sleep(30 * time.Millisecond)
	p.Tokens(10)
	r, _ := p.Read(ctx)
	if r.Values[KeyTokens] != 10 || r.Values[KeyTokensPerS] <= 0 || r.Values[KeySinceLastTokenS] > 0.02 {
		t.Fatalf("after tokens: %v", r.Values)
	}
	time.Sleep(30 * time.Millisecond)
	p.Tokens(10) // no growth, no progress
	r, _ = p.Read(ctx)
	if r.Values[KeySinceLastTokenS] < 0.025 {
		t.Fatalf("repeated total counted as progress: %v", r.Values)
	}
	p.Add(2)
	if r, _ := p.Read(ctx); r.Values[KeyTokens] != 12 {
		t.Fatalf("Add: %v", r.Values)
	}
	p.Exited()
	if r, _ := p.Read(ctx); r.Values[KeyExited] != 1 {
		t.Fatalf("Exited: %v", r.Values)
	}
	p.Begin()
	if r, _ := p.Read(ctx); r.Values[KeyExited] != 0 || r.Values[KeyTokens] != 0 {
		t.Fatalf("Begin does not reset: %v", r.Values)
	}
	p.End()
	if r, _ := p.Read(ctx); r.Values[KeyActive] != 0 {
		t.Fatalf("End: %v", r.Values)
	}
}
