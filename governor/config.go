package governor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"rig/internal/jsonerr"
	"rig/internal/sizecap"
	"rig/internal/textcheck"
)

// Policy names, as written in the config file.
const (
	PolicyOverTemperature = "over-temperature"
	PolicyOverPower       = "over-power"
	PolicyCardMemory      = "card-memory"
	PolicyHostMemory      = "host-memory"
	PolicyCgroupOOM       = "cgroup-oom"
	PolicyGPUError        = "gpu-error"
	PolicyHungRuntime     = "hung-runtime"
	PolicyRuntimeCrash    = "runtime-crash"
	PolicySensorLoss      = "sensor-loss"
	PolicyLowDisk         = "low-disk"
	// Reasons that are not config policies but show up as preemption causes.
	ReasonHeartbeatStale = "heartbeat-stale"
	ReasonRecordWrite    = "record-write"
)

// GPUPolicies are the policies that need the "gpu" sensor. A daemon on a
// host without NVML disables them (and says so) or gives a simulated card;
// leaving them on without a gpu sensor holds the queue, by design.
func GPUPolicies() []string {
	return []string{PolicyOverTemperature, PolicyOverPower, PolicyCardMemory, PolicyGPUError}
}

// PolicyConfig is one policy's settings. Which fields a policy reads, and in
// what unit, is in policyFields; a field a policy does not read is an error
// in the file rather than silently ignored.
type PolicyConfig struct {
	Enabled bool
	// Limit trips the policy: °C, a fraction, seconds or bytes, by policy.
	Limit float64
	// Band is the hysteresis: a tripped policy clears only once the reading
	// is Band back on the safe side of Limit.
	Band float64
	// Shutdown is the card's shutdown temperature (over-temperature only);
	// a limit at or above it would never act in time.
	Shutdown float64
	// FirstToken is how long a call may go without its first token
	// (hung-runtime only): prompt processing is slower than decoding, and
	// a runtime hung before its first token is still hung.
	FirstToken time.Duration
	// ClearAfter keeps an event policy (XID, OOM kill) tripped this long
	// after the last new event before the queue is released.
	ClearAfter time.Duration
}

// Config is the governor's whole configuration.
type Config struct {
	Poll        time.Duration // sensor poll and policy evaluation period
	Heartbeat   time.Duration // watchdog heartbeat period; stale after 3
	Grace       time.Duration // SIGTERM → SIGKILL wait when stopping a trial
	ReadTimeout time.Duration // one sensor read; longer counts as an error
	Policies    map[string]PolicyConfig
}

type fieldSpec struct{ limit, band, shutdown, clearAfter, firstToken bool }

var policyFields = map[string]fieldSpec{
	PolicyOverTemperature: {limit: true, band: true, shutdown: true},
	PolicyOverPower:       {limit: true, band: true},
	PolicyCardMemory:      {limit: true, band: true},
	PolicyHostMemory:      {limit: true, band: true},
	PolicyCgroupOOM:       {clearAfter: true},
	PolicyGPUError:        {clearAfter: true},
	PolicyHungRuntime:     {limit: true, firstToken: true},
	PolicyRuntimeCrash:    {},
	PolicySensorLoss:      {limit: true},
	PolicyLowDisk:         {limit: true, band: true},
}

