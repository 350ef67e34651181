package preflight

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"rig/internal/jsonerr"
)

// RuntimeCalibration holds the constants of one runtime's memory model that
// only a measurement can give. The preflight bench (bench/memory) fits them.
type RuntimeCalibration struct {
	BaseBytes      float64 `json:"base_bytes"`      // the runtime's own resident size: binary, libraries, threads
	PerVocabBytes  float64 `json:"per_vocab_bytes"` // tokenizer tables per vocabulary entry
	ComputeScale   float64 `json:"compute_scale"`   // multiplier on the modelled compute buffer
	UBatch         int     `json:"ubatch"`          // physical batch the runtime reserves compute for
	CtxPad         int     `json:"ctx_pad"`         // KV cells are rounded up to this
	FlashAttention bool    `json:"flash_attention"` // whether the runtime runs with flash attention here
	// RelError is the error a prediction is trusted to: the worst
	// |predicted-measured|/measured of the fit plus the widest spread between
	// repeated runs of one configuration, because a single later run can land
	// anywhere in that spread.
	RelError     float64 `json:"relative_error"`
	RepeatSpread float64 `json:"repeat_spread,omitempty"` // widest (max-min)/mean over repeats of one configuration; 0 = not repeated
	Runs         int     `json:"runs"`                    // measurements behind the constants
	// CardContextBytes is what a card holds for the process before any
	// model buffer: the CUDA context, cuBLAS's workspace and the pool's
	// first reservations (per-process card memory through NVML, less the
	// buffers the runtime logged). Zero on the CPU backend.
	CardContextBytes float64 `json:"card_context_bytes,omitempty"`
}

// ErrUncalibrated marks a runtime and backend with no measured constants:
// the preflight cannot decide, and never says "fits", until
// rig bench preflight has measured them on that backend.
var ErrUncalibrated = errors.New("uncalibrated")

// CalibrationKey is the table's key for a runtime on a backend: the runtime
// alone for the CPU, "llama-server+cuda" for its CUDA build.
func CalibrationKey(runtime, backend string) string {
	if backend == "" || backend == "cpu" {
		return runtime
	}
	return runtime + "+" + backend
}

// Calibration is the table of constants, dated and tied to a machine line.
type Calibration struct {
	Date     string                        `json:"date"`
	Machine  string                        `json:"machine"`
	Source   string                        `json:"source"` // the measured table the constants came from
	Runtimes map[string]RuntimeCalibration `json:"runtimes"`
}

//go:embed calibration.json
var calibrationJSON []byte

// DefaultCalibration is the calibration table committed with rig.
func DefaultCalibration() (*Calibration, error) {
	return parseCalibration(calibrationJSON, "preflight/calibration.json")
}

func parseCalibration(b []byte, name string) (*Calibration, error) {
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %s", name, jsonerr.Message(err))
	}
	if c.Date == "" || c.Machine == "" {
		return nil, fmt.Errorf("%s: date and machine: missing (a calibration is only meaningful for a dated machine line)", name)
	}
	for rt, rc := range c.Runtimes {
		if rc.ComputeScale <= 0 || rc.UBatch <= 0 || rc.CtxPad <= 0 || rc.RelError <= 0 {
			return nil, fmt.Errorf("%s: runtimes.%s: compute_scale, ubatch, ctx_pad and relative_error must be positive", name, rt)
		}
		if strings.Contains(rt, "+") && rc.CardContextBytes <= 0 {
			return nil, fmt.Errorf("%s: runtimes.%s.card_context_bytes: missing (a card backend's calibration must measure what the card holds before any model buffer)", name, rt)
		}
	}
	return &c, nil
}

// For returns the constants of a runtime (a CalibrationKey).
func (c *Calibration) For(runtime string) (RuntimeCalibration, error) {
	rc, ok := c.Runtimes[runtime]
	if !ok {
		names := make([]string, 0, len(c.Runtimes))
		for n := range c.Runtimes {
			names = append(names, n)
		}
		sort.Strings(names)
		if rt, backend, found := strings.Cut(runtime, "+"); found {
			return rc, fmt.Errorf("preflight: %w: %s on the %s backend has no calibration in %s (calibrated: %v); measure it on a card with rig bench preflight --device %s (docs/gpu.md). rig does not size a backend it has not measured",
				ErrUncalibrated, rt, backend, c.Date, names, backend)
		}
		return rc, fmt.Errorf("preflight: %w: runtime %q has no calibration (calibrated: %v; run rig bench preflight)", ErrUncalibrated, runtime, names)
	}
	return rc, nil
}

// Save writes the table as indented JSON.
func (c *Calibration) Save(path string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
