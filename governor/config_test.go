package governor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestParseConfigBadInput(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string // substrings: file, field, fix
	}{
		{"negative limit", `{"policies":{"over-power":{"limit":-1}}}`, []string{"studio.json", "policies.over-power.limit", "-1", "finite number ≥ 0"}},
		{"negative temperature limit", `{"policies":{"over-temperature":{"limit":-5}}}`, []string{"studio.json", "policies.over-temperature.limit", "-5", "finite number ≥ 0"}},
		{"zero temperature limit", `{"policies":{"over-temperature":{"limit":0}}}`, []string{"policies.over-temperature.limit", "cannot be a temperature limit"}},
		{"negative hung-runtime seconds", `{"policies":{"hung-runtime":{"limit":-60}}}`, []string{"policies.hung-runtime.limit", "-60"}},
		{"temperature above shutdown", `{"policies":{"over-temperature":{"limit":95}}}`, []string{"studio.json", "policies.over-temperature.limit", "shutdown threshold 90", "set limit below shutdown"}},
		{"temperature above raised shutdown", `{"policies":{"over-temperature":{"limit":99,"shutdown":98}}}`, []string{"policies.over-temperature.limit", "shutdown threshold 98"}},
		{"unknown policy", `{"policies":{"over-temprature":{"limit":80}}}`, []string{"studio.json", "policies.over-temprature", `unknown policy "over-temprature"`, "known policies:", "over-temperature"}},
		{"field the policy does not use", `{"policies":{"hung-runtime":{"band":3}}}`, []string{"policies.hung-runtime.band", "does not use band", "hung-runtime takes enabled, limit, first_token_s"}},
		{"unknown field in a policy", `{"policies":{"low-disk":{"limt":1}}}`, []string{"policies.low-disk", `unknown field "limt"`}},
		{"unknown top-level field", `{"pol_ms":100}`, []string{"studio.json", `unknown field "pol_ms"`}},
		{"wrong type", `{"poll_ms":"fast"}`, []string{"studio.json", "poll_ms", "a number"}},
		{"not json", `{"poll_ms":`, []string{"studio.json", "JSON"}},
		{"two objects", `{} {}`, []string{"text after the JSON object"}},
		{"host memory over 1", `{"policies":{"host-memory":{"limit":1.5}}}`, []string{"policies.host-memory.limit", "between 0 and 1"}},
		{"band not below limit", `{"policies":{"host-memory":{"limit":0.5,"band":0.6}}}`, []string{"policies.host-memory.band"}},
		{"zero hung limit", `{"policies":{"hung-runtime":{"limit":0}}}`, []string{"policies.hung-runtime.limit", "seconds > 0"}},
		{"zero first token", `{"policies":{"hung-runtime":{"first_token_s":0}}}`, []string{"policies.hung-runtime.first_token_s", "seconds > 0"}},
		{"sensor-loss off", `{"policies":{"sensor-loss":{"enabled":false}}}`, []string{"policies.sensor-loss.enabled", "fails closed"}},
		{"poll slower than heartbeat", `{"poll_ms":2000}`, []string{"poll_ms", "heartbeat_ms"}},
		{"poll too fast", `{"poll_ms":1}`, []string{"poll_ms", "out of range"}},
		{"negative grace", `{"grace_ms":-5}`, []string{"grace_ms", "out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("studio.json", []byte(tt.json))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *ConfigError", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadConfigOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "governor.json")
	body := `{"poll_ms":500,"heartbeat_ms":2000,"policies":{"over-temperature":{"limit":78,"band":4},"gpu-error":{"enabled":false},"cgroup-oom":{"clear_after_s":12}}}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	d := DefaultConfig()
	if c.Poll != 500*time.Millisecond || c.Heartbeat != 2*time.Second {
		t.Errorf("poll %v heartbeat %v", c.Poll, c.Heartbeat)
	}
	if p := c.Policies[PolicyOverTemperature]; p.Limit != 78 || p.Band != 4 || p.Shutdown != d.Policies[PolicyOverTemperature].Shutdown || !p.Enabled {
		t.Errorf("over-temperature = %+v", p)
	}
	if c.Policies[PolicyGPUError].Enabled {
		t.Error("gpu-error still enabled")
	}
	if c.Policies[PolicyCgroupOOM].ClearAfter != 12*time.Second {
		t.Errorf("cgroup-oom clear after %v", c.Policies[PolicyCgroupOOM].ClearAfter)
	}
	if c.Policies[PolicyHostMemory] != d.Policies[PolicyHostMemory] {
		t.Error("an untouched policy changed")
	}
	// The poll-derived defaults follow a slower poll.
	if c.ReadTimeout > c.Poll || c.Policies[PolicySensorLoss].Limit < 4*c.Poll.Seconds() {
		t.Errorf("read timeout %v, sensor-loss %v for poll %v", c.ReadTimeout, c.Policies[PolicySensorLoss].Limit, c.Poll)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{}`,
		`{"poll_ms":250,"heartbeat_ms":1000,"grace_ms":5000,"read_timeout_ms":200}`,
		`{"policies":{"over-temperature":{"limit":80,"band":3,"shutdown":90}}}`,
		`{"policies":{"cgroup-oom":{"clear_after_s":1e308}}}`,
		`{"policies":{"low-disk":{"limit":1e9,"band":-1}}}`,
		`{"policies":{"x":{}}}`,
		`[]`, `null`, `{"policies":null}`, `{"poll_ms":NaN}`,
		"{\n\"poll_ms\": 250,\n\"policies\": {\"\xff\": {}}\n}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fuzz.json", data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.File != "fuzz.json" {
				t.Fatalf("error without the file: %v", err)
			}
			return
		}
		if !utf8.Valid(data) {
			t.Fatal("a config that is not UTF-8 was accepted")
		}
		// Whatever parses must also pass validation and build a governor.
		if err := c.validate("again"); err != nil {
			t.Fatalf("parsed config fails validation: %v", err)
		}
		if _, err := New(Options{Config: c}); err != nil {
			t.Fatalf("parsed config rejected by New: %v", err)
		}
	})
}