// PolicyNames returns the known policy names, sorted.
func PolicyNames() []string {
	names := make([]string, 0, len(policyFields))
	for n := range policyFields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DefaultConfig returns the defaults a studio config file overrides.
// Units: over-temperature °C; over-power a fraction of the enforced power
// limit; card-memory a fraction of the profile's card budget; host-memory the
// used fraction of RAM; hung-runtime and sensor-loss seconds; low-disk bytes
// free.
func DefaultConfig() Config {
	return Config{
		Poll:        250 * time.Millisecond,
		Heartbeat:   time.Second,
		Grace:       5 * time.Second,
		ReadTimeout: 200 * time.Millisecond,
		Policies: map[string]PolicyConfig{
			PolicyOverTemperature: {Enabled: true, Limit: 83, Band: 3, Shutdown: 90},
			PolicyOverPower:       {Enabled: true, Limit: 1.05, Band: 0.05},
			PolicyCardMemory:      {Enabled: true, Limit: 1.0, Band: 0.02},
			PolicyHostMemory:      {Enabled: true, Limit: 0.95, Band: 0.03},
			PolicyCgroupOOM:       {Enabled: true, ClearAfter: 30 * time.Second},
			PolicyGPUError:        {Enabled: true, ClearAfter: 5 * time.Minute},
			PolicyHungRuntime:     {Enabled: true, Limit: 60, FirstToken: 5 * time.Minute},
			PolicyRuntimeCrash:    {Enabled: true},
			PolicySensorLoss:      {Enabled: true, Limit: 1.0},
			PolicyLowDisk:         {Enabled: true, Limit: 2 << 30, Band: 512 << 20},
		},
	}
}

// Disable turns policies off, e.g. GPUPolicies() on a host without NVML.
func (c *Config) Disable(names ...string) {
	for _, n := range names {
		if p, ok := c.Policies[n]; ok {
			p.Enabled = false
			c.Policies[n] = p
		}
	}
}

// SuiteConfig is DefaultConfig with short dwell times, so that a fault is
// decided within a second: the configuration the fault-injection suite
// (governor/faults) runs under, and the governor's own tests with it. The
// suite's table prints the dwells each time includes.
func SuiteConfig() Config {
	c := DefaultConfig()
	c.Poll = 100 * time.Millisecond
	c.Heartbeat = 200 * time.Millisecond
	c.ReadTimeout = 80 * time.Millisecond
	c.Grace = 2 * time.Second
	set := func(n string, f func(*PolicyConfig)) {
		p := c.Policies[n]
		f(&p)
		c.Policies[n] = p
	}
	// A SIGSTOPped runtime is caught by its process state within a poll; the
	// token-gap limit is for a runtime alive but silent, and must sit above
	// the slowest normal gap between tokens on a busy CPU host.
	set(PolicyHungRuntime, func(p *PolicyConfig) { p.Limit, p.FirstToken = 3, 30*time.Second })
	set(PolicySensorLoss, func(p *PolicyConfig) { p.Limit = 0.4 })
	set(PolicyCgroupOOM, func(p *PolicyConfig) { p.ClearAfter = 300 * time.Millisecond })
	set(PolicyGPUError, func(p *PolicyConfig) { p.ClearAfter = 300 * time.Millisecond })
	return c
}

// Clone returns a copy whose map can be changed without touching c's.
func (c Config) Clone() Config {
	out := c
	out.Policies = make(map[string]PolicyConfig, len(c.Policies))
	for k, v := range c.Policies {
		out.Policies[k] = v
	}
	return out
}

type fileConfig struct {
	PollMS        *float64                   `json:"poll_ms"`
	HeartbeatMS   *float64                   `json:"heartbeat_ms"`
	GraceMS       *float64                   `json:"grace_ms"`
	ReadTimeoutMS *float64                   `json:"read_timeout_ms"`
	Policies      map[string]json.RawMessage `json:"policies"`
}

type filePolicy struct {
	Enabled     *bool    `json:"enabled"`
	Limit       *float64 `json:"limit"`
	Band        *float64 `json:"band"`
	Shutdown    *float64 `json:"shutdown"`
	ClearAfterS *float64 `json:"clear_after_s"`
	FirstTokenS *float64 `json:"first_token_s"`
}

// configCap bounds governor.json, read before the daemon starts: the file
// is a few hundred bytes of limits and policies.
var configCap = sizecap.Cap{What: "governor config", Limit: 1 << 20, Fix: "governor.json holds a few limits and policies: name the file meant"}

// LoadConfig reads a JSON config file over DefaultConfig. Errors name the
// file, the field and the fix.
func LoadConfig(path string) (Config, error) {
	b, err := configCap.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("governor config: %w", err)
	}
	return ParseConfig(path, b)
}

