package governor

import (
	"testing"
	"time"
)

func snapWith(sensor string, vals map[string]float64, active bool, at time.Time) Snapshot {
	return Snapshot{Now: at, TrialActive: active, Budget: Budget{CardMemBytes: 4 << 30},
		Readings: map[string]Reading{sensor: {Sensor: sensor, At: at, Values: vals}}}
}

func findPolicy(t *testing.T, cfg Config, name string) policy {
	t.Helper()
	for _, p := range buildPolicies(cfg) {
		if p.name() == name {
			return p
		}
	}
	t.Fatalf("policy %s not built", name)
	return nil
}

func TestThresholdHysteresis(t *testing.T) {
	cfg := DefaultConfig() // over-temperature: limit 83, band 3 → clears below 80
	tests := []struct {
		name  string
		temps []float64
		want  []bool
	}{
		{"hovering at the limit does not flap", []float64{82, 83.5, 82.9, 83.1, 82.5, 80.5, 79.9, 82.9}, []bool{false, true, true, true, true, true, false, false}},
		{"exactly at the limit does not trip", []float64{83, 83, 83}, []bool{false, false, false}},
		{"clears only below limit minus band", []float64{90, 80, 79.99}, []bool{true, true, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := findPolicy(t, cfg, PolicyOverTemperature)
			for i, temp := range tt.temps {
				v := p.check(snapWith("gpu", map[string]float64{KeyTempC: temp}, true, time.Now()))
				if v.Violated != tt.want[i] {
					t.Fatalf("step %d (%.2f°C): violated %v, want %v (%s)", i, temp, v.Violated, tt.want[i], v.Reason)
				}
			}
		})
	}
}

func TestThresholdLimits(t *testing.T) {
	cfg := DefaultConfig()
	now := time.Now()
	tests := []struct {
		policy string
		sensor string
		vals   map[string]float64
		want   bool
	}{
		{PolicyOverTemperature, "gpu", map[string]float64{KeyTempC: 81, KeyTempSlowdownC: 80}, true}, // card slowdown below the limit wins
		{PolicyOverTemperature, "gpu", map[string]float64{KeyTempC: 81, KeyTempSlowdownC: 87}, false},
		{PolicyOverPower, "gpu", map[string]float64{KeyPowerW: 320, KeyPowerLimitW: 300}, true},
		{PolicyOverPower, "gpu", map[string]float64{KeyPowerW: 310, KeyPowerLimitW: 300}, false},
		{PolicyOverPower, "gpu", map[string]float64{KeyPowerW: 310}, false}, // no enforced limit reported: cannot judge
		{PolicyCardMemory, "gpu", map[string]float64{KeyCardMemBytes: 5 << 30}, true},
		{PolicyCardMemory, "gpu", map[string]float64{KeyCardMemBytes: 3 << 30}, false},
		{PolicyHostMemory, "host", map[string]float64{KeyMemUsedFrac: 0.97}, true},
		{PolicyHostMemory, "host", map[string]float64{KeyMemUsedFrac: 0.90}, false},
		{PolicyLowDisk, "host", map[string]float64{KeyDiskFreeBytes: 1 << 30}, true},
		{PolicyLowDisk, "host", map[string]float64{KeyDiskFreeBytes: 10 << 30}, false},
	}
	for _, tt := range tests {
		p := findPolicy(t, cfg, tt.policy)
		if v := p.check(snapWith(tt.sensor, tt.vals, true, now)); v.Violated != tt.want {
			t.Errorf("%s %v: violated %v, want %v (%s)", tt.policy, tt.vals, v.Violated, tt.want, v.Reason)
		}
	}
}

func TestCardMemoryWithoutBudget(t *testing.T) {
	p := findPolicy(t, DefaultConfig(), PolicyCardMemory)
	s := snapWith("gpu", map[string]float64{KeyCardMemBytes: 100 << 30}, true, time.Now())
	s.Budget = Budget{}
	if v := p.check(s); v.Violated {
		t.Fatalf("no budget, still violated: %s", v.Reason)
	}
}

func TestCounterPolicy(t *testing.T) {
	cfg := DefaultConfig()
	pc := cfg.Policies[PolicyGPUError]
	pc.ClearAfter = time.Second
	cfg.Policies[PolicyGPUError] = pc
	p := findPolicy(t, cfg, PolicyGPUError)
	t0 := time.Now()
	steps := []struct {
		at   time.Duration
		xid  float64
		want bool
	}{
		{0, 2, false}, // the count at start is the baseline, not a new event
		{100 * time.Millisecond, 2, false},
		{200 * time.Millisecond, 3, true},
		{900 * time.Millisecond, 3, true},
		{1300 * time.Millisecond, 3, false},
		{1400 * time.Millisecond, 0, false}, // reset counter is a new baseline
		{1500 * time.Millisecond, 1, true},
	}
	for i, st := range steps {
		v := p.check(snapWith("gpu", map[string]float64{KeyXIDEvents: st.xid, KeyXIDLast: 79}, false, t0.Add(st.at)))
		if v.Violated != st.want {
			t.Fatalf("step %d: violated %v, want %v (%s)", i, v.Violated, st.want, v.Reason)
		}
	}
}

func TestTrialScopedPolicies(t *testing.T) {
	cfg := DefaultConfig()
	hung := findPolicy(t, cfg, PolicyHungRuntime)
	crash := findPolicy(t, cfg, PolicyRuntimeCrash)
	now := time.Now()
	tests := []struct {
		name        string
		vals        map[string]float64
		active      bool
		hung, crash bool
	}{
		{"flowing", map[string]float64{KeyActive: 1, KeyTokens: 5, KeySinceLastTokenS: 0.1}, true, false, false},
		{"hung", map[string]float64{KeyActive: 1, KeyTokens: 5, KeySinceLastTokenS: 61}, true, true, false},
		{"reading the prompt", map[string]float64{KeyActive: 1, KeyTokens: 0, KeySinceLastTokenS: 61}, true, false, false},
		{"hung before the first token", map[string]float64{KeyActive: 1, KeyTokens: 0, KeySinceLastTokenS: 301}, true, true, false},
		{"hung but no trial running", map[string]float64{KeyActive: 1, KeySinceLastTokenS: 61}, false, false, false},
		{"idle call", map[string]float64{KeyActive: 0}, true, false, false},
		{"stopped process", map[string]float64{KeyActive: 1, KeyTokens: 5, KeySinceLastTokenS: 0.1, KeyStopped: 1}, true, true, false},
		{"exited", map[string]float64{KeyActive: 1, KeyExited: 1, KeySinceLastTokenS: 0.1}, true, false, true},
		{"exited after the trial", map[string]float64{KeyExited: 1}, false, false, false},
	}
	for _, tt := range tests {
		s := snapWith("progress", tt.vals, tt.active, now)
		if v := hung.check(s); v.Violated != tt.hung {
			t.Errorf("%s: hung %v, want %v", tt.name, v.Violated, tt.hung)
		}
		if v := crash.check(s); v.Violated != tt.crash {
			t.Errorf("%s: crash %v, want %v", tt.name, v.Violated, tt.crash)
		}
	}
}

func BenchmarkEvaluate(b *testing.B) {
	ctx := b.Context()
	gpu := NewSimulated("gpu", normalGPU())
	host := NewSimulated("host", normalHost())
	cg := NewSimulated("cgroup", map[string]float64{KeyCgOOMKill: 0})
	g, err := New(Options{Config: DefaultConfig(), Sensors: []Sensor{gpu, host, cg, NewProgress()}, Sink: &eventLog{}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		g.tick(ctx)
	}
}
