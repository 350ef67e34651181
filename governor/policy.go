package governor

import (
	"fmt"
	"time"
)

// Budget is what the running trial's card profile allows.
type Budget struct {
	CardMemBytes uint64 `json:"card_mem_bytes,omitempty"`
}

// Snapshot is what one evaluation sees: the latest reading per sensor and
// whether a trial is running (hung and crash only apply to a running one).
type Snapshot struct {
	Now         time.Time
	Readings    map[string]Reading
	TrialActive bool
	Budget      Budget
}

// Verdict is one policy's answer for one snapshot.
type Verdict struct {
	Violated bool
	Reason   string
}

// policy is evaluated once per poll by the governor loop only, so the state
// it keeps for hysteresis needs no lock.
type policy interface {
	name() string
	sensor() string
	trialScoped() bool
	check(s Snapshot) Verdict
}

// threshold trips when a value crosses limit and clears only once it is
// band back on the safe side, so a reading hovering at the limit does not
// flap between preempt and release.
type threshold struct {
	pname, sname, key string
	below             bool // trip when the value falls below the limit (free disk)
	limit             func(Snapshot) (float64, bool)
	band              float64
	unit              string
	tripped           bool
}

func (t *threshold) name() string      { return t.pname }
func (t *threshold) sensor() string    { return t.sname }
func (t *threshold) trialScoped() bool { return false }

func (t *threshold) check(s Snapshot) Verdict {
	r := s.Readings[t.sname]
	v, ok := r.Value(t.key)
	lim, lok := t.limit(s)
	if !ok || !lok {
		// A value the sensor does not give, or a limit that does not apply
		// (no budget), cannot be judged; missing sensors are sensor-loss.
		t.tripped = false
		return Verdict{}
	}
	clearAt := lim - t.band
	over := v > lim
	if t.below {
		clearAt = lim + t.band
		over = v < lim
	}
	switch {
	case over:
		t.tripped = true
	case t.tripped && !t.below && v < clearAt, t.tripped && t.below && v > clearAt:
		t.tripped = false
	}
	if !t.tripped {
		return Verdict{}
	}
	rel := "above"
	if t.below {
		rel = "below"
	}
	return Verdict{Violated: true, Reason: fmt.Sprintf("%s %.4g%s %s limit %.4g%s (clears past %.4g%s)", t.key, v, t.unit, rel, lim, t.unit, clearAt, t.unit)}
}

// counter trips when an event counter (XID, OOM kill) grows and stays
// tripped for clearAfter after the last increase: the events are one-off,
// the damage they signal is not.
type counter struct {
	pname, sname string
	keys         []string
	clearAfter   time.Duration
	base         map[string]float64
	lastAt       time.Time
	reason       string
}

func (c *counter) name() string      { return c.pname }
func (c *counter) sensor() string    { return c.sname }
func (c *counter) trialScoped() bool { return false }

func (c *counter) check(s Snapshot) Verdict {
	r := s.Readings[c.sname]
	if c.base == nil {
		c.base = map[string]float64{}
		for _, k := range c.keys {
			c.base[k], _ = r.Value(k)
		}
	}
	for _, k := range c.keys {
		v, _ := r.Value(k)
		if v > c.base[k] {
			c.reason = fmt.Sprintf("%s rose from %.0f to %.0f", k, c.base[k], v)
			if k == KeyXIDEvents {
				if x, ok := r.Value(KeyXIDLast); ok {
					c.reason += fmt.Sprintf(" (XID %.0f)", x)
				}
			}
			c.base[k] = v
			c.lastAt = s.Now
		} else if v < c.base[k] {
			// A counter that went down was reset (new cgroup, driver
			// reload); start counting from there.
			c.base[k] = v
		}
	}
	if !c.lastAt.IsZero() && s.Now.Sub(c.lastAt) < c.clearAfter {
		return Verdict{Violated: true, Reason: c.reason}
	}
	if !c.lastAt.IsZero() && c.clearAfter == 0 && s.Now.Equal(c.lastAt) {
		return Verdict{Violated: true, Reason: c.reason}
	}
	return Verdict{}
}

// trialCheck applies only while a trial runs: a hung or crashed runtime is
// about that trial, and ends with it.
type trialCheck struct {
	pname string
	fn    func(Reading) Verdict
}

func (t *trialCheck) name() string      { return t.pname }
func (t *trialCheck) sensor() string    { return "progress" }
func (t *trialCheck) trialScoped() bool { return true }
func (t *trialCheck) check(s Snapshot) Verdict {
	r := s.Readings["progress"]
	if !s.TrialActive {
		return Verdict{}
	}
	return t.fn(r)
}

