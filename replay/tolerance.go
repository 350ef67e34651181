package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"rig/genrecord"
	"rig/internal/jsonerr"
	"rig/internal/sizecap"
	"rig/runtimes"
)

// ReplayTolerance is a tolerance read from a calibration written by `rig
// replay calibrate`, with where it came from, for the summary.
type ReplayTolerance struct {
	Tolerance genrecord.Tolerance
	Source    string
	// Warning is set when the calibration was measured on another build of
	// the runtime than the one that made the record.
	Warning string
}

// calibrationCap bounds a calibration file: a tolerance per runtime and
// model, a few kilobytes.
var calibrationCap = sizecap.Cap{What: "replay calibration", Limit: 4 << 20, Fix: "write one with rig replay calibrate --out FILE"}

// LoadReplayTolerance reads the tolerance calibrated for runtime from a
// calibration file. A calibration whose genuine rows and controls overlapped
// has no tolerance that separates them, and is refused.
func LoadReplayTolerance(path, runtime string, record genrecord.Pins, mode string) (ReplayTolerance, error) {
	raw, err := calibrationCap.ReadFile(path)
	if err != nil {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: %w", path, err)
	}
	var cal ReplayCalibration
	if err := json.Unmarshal(raw, &cal); err != nil {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: not a calibration (%s); write one with rig replay calibrate --out %s", path, jsonerr.Message(err), path)
	}
	if got := modeOf(cal.Mode); got != modeOf(mode) {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: field mode is %q, this replay's mode is %q: a tolerance holds only for the mode it was measured in (rig replay calibrate --mode %s)", path, got, modeOf(mode), modeOf(mode))
	}
	if len(cal.Runtimes) == 0 {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: field runtimes is empty; write one with rig replay calibrate --out %s", path, path)
	}
	if cal.Model != "" && record.ModelName != "" && !strings.EqualFold(cal.Model, record.ModelName) && !strings.EqualFold(cal.Control, record.ModelName) && !modelMatches(cal, record) {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: fields model and control_model are %q and %q, the record's model is %q (sha256 %.12s): a tolerance holds only for the models it was measured on", path, cal.Model, cal.Control, record.ModelName, record.ModelSHA256)
	}
	var have []string
	slots := max(record.Slots, 1)
	for i, rc := range cal.Runtimes {
		have = append(have, fmt.Sprintf("%s at %s", rc.Runtime, slotWord(rc.Slots)))
		if rc.Runtime != runtime || max(rc.Slots, 1) != slots {
			// Rows made in a batch drift from a lone sequence's by an
			// amount that depends on the slot count: each count has its own.
			continue
		}
		if runtime == runtimes.OpenAIServerKind && !sameServer(rc.Pins, record) {
			// "openai-server" names any server: a tolerance is one
			// server's, known by its executable and environment.
			have[len(have)-1] += fmt.Sprintf(" (server sha256 %.12s%s%s)", rc.Pins.BinarySHA256, envWord(rc.Pins.EnvSHA256), requestWord(rc.Pins.ServerRequest))
			continue
		}
		c := rc.Calibration
		field := fmt.Sprintf("runtimes[%d].calibration", i)
		if modeOf(mode) == ModePrefill && runtime == "llama-server" {
			// Repacked weights and cut prompts take other kernels than the
			// pass: the drift measured one way says nothing of the other.
			for _, f := range []struct{ field, cal, rec string }{
				{"weight_repack", rc.Pins.WeightRepack, record.WeightRepack},
				{"prompt_checkpoints", rc.Pins.PromptCheckpoints, record.PromptCheckpoints},
			} {
				// Absent is "on": llama-server's default, as older records ran.
				if (f.cal == "off") != (f.rec == "off") {
					return ReplayTolerance{}, fmt.Errorf("--calibration %s: runtimes[%d].pins.%s is %s, the record's is %s: a prefill tolerance holds only for the kernels it was measured on; calibrate on a stack of the record's kind or replay without --calibration", path, i, f.field, pinWord(f.cal), pinWord(f.rec))
				}
			}
		}
		if len(rc.Models) > 0 {
			// Prefill: the record's own model's tolerance.
			found := false
			var names []string
			for j, m := range rc.Models {
				names = append(names, m.Model)
				if m.ModelSHA256 == record.ModelSHA256 || (record.ModelSHA256 == "" && strings.EqualFold(m.Model, record.ModelName)) {
					c, field, found = m.Calibration, fmt.Sprintf("runtimes[%d].models[%d].calibration", i, j), true
				}
			}
			if !found {
				return ReplayTolerance{}, fmt.Errorf("--calibration %s: runtimes[%d].models has no entry for the record's model %q (sha256 %.12s); it has %s", path, i, record.ModelName, record.ModelSHA256, strings.Join(names, ", "))
			}
		}
		if !c.Separable {
			return ReplayTolerance{}, fmt.Errorf("--calibration %s: %s.separable is false: on %s its genuine rows and controls overlapped, so no tolerance separates them; calibrate again (more rows) before replaying with it", path, field, runtime)
		}
		if c.Tolerance.Token < 0 || c.Tolerance.Row < 0 {
			return ReplayTolerance{}, fmt.Errorf("--calibration %s: %s.tolerance is negative (token_nats %v, row_mean_nats %v); write it again with rig replay calibrate", path, field, c.Tolerance.Token, c.Tolerance.Row)
		}
		t := ReplayTolerance{Tolerance: c.Tolerance,
			Source: fmt.Sprintf("%s, %s on %s at %s: %d genuine rows, %d controls, false accepts %d, false rejects %d", path, cal.Model, runtime, slotWord(slots), c.NoiseRows, c.ControlRows, c.FalseAccepts, c.FalseRejects)}
		if rc.Pins.BinarySHA256 != "" && record.BinarySHA256 != "" && rc.Pins.BinarySHA256 != record.BinarySHA256 {
			t.Warning = fmt.Sprintf("the calibration in %s was measured on another %s binary (sha256 %.12s, the record's %.12s); its tolerance may not hold for this stack", path, runtime, rc.Pins.BinarySHA256, record.BinarySHA256)
		}
		return t, nil
	}
	if runtime == runtimes.OpenAIServerKind {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: no calibration for the record's server (openai-server sha256 %.12s%s) at %s (it has: %s); run rig replay calibrate --runtime openai-server --server DESIGN.json --slots %d", path, record.BinarySHA256, envWord(record.EnvSHA256)+requestWord(record.ServerRequest), slotWord(slots), strings.Join(have, ", "), slots)
	}
	return ReplayTolerance{}, fmt.Errorf("--calibration %s: no calibration for %s at %s, the record's (it has: %s); run rig replay calibrate --runtime %s --slots %d", path, runtime, slotWord(slots), strings.Join(have, ", "), runtime, slots)
}

