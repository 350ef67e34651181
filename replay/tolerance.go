package replay

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"rig/genrecord"
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

// LoadReplayTolerance reads the tolerance calibrated for runtime from a
// calibration file. A calibration whose genuine rows and controls overlapped
// has no tolerance that separates them, and is refused.
func LoadReplayTolerance(path, runtime string, record genrecord.Pins) (ReplayTolerance, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: %w", path, err)
	}
	var cal ReplayCalibration
	if err := json.Unmarshal(raw, &cal); err != nil {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: not a calibration (%v); write one with rig replay calibrate --out %s", path, err, path)
	}
	if len(cal.Runtimes) == 0 {
		return ReplayTolerance{}, fmt.Errorf("--calibration %s: field runtimes is empty; write one with rig replay calibrate --out %s", path, path)
	}
	var have []string
	for i, rc := range cal.Runtimes {
		have = append(have, rc.Runtime)
		if rc.Runtime != runtime {
			continue
		}
		c := rc.Calibration
		field := fmt.Sprintf("runtimes[%d].calibration", i)
		if !c.Separable {
			return ReplayTolerance{}, fmt.Errorf("--calibration %s: %s.separable is false: on %s its genuine rows and controls overlapped, so no tolerance separates them; calibrate again (more rows) before replaying with it", path, field, runtime)
		}
		if c.Tolerance.Token < 0 || c.Tolerance.Row < 0 {
			return ReplayTolerance{}, fmt.Errorf("--calibration %s: %s.tolerance is negative (%+v); write it again with rig replay calibrate", path, field, c.Tolerance)
		}
		t := ReplayTolerance{Tolerance: c.Tolerance,
			Source: fmt.Sprintf("%s, %s on %s: %d genuine rows, %d controls, false accepts %d, false rejects %d", path, cal.Model, runtime, c.NoiseRows, c.ControlRows, c.FalseAccepts, c.FalseRejects)}
		if rc.Pins.BinarySHA256 != "" && record.BinarySHA256 != "" && rc.Pins.BinarySHA256 != record.BinarySHA256 {
			t.Warning = fmt.Sprintf("the calibration in %s was measured on another %s binary (sha256 %.12s, the record's %.12s); its tolerance may not hold for this stack", path, runtime, rc.Pins.BinarySHA256, record.BinarySHA256)
		}
		return t, nil
	}
	return ReplayTolerance{}, fmt.Errorf("--calibration %s: no calibration for %s (it has: %s); run rig replay calibrate --runtime %s", path, runtime, strings.Join(have, ", "), runtime)
}

// errToleranceTwice is returned when a tolerance is given both ways.
var errToleranceTwice = errors.New("give the tolerance either with --calibration or with --tolerance-token/--tolerance-row, not both")