// ParseConfig parses config bytes; name is used in error messages. Bytes that
// are not UTF-8 are refused with their line and offset (errors.Is
// textcheck.ErrInvalidUTF8).
func ParseConfig(name string, data []byte) (Config, error) {
	cfg := DefaultConfig()
	bad := func(field, msg, fix string) error {
		return &ConfigError{File: name, Field: field, Msg: msg, Fix: fix}
	}
	var ue *textcheck.Error
	if errors.As(textcheck.UTF8(name, data), &ue) {
		return Config{}, &ConfigError{File: name, Msg: fmt.Sprintf("line %d: %s", ue.Line, ue.Reason()), Err: ue}
	}
	var fc fileConfig
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		return Config{}, bad("", jsonMsg(err), "the file is one JSON object with poll_ms, heartbeat_ms, grace_ms, read_timeout_ms and policies")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Config{}, bad("", "text after the JSON object", "keep one object per file")
	}
	if err := setDurations(&cfg, fc, bad); err != nil {
		return Config{}, err
	}
	// Defaults that depend on the poll follow it unless set explicitly.
	if fc.ReadTimeoutMS == nil && cfg.ReadTimeout > cfg.Poll {
		cfg.ReadTimeout = cfg.Poll * 4 / 5
	}
	if sl := cfg.Policies[PolicySensorLoss]; float64(cfg.Poll)*4 > sl.Limit*float64(time.Second) {
		sl.Limit = 4 * cfg.Poll.Seconds()
		cfg.Policies[PolicySensorLoss] = sl
	}
	names := make([]string, 0, len(fc.Policies))
	for n := range fc.Policies {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, err := parsePolicy(n, fc.Policies[n], cfg.Policies[n], bad)
		if err != nil {
			return Config{}, err
		}
		cfg.Policies[n] = p
	}
	if err := cfg.validate(name); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// setDurations sets the durations fc gives in milliseconds, each held to its
// range.
func setDurations(cfg *Config, fc fileConfig, bad func(field, msg, fix string) error) error {
	durs := []struct {
		field string
		v     *float64
		dst   *time.Duration
		min   float64
	}{
		{"poll_ms", fc.PollMS, &cfg.Poll, 10},
		{"heartbeat_ms", fc.HeartbeatMS, &cfg.Heartbeat, 10},
		{"grace_ms", fc.GraceMS, &cfg.Grace, 0},
		{"read_timeout_ms", fc.ReadTimeoutMS, &cfg.ReadTimeout, 1},
	}
	for _, d := range durs {
		if d.v == nil {
			continue
		}
		if !finite(*d.v) || *d.v < d.min || *d.v > 3.6e6 {
			return bad(d.field, fmt.Sprintf("%v is out of range", *d.v), fmt.Sprintf("use milliseconds from %v to 3600000", d.min))
		}
		*d.dst = time.Duration(*d.v * float64(time.Millisecond))
	}
	return nil
}

// parsePolicy applies policy n's settings in raw to p, its defaults: only
// the fields the policy uses, each finite and ≥ 0.
func parsePolicy(n string, raw json.RawMessage, p PolicyConfig, bad func(field, msg, fix string) error) (PolicyConfig, error) {
	field := "policies." + n
	spec, ok := policyFields[n]
	if !ok {
		return p, bad(field, fmt.Sprintf("unknown policy %q", n), "known policies: "+strings.Join(PolicyNames(), ", "))
	}
	var fp filePolicy
	pd := json.NewDecoder(bytes.NewReader(raw))
	pd.DisallowUnknownFields()
	if err := pd.Decode(&fp); err != nil {
		return p, bad(field, jsonMsg(err), "a policy takes "+strings.Join(spec.names(), ", "))
	}
	set := func(f string, allowed bool, v *float64, dst *float64) error {
		if v == nil {
			return nil
		}
		if !allowed {
			return bad(field+"."+f, fmt.Sprintf("%s does not use %s", n, f), n+" takes "+strings.Join(spec.names(), ", "))
		}
		if !finite(*v) || *v < 0 {
			return bad(field+"."+f, fmt.Sprintf("%v is not a usable value", *v), "use a finite number ≥ 0")
		}
		*dst = *v
		return nil
	}
	if fp.Enabled != nil {
		if n == PolicySensorLoss && !*fp.Enabled {
			return p, bad(field+".enabled", "sensor-loss cannot be disabled", "the governor fails closed; disable the policies that need a missing sensor instead")
		}
		p.Enabled = *fp.Enabled
	}
	clearS, firstS := p.ClearAfter.Seconds(), p.FirstToken.Seconds()
	for _, e := range []error{
		set("limit", spec.limit, fp.Limit, &p.Limit),
		set("band", spec.band, fp.Band, &p.Band),
		set("shutdown", spec.shutdown, fp.Shutdown, &p.Shutdown),
		set("clear_after_s", spec.clearAfter, fp.ClearAfterS, &clearS),
		set("first_token_s", spec.firstToken, fp.FirstTokenS, &firstS),
	} {
		if e != nil {
			return p, e
		}
	}
	if clearS > 86400 {
		return p, bad(field+".clear_after_s", fmt.Sprintf("%v s is over a day", clearS), "use seconds up to 86400")
	}
	if firstS > 86400 {
		return p, bad(field+".first_token_s", fmt.Sprintf("%v s is over a day", firstS), "use seconds up to 86400")
	}
	p.ClearAfter = time.Duration(clearS * float64(time.Second))
	p.FirstToken = time.Duration(firstS * float64(time.Second))
	return p, nil
}

