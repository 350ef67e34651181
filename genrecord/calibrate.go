package genrecord

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// Distance is how far one re-scored row moved from its record, independent
// of any tolerance. Changed means a token differed or steps were missing:
// caught whatever the tolerance.
type Distance struct {
	Label   string  `json:"label"`
	Changed bool    `json:"changed"`
	Token   float64 `json:"token_nats"`    // largest per-step |Δ|
	Row     float64 `json:"row_mean_nats"` // mean per-step |Δ|
}

// Measure compares re-scored steps with recorded ones and returns their
// distance.
func Measure(expected, observed []Step) Distance {
	return Compare(expected, observed, Tolerance{}).Distance("")
}

// Catches reports whether replay under t fails a row at distance d.
func (t Tolerance) Catches(d Distance) bool { return t.caught(d) }

// caught applies the replay rule to a distance.
func (t Tolerance) caught(d Distance) bool {
	return d.Changed || d.Token > t.Token || d.Row > t.Row
}

// calibrationFloor keeps the log-space midpoint finite when the noise
// floor is exactly zero, as it is on an unchanged deterministic stack.
const calibrationFloor = 1e-6

// Calibration is a tolerance chosen between a measured noise floor and
// measured positive controls, with the error rates it had on them.
type Calibration struct {
	Tolerance       Tolerance `json:"tolerance"`
	NoiseRows       int       `json:"noise_rows"`
	ControlRows     int       `json:"control_rows"`
	NoiseToken      float64   `json:"noise_token_max_nats"`
	NoiseRow        float64   `json:"noise_row_max_nats"`
	ControlToken    float64   `json:"control_token_min_nats"` // over controls not already Changed
	ControlRow      float64   `json:"control_row_min_nats"`
	ChangedControls int       `json:"changed_controls"` // caught by a token change alone
	FalseAccepts    int       `json:"false_accepts"`
	FalseRejects    int       `json:"false_rejects"`
	FalseAcceptRate float64   `json:"false_accept_rate"`
	FalseRejectRate float64   `json:"false_reject_rate"`
	Separable       bool      `json:"separable"`
	Accepted        []string  `json:"accepted_controls,omitempty"`
	Rejected        []string  `json:"rejected_noise,omitempty"`
}

// ErrCalibrationInput is returned when a side of the calibration is empty.
var ErrCalibrationInput = errors.New("calibration needs both noise and positive-control rows")

// Calibrate chooses a per-token and a per-row tolerance between the noise
// floor (same stack, same record, scored twice) and the positive controls
// (another model, another quant, edited text), each at the geometric mean of
// the largest noise and the smallest control distance, so that neither side
// sits on the boundary. Where the two overlap, the tolerance is set at the
// noise maximum (no genuine row rejected) and the overlap shows up as false
// accepts. The rates are those observed on these inputs, not a guarantee.
func Calibrate(noise, controls []Distance) (Calibration, error) {
	if len(noise) == 0 || len(controls) == 0 {
		return Calibration{}, fmt.Errorf("%w: got %d noise and %d control rows (replay the same record twice on the pinned stack for noise; swap the model or edit tokens for controls)", ErrCalibrationInput, len(noise), len(controls))
	}
	c := Calibration{NoiseRows: len(noise), ControlRows: len(controls)}
	for _, d := range noise {
		if d.Changed {
			continue
		}
		c.NoiseToken = math.Max(c.NoiseToken, d.Token)
		c.NoiseRow = math.Max(c.NoiseRow, d.Row)
	}
	c.ControlToken, c.ControlRow = math.Inf(1), math.Inf(1)
	for _, d := range controls {
		if d.Changed {
			c.ChangedControls++
			continue
		}
		c.ControlToken = math.Min(c.ControlToken, d.Token)
		c.ControlRow = math.Min(c.ControlRow, d.Row)
	}
	c.Tolerance = Tolerance{Token: between(c.NoiseToken, c.ControlToken), Row: between(c.NoiseRow, c.ControlRow)}
	if math.IsInf(c.ControlToken, 1) {
		c.ControlToken, c.ControlRow = 0, 0 // every control changed a token; JSON has no infinity
	}
	for _, d := range noise {
		if c.Tolerance.caught(d) {
			c.FalseRejects++
			c.Rejected = append(c.Rejected, d.Label)
		}
	}
	for _, d := range controls {
		if !c.Tolerance.caught(d) {
			c.FalseAccepts++
			c.Accepted = append(c.Accepted, d.Label)
		}
	}
	sort.Strings(c.Accepted)
	sort.Strings(c.Rejected)
	c.FalseAcceptRate = float64(c.FalseAccepts) / float64(len(controls))
	c.FalseRejectRate = float64(c.FalseRejects) / float64(len(noise))
	c.Separable = c.FalseAccepts == 0 && c.FalseRejects == 0
	return c, nil
}

// between picks a point strictly between lo and hi where one exists.
func between(lo, hi float64) float64 {
	switch {
	case math.IsInf(hi, 1):
		return lo // no control measured on this axis: stay at the noise floor
	case hi <= lo:
		return lo
	}
	a := math.Max(lo, calibrationFloor)
	if a < hi {
		return math.Sqrt(a * hi)
	}
	return (lo + hi) / 2
}

// WriteText prints the calibration for a terminal or a report.
func (c Calibration) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, `replay calibration
  noise floor (same stack, %d rows):   max per-token |Δ| %.6g nats, max row mean %.6g nats
  positive controls (%d rows, %d caught by a token change): min per-token |Δ| %.6g nats, min row mean %.6g nats
  tolerance: per-token %.6g nats, per-row mean %.6g nats
  observed false-accept rate %.4g (%d/%d controls accepted), false-reject rate %.4g (%d/%d genuine rows rejected)
`, c.NoiseRows, c.NoiseToken, c.NoiseRow, c.ControlRows, c.ChangedControls, c.ControlToken, c.ControlRow,
		c.Tolerance.Token, c.Tolerance.Row, c.FalseAcceptRate, c.FalseAccepts, c.ControlRows, c.FalseRejectRate, c.FalseRejects, c.NoiseRows)
	if err != nil {
		return err
	}
	if !c.Separable {
		_, err = fmt.Fprintf(w, "  NOT SEPARABLE on these rows: accepted controls %v, rejected genuine rows %v\n", c.Accepted, c.Rejected)
	}
	return err
}