// sameServer says whether a calibration's openai-server is the record's:
// the same executable, the same Python environment (two venvs' python is
// often one interpreter; their packages tell the servers apart) and the
// same request fields (llama-server with and without "cache_prompt": false
// drift differently at replay).
func sameServer(cal, record genrecord.Pins) bool {
	return cal.BinarySHA256 == record.BinarySHA256 && cal.EnvSHA256 == record.EnvSHA256 && cal.ServerRequest == record.ServerRequest
}

// requestWord names the fields a server's spec adds to each request.
func requestWord(fields string) string {
	if fields == "" {
		return ""
	}
	return ", request " + fields
}

// envWord names a Python server's environment digest in a message.
func envWord(sum string) string {
	if sum == "" {
		return ""
	}
	return fmt.Sprintf(", environment %.12s", sum)
}

// errToleranceTwice is returned when a tolerance is given both ways.
var errToleranceTwice = errors.New("give the tolerance either with --calibration or with --tolerance-token/--tolerance-row, not both")

// modelMatches says whether a calibration was measured on the record's
// model file (its runtimes' pins carry the model's sha256).
func modelMatches(cal ReplayCalibration, record genrecord.Pins) bool {
	for _, rc := range cal.Runtimes {
		if rc.Pins.ModelSHA256 != "" && rc.Pins.ModelSHA256 == record.ModelSHA256 {
			return true
		}
	}
	return false
}

// pinWord writes an on/off pin for errors; absent is llama-server's default.
func pinWord(v string) string {
	if v == "" {
		return "absent (on: made before rig pinned it)"
	}
	return fmt.Sprintf("%q", v)
}

// slotWord is a slot count in words; 0 (a calibration or record from
// before slots) is one.
func slotWord(n int) string {
	if n <= 1 {
		return "1 slot"
	}
	return fmt.Sprintf("%d slots", n)
}