// buildPolicies turns the enabled part of cfg into policies.
func buildPolicies(cfg Config) []policy {
	var out []policy
	on := func(n string) (PolicyConfig, bool) {
		p := cfg.Policies[n]
		return p, p.Enabled
	}
	if p, ok := on(PolicyOverTemperature); ok {
		out = append(out, &threshold{pname: PolicyOverTemperature, sname: "gpu", key: KeyTempC, band: p.Band, unit: "°C",
			limit: func(s Snapshot) (float64, bool) {
				// The card's own slowdown threshold wins when it is lower:
				// past it the card throttles and timings stop being comparable.
				lim := p.Limit
				if sd, ok := s.Readings["gpu"].Value(KeyTempSlowdownC); ok && sd > 0 && sd < lim {
					lim = sd
				}
				return lim, true
			}})
	}
	if p, ok := on(PolicyOverPower); ok {
		// Limit and band are fractions of the enforced limit the card reports.
		t := &threshold{pname: PolicyOverPower, sname: "gpu", key: KeyPowerW, unit: "W"}
		t.limit = scaledBand(t, p, "gpu", KeyPowerLimitW)
		out = append(out, t)
	}
	if p, ok := on(PolicyCardMemory); ok {
		t := &threshold{pname: PolicyCardMemory, sname: "gpu", key: KeyCardMemBytes, unit: "B"}
		t.limit = func(s Snapshot) (float64, bool) {
			b := float64(s.Budget.CardMemBytes)
			t.band = p.Band * b
			return p.Limit * b, b > 0
		}
		out = append(out, t)
	}
	if p, ok := on(PolicyHostMemory); ok {
		out = append(out, &threshold{pname: PolicyHostMemory, sname: "host", key: KeyMemUsedFrac, band: p.Band,
			limit: func(Snapshot) (float64, bool) { return p.Limit, true }})
	}
	if p, ok := on(PolicyLowDisk); ok {
		out = append(out, &threshold{pname: PolicyLowDisk, sname: "host", key: KeyDiskFreeBytes, band: p.Band, below: true, unit: "B",
			limit: func(Snapshot) (float64, bool) { return p.Limit, true }})
	}
	if p, ok := on(PolicyCgroupOOM); ok {
		out = append(out, &counter{pname: PolicyCgroupOOM, sname: "cgroup", keys: []string{KeyCgOOMKill}, clearAfter: p.ClearAfter})
	}
	if p, ok := on(PolicyGPUError); ok {
		out = append(out, &counter{pname: PolicyGPUError, sname: "gpu", keys: []string{KeyXIDEvents, KeyDBEEvents, KeyECCUncorrected}, clearAfter: p.ClearAfter})
	}
	if p, ok := on(PolicyHungRuntime); ok {
		out = append(out, &trialCheck{pname: PolicyHungRuntime, fn: hungRuntime(p)})
	}
	if _, ok := on(PolicyRuntimeCrash); ok {
		out = append(out, &trialCheck{pname: PolicyRuntimeCrash, fn: func(r Reading) Verdict {
			if ex, _ := r.Value(KeyExited); ex == 1 {
				return Verdict{Violated: true, Reason: "runtime process exited during the trial"}
			}
			return Verdict{}
		}})
	}
	return out
}

func scaledBand(t *threshold, p PolicyConfig, sensor, key string) func(Snapshot) (float64, bool) {
	return func(s Snapshot) (float64, bool) {
		el, ok := s.Readings[sensor].Value(key)
		t.band = p.Band * el
		return p.Limit * el, ok && el > 0
	}
}

// hungRuntime is the hung-runtime policy's check of a progress reading: a
// stopped runtime process, a call past the first-token limit, or the
// stalest call in flight past the token-gap limit.
func hungRuntime(p PolicyConfig) func(Reading) Verdict {
	return func(r Reading) Verdict {
		since, ok := r.Value(KeySinceLastTokenS)
		active, _ := r.Value(KeyActive)
		if active != 1 || !ok {
			return Verdict{}
		}
		if st, _ := r.Value(KeyStopped); st == 1 {
			return Verdict{Violated: true, Reason: fmt.Sprintf("runtime process is stopped (no token for %.2fs)", since)}
		}
		if wait, ok := r.Value(KeyFirstTokenWaitS); ok && wait > p.FirstToken.Seconds() {
			// A call in flight beside others that did progress.
			return Verdict{Violated: true, Reason: fmt.Sprintf("a call in flight beside others has no first token after %.2fs (limit %.4gs)", wait, p.FirstToken.Seconds())}
		}
		if n, _ := r.Value(KeyTokens); n == 0 {
			if lim := p.FirstToken.Seconds(); since > lim {
				return Verdict{Violated: true, Reason: fmt.Sprintf("no first token after %.2fs (limit %.4gs)", since, lim)}
			}
			return Verdict{}
		}
		if since > p.Limit {
			why := fmt.Sprintf("no token for %.2fs (limit %.4gs)", since, p.Limit)
			if n, _ := r.Value(KeyCalls); n > 1 {
				why += fmt.Sprintf(" (the stalest of %.0f calls in flight)", n)
			}
			return Verdict{Violated: true, Reason: why}
		}
		return Verdict{}
	}
}
