package report

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Data)
		field  string // the error must name this field
	}{
		{"pair with an unknown arm", func(d *Data) { d.Kinds[0].Pairs[1].Challenger = "llama-9b" }, `kinds[0].pairs[1].challenger: "llama-9b" is not an arm`},
		{"pair with an unknown baseline", func(d *Data) { d.Kinds[1].Pairs[0].Baseline = "gone" }, `kinds[1].pairs[0].baseline`},
		{"unknown outcome class", func(d *Data) { d.Kinds[0].Pairs[0].Outcome = "winner" }, `kinds[0].pairs[0].outcome: "winner" is not an outcome class`},
		{"sweep shorter than its gates", func(d *Data) { l := &d.Kinds[0].Sweep.Lines[2]; l.PassRate = l.PassRate[:3] }, `kinds[0].sweep.lines[2].pass_rate: 3 values`},
		{"sweep line for an unknown arm", func(d *Data) { d.Kinds[0].Sweep.Lines[0].Arm = "x" }, `kinds[0].sweep.lines[0].arm`},
		{"NaN score", func(d *Data) { d.Kinds[1].Arms[0].Score.Low = math.NaN() }, `kinds[1].arms[0].score.low: NaN is not a number`},
		{"infinite p", func(d *Data) { d.Kinds[0].Pairs[0].PHolm = math.Inf(1) }, `kinds[0].pairs[0].p_holm`},
		{"duplicate arm", func(d *Data) { d.Kinds[0].Arms[1].Arm = d.Kinds[0].Arms[0].Arm }, `kinds[0].arms[1].arm: "qwen2.5-7b-q4" appears twice`},
		{"paired row with a bad change", func(d *Data) { d.Kinds[0].Paired[0].Change = "flipped" }, `kinds[0].paired[0].change`},
		{"failure for an unknown arm", func(d *Data) { d.Kinds[0].Failures[0].Arm = "x" }, `kinds[0].failures[0].arm`},
		{"cost point for an unknown arm", func(d *Data) { d.Kinds[1].Cost.Points[2].Arm = "x" }, `kinds[1].cost.points[2].arm`},
		{"replay status", func(d *Data) { d.Replay.Rows[1].Status = "ok" }, `replay.rows[1].status: "ok"`},
		{"no study name", func(d *Data) { d.Study = "" }, `study: empty`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := SampleData()
			if err := d.Validate(); err != nil {
				t.Fatalf("sample data invalid before the change: %v", err)
			}
			tc.mutate(&d)
			err := d.Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}
