package memory

import (
	"errors"
	"fmt"
	"gonum.org/v1/gonum/stat"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"rig/preflight"
)

// fitCalibration sets each measured runtime's overhead (base + per
// vocabulary entry) by least squares on measured − predicted-without-overhead,
// and its relative error to the largest one left. Runtimes without a good
// measurement keep their constants.
func fitCalibration(cal *preflight.Calibration, rows []Row, machine string) (*preflight.Calibration, error) {
	out := *cal
	out.Runtimes = maps.Clone(cal.Runtimes)
	if out.Runtimes == nil {
		out.Runtimes = map[string]preflight.RuntimeCalibration{}
	}
	byRuntime := map[string][]Row{}
	for _, r := range rows {
		if r.Err == "" && r.Measured > 0 {
			byRuntime[r.Runtime] = append(byRuntime[r.Runtime], r)
		}
	}
	if len(byRuntime) == 0 {
		return nil, errors.New("bench: fit: no good measurements")
	}
	var fitted []string
	for _, rt := range slices.Sorted(maps.Keys(byRuntime)) {
		good := byRuntime[rt]
		if len(good) < 2 {
			return nil, fmt.Errorf("bench: fit %s: %d good measurements; need at least 2", rt, len(good))
		}
		xs, ys := make([]float64, len(good)), make([]float64, len(good))
		for i, r := range good {
			xs[i], ys[i] = float64(r.vocab), float64(r.Measured)-float64(r.parts)
		}
		a, b := leastSquares(xs, ys)
		if b < 0 {
			a, b = mean(ys), 0 // a negative per-entry cost is noise: keep a constant
		}
		rc, ok := out.Runtimes[rt]
		if !ok {
			return nil, fmt.Errorf("bench: fit %s: the calibration has no entry to start from (add runtimes.%s with ubatch, ctx_pad and compute_scale)", rt, rt)
		}
		rc.BaseBytes, rc.PerVocabBytes = math.Round(a), math.Round(b*10)/10
		worst := 0.0
		for _, r := range good {
			pred := float64(r.parts) + rc.BaseBytes + rc.PerVocabBytes*float64(r.vocab)
			worst = max(worst, math.Abs(pred-float64(r.Measured))/float64(r.Measured))
		}
		// The trusted margin is the worst error seen plus the repeat spread,
		// rounded up, and never below 3%: a handful of runs cannot show a
		// tighter bound.
		rc.RepeatSpread = repeatSpread(good)
		rc.RelError = max(0.03, math.Ceil((worst+rc.RepeatSpread)*100)/100)
		rc.Runs = len(good)
		out.Runtimes[rt] = rc
		fitted = append(fitted, fmt.Sprintf("%s over %d runs", rt, len(good)))
	}
	out.Date = time.Now().UTC().Format("2006-01-02")
	out.Machine = machine
	out.Source = "rig bench preflight fit: " + strings.Join(fitted, ", ")
	if len(fitted) < len(out.Runtimes) {
		out.Source += "; the other runtimes' constants as before (" + cal.Source + ")"
	}
	return &out, nil
}

// repeatSpread is the widest (max-min)/mean of the peaks measured for one
// configuration (model, context, KV type) measured more than once; 0 when
// none was repeated.
func repeatSpread(rows []Row) float64 {
	type config struct {
		model  string
		ctx    int
		kv     string
		prompt int
	}
	peaks := map[config][]float64{}
	for _, r := range rows {
		if r.Repeat == 0 {
			continue
		}
		k := config{r.Model, r.Context, r.KV, r.PromptSentences}
		peaks[k] = append(peaks[k], float64(r.Measured))
	}
	widest := 0.0
	for _, v := range peaks {
		if len(v) < 2 {
			continue
		}
		widest = max(widest, (slices.Max(v)-slices.Min(v))/mean(v))
	}
	return widest
}

func leastSquares(x, y []float64) (a, b float64) {
	mx, my := mean(x), mean(y)
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	if sxx == 0 {
		return my, 0
	}
	b = sxy / sxx
	return my - b*mx, b
}

func mean(v []float64) float64 { return stat.Mean(v, nil) }
