package genrecord

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestCalibrate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noise, ctrl  []Distance
		separable    bool
		falseAccepts int
		falseRejects int
		tokenBetween [2]float64 // tolerance strictly inside (lo, hi)
	}{
		{
			name:         "exact stack, edits and swaps far away",
			noise:        []Distance{{Label: "n1"}, {Label: "n2"}},
			ctrl:         []Distance{{Label: "edit", Token: 9, Row: 1.2}, {Label: "swap", Changed: true}},
			separable:    true,
			tokenBetween: [2]float64{0, 9},
		},
		{
			name:         "noisy stack, quant control close",
			noise:        []Distance{{Label: "n1", Token: 1e-4, Row: 1e-5}, {Label: "n2", Token: 3e-4, Row: 2e-5}},
			ctrl:         []Distance{{Label: "q4", Token: 0.05, Row: 0.01}, {Label: "edit", Token: 4, Row: 0.5}},
			separable:    true,
			tokenBetween: [2]float64{3e-4, 0.05},
		},
		{
			name:         "overlap",
			noise:        []Distance{{Label: "n1", Token: 0.1, Row: 0.05}},
			ctrl:         []Distance{{Label: "q8", Token: 0.05, Row: 0.01}, {Label: "edit", Token: 4, Row: 0.5}},
			separable:    false,
			falseAccepts: 1,
			tokenBetween: [2]float64{0.09, 0.11},
		},
		{
			name:         "nondeterministic stack rejects itself",
			noise:        []Distance{{Label: "n1"}, {Label: "flip", Changed: true}},
			ctrl:         []Distance{{Label: "edit", Token: 4, Row: 0.5}},
			separable:    false,
			falseRejects: 1,
			tokenBetween: [2]float64{0, 4},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Calibrate(tc.noise, tc.ctrl)
			if err != nil {
				t.Fatal(err)
			}
			if c.Separable != tc.separable || c.FalseAccepts != tc.falseAccepts || c.FalseRejects != tc.falseRejects {
				t.Fatalf("separable %v FA %d FR %d, want %v %d %d", c.Separable, c.FalseAccepts, c.FalseRejects, tc.separable, tc.falseAccepts, tc.falseRejects)
			}
			if !(c.Tolerance.Token > tc.tokenBetween[0] && c.Tolerance.Token < tc.tokenBetween[1]) && !(tc.tokenBetween[0] == c.Tolerance.Token && !tc.separable) {
				t.Errorf("token tolerance %g not in (%g, %g)", c.Tolerance.Token, tc.tokenBetween[0], tc.tokenBetween[1])
			}
			if got := c.FalseAcceptRate * float64(c.ControlRows); got != float64(c.FalseAccepts) {
				t.Errorf("false-accept rate %g inconsistent with %d/%d", c.FalseAcceptRate, c.FalseAccepts, c.ControlRows)
			}
			var b bytes.Buffer
			c.WriteText(&b)
			if !strings.Contains(b.String(), "false-accept rate") || tc.separable == strings.Contains(b.String(), "NOT SEPARABLE") {
				t.Errorf("text:\n%s", b.String())
			}
		})
	}
	if _, err := Calibrate(nil, []Distance{{Token: 1}}); !errors.Is(err, ErrCalibrationInput) {
		t.Errorf("no noise rows: %v", err)
	}
}

// TestCalibrateFromReplays feeds Calibrate distances measured by Compare on
// fakeModel rescoring, as the lead does with real runs.
func TestCalibrateFromReplays(t *testing.T) {
	smol := fakeModel{salt: "smol", vocab: 40}
	other := fakeModel{salt: "smol-q4", vocab: 40}
	var noise, ctrl []Distance
	for i, r := range genuineRows(smol, 10) {
		noise = append(noise, Measure(r.Output, smol.rescore(r)))
		ctrl = append(ctrl, Measure(r.Output, other.rescore(r)))
		e := editToken(r, i%len(r.Output))
		ctrl = append(ctrl, Measure(e.Output, smol.rescore(e)))
	}
	c, err := Calibrate(noise, ctrl)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Separable || c.NoiseToken != 0 || c.Tolerance.Token <= 0 {
		t.Fatalf("calibration %+v: want separable with a zero noise floor and a positive tolerance", c)
	}
}