func (s fieldSpec) names() []string {
	out := []string{"enabled"}
	if s.limit {
		out = append(out, "limit")
	}
	if s.band {
		out = append(out, "band")
	}
	if s.shutdown {
		out = append(out, "shutdown")
	}
	if s.clearAfter {
		out = append(out, "clear_after_s")
	}
	if s.firstToken {
		out = append(out, "first_token_s")
	}
	return out
}

// validate checks cross-field rules that hold whatever the source.
func (c Config) validate(name string) error {
	bad := func(field, msg, fix string) error {
		return &ConfigError{File: name, Field: field, Msg: msg, Fix: fix}
	}
	if c.Poll > c.Heartbeat {
		return bad("poll_ms", fmt.Sprintf("%v is longer than heartbeat_ms %v", c.Poll, c.Heartbeat), "the loop beats once per poll; keep poll_ms ≤ heartbeat_ms")
	}
	if c.ReadTimeout > c.Poll {
		return bad("read_timeout_ms", fmt.Sprintf("%v is longer than poll_ms %v", c.ReadTimeout, c.Poll), "a read must finish within one poll")
	}
	for _, n := range PolicyNames() {
		p := c.Policies[n]
		f := "policies." + n
		switch n {
		case PolicyOverTemperature:
			if p.Limit <= 0 {
				return bad(f+".limit", fmt.Sprintf("%v °C cannot be a temperature limit", p.Limit), "use the card's slowdown temperature or a few °C below it")
			}
			if p.Limit >= p.Shutdown {
				return bad(f+".limit", fmt.Sprintf("%v °C is at or above the shutdown threshold %v °C", p.Limit, p.Shutdown), "set limit below shutdown, e.g. the card's slowdown temperature")
			}
			if p.Band >= p.Limit {
				return bad(f+".band", fmt.Sprintf("band %v is not below limit %v", p.Band, p.Limit), "use a band of a few °C")
			}
		case PolicyOverPower, PolicyCardMemory:
			if p.Limit <= 0 || p.Limit > 2 {
				return bad(f+".limit", fmt.Sprintf("%v is not a usable fraction", p.Limit), "use a fraction of the limit between 0 and 2, e.g. 1.05")
			}
			if p.Band >= p.Limit {
				return bad(f+".band", fmt.Sprintf("band %v is not below limit %v", p.Band, p.Limit), "use a band like 0.05")
			}
		case PolicyHostMemory:
			if p.Limit <= 0 || p.Limit > 1 {
				return bad(f+".limit", fmt.Sprintf("%v is not a used fraction of RAM", p.Limit), "use a fraction between 0 and 1, e.g. 0.95")
			}
			if p.Band >= p.Limit {
				return bad(f+".band", fmt.Sprintf("band %v is not below limit %v", p.Band, p.Limit), "use a band like 0.03")
			}
		case PolicyHungRuntime, PolicySensorLoss:
			if n == PolicyHungRuntime && p.FirstToken <= 0 {
				return bad(f+".first_token_s", "0 s would trip before any prompt is read", "use seconds > 0, longer than prompt processing takes")
			}
			if p.Limit <= 0 {
				return bad(f+".limit", fmt.Sprintf("%v s would trip at once", p.Limit), "use seconds > 0")
			}
		case PolicyLowDisk:
			if p.Limit <= 0 {
				return bad(f+".limit", "a free-space floor of 0 bytes never acts", "use bytes, e.g. 2147483648")
			}
		}
	}
	if sl := c.Policies[PolicySensorLoss].Limit; sl*float64(time.Second) < float64(c.Poll) {
		return bad("policies.sensor-loss.limit", fmt.Sprintf("%v s is shorter than one poll (%v)", sl, c.Poll), "use at least poll_ms/1000, typically 3-4 polls")
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// jsonMsg turns a decoder error into a message without Go type names.
func jsonMsg(err error) string { return jsonerr.Message(err) }
