package preflight

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"rig/internal/gguf"
)

// Outcomes of a verdict.
const (
	OutcomeFits      = "fits"
	OutcomeDoesntFit = "doesn't fit at this card"
)

// Verdict is the preflight's decision for one model at one profile on one
// runtime. It is decided before any run and stored; a run is never
// downgraded to make it fit.
type Verdict struct {
	Outcome   string     `json:"outcome"`
	Fits      bool       `json:"fits"`
	Reason    string     `json:"reason"`
	Model     string     `json:"model"`
	Runtime   string     `json:"runtime"`
	Profile   Profile    `json:"profile"`
	Predicted Size       `json:"predicted"`     // what must fit the card
	Budget    Size       `json:"budget"`        // the card's memory
	Margin    int64      `json:"margin_bytes"`  // budget - predicted; negative when over
	Needed    int64      `json:"needed_margin"` // the smallest margin rig trusts: the model's error × predicted
	HostNeed  Size       `json:"host_need,omitempty"`
	Estimate  Estimate   `json:"estimate"`
	Evidence  []Evidence `json:"evidence,omitempty"`
	DecidedAt time.Time  `json:"decided_at"`
}

// Evidence is a runtime's own answer about fit (llama.cpp's fit dry run),
// kept beside rig's prediction.
type Evidence struct {
	Source string `json:"source"`
	Says   string `json:"says"`
	Output string `json:"output,omitempty"`
}

// Decide turns an estimate into a verdict. It refuses to say "fits" when the
// margin is smaller than the preflight's own measured error, since then the
// prediction cannot tell fitting from not.
func Decide(e Estimate, p Profile, now time.Time) Verdict {
	v := Verdict{Model: e.Model, Runtime: e.Runtime, Profile: p, Predicted: e.Card, Budget: p.CardMemory, Estimate: e, DecidedAt: now.UTC()}
	// Both sizes are clamped to int64 first so that the margin cannot wrap
	// into a positive one for an absurd prediction.
	v.Margin = int64(min(p.CardMemory, math.MaxInt64)) - int64(min(e.Card, math.MaxInt64))
	v.Needed = math.MaxInt64
	if need := e.RelError * float64(e.Card); need >= 0 && need < math.MaxInt64 {
		v.Needed = int64(need)
	}
	switch {
	case v.Margin < 0:
		v.Reason = fmt.Sprintf("needs %s on the card (weights %s, KV cache %s at %d cells%s, compute %s, runtime %s), the card has %s: %s short",
			e.Card, e.Weights, e.KVCache, e.KVCells, slotsNote(p), e.Compute, e.Overhead, p.CardMemory, Size(-v.Margin))
	case v.Margin < v.Needed:
		v.Reason = fmt.Sprintf("needs %s of the card's %s; the margin %s is below %s of %.0f%% (%s), so fitting is not shown",
			e.Card, p.CardMemory, Size(v.Margin), marginName(e), 100*e.RelError, Size(v.Needed))
	case p.HostMemory > 0 && e.Host > p.HostMemory:
		v.Reason = fmt.Sprintf("the host part needs %s, the profile's host has %s", e.Host, p.HostMemory)
		v.HostNeed = e.Host
	default:
		v.Fits = true
		held := "the measured error"
		if e.Runtime == RuntimeOpenAIServer {
			held = marginName(e)
		}
		v.Reason = fmt.Sprintf("needs %s of %s, margin %s (%.0f%%) exceeds %s %.0f%%",
			e.Card, p.CardMemory, Size(v.Margin), 100*float64(v.Margin)/float64(max(e.Card, 1)), held, 100*e.RelError)
	}
	v.Outcome = OutcomeDoesntFit
	if v.Fits {
		v.Outcome = OutcomeFits
	}
	return v
}

// marginName names the margin a verdict holds the estimate to: the
// preflight's measured error, or for a generic server, whose estimate is not
// calibrated, the margin set for what it leaves out (ServerRelError).
func marginName(e Estimate) string {
	if e.Runtime == RuntimeOpenAIServer {
		return "the margin for a server rig does not build"
	}
	return "the preflight's measured error"
}

// Print writes the verdict as `rig preflight` shows it.
func (v Verdict) Print(w io.Writer) error {
	e := v.Estimate
	p := v.Profile
	_, err := fmt.Fprintf(w, `preflight: %s
  model    %s (%s, %d layers%s)
  runtime  %s
  profile  %s: card %s%s, context %d × %d slot(s), KV %s, offload %s
  weights  %s
  KV cache %s (%d cells%s)
  compute  %s
  output   %s
  overhead %s
  needs    %s on the card%s
  margin   %s (rig trusts margins above %.0f%% = %s; calibrated %s)
verdict: %s — %s
`, v.Model, e.Model, e.Arch, e.Layers, swaNote(e), e.Runtime, p.Name, p.CardMemory, simNote(p), p.Context, p.Slots(), p.CacheType(), offloadNote(p),
		e.Weights, e.KVCache, e.KVCells, swaCellsNote(e), e.Compute, e.Output, e.Overhead, e.Card, hostNote(e),
		signedSize(v.Margin), 100*e.RelError, Size(max(v.Needed, 0)), e.Calibrated, v.Outcome, v.Reason)
	if err != nil {
		return err
	}
	for _, n := range e.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, ev := range v.Evidence {
		fmt.Fprintf(w, "evidence (%s): %s\n", ev.Source, ev.Says)
	}
	if p.Simulated {
		fmt.Fprintf(w, "note: %s\n", SimulatedCaveat)
	}
	return nil
}

// JSON is the verdict as the study store keeps it.
func (v Verdict) JSON() ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

func swaNote(e Estimate) string {
	if e.SWALayers == 0 {
		return ""
	}
	return fmt.Sprintf(", %d sliding-window", e.SWALayers)
}

func swaCellsNote(e Estimate) string {
	if e.SWALayers == 0 {
		return ""
	}
	return fmt.Sprintf("; %d cells on sliding-window layers", e.SWACells)
}

func simNote(p Profile) string {
	if p.Simulated {
		return " (simulated)"
	}
	return fmt.Sprintf(" (nvml:%d)", p.CardIndex)
}

func offloadNote(p Profile) string {
	if p.OffloadLayers == OffloadAll || p.Simulated {
		return "all layers"
	}
	return fmt.Sprintf("%d layers", p.OffloadLayers)
}

func hostNote(e Estimate) string {
	if e.Host == 0 {
		return ""
	}
	return fmt.Sprintf(", %s on the host", e.Host)
}

func signedSize(n int64) string {
	if n < 0 {
		return "-" + Size(-n).String()
	}
	return Size(n).String()
}

// Run is `rig preflight MODEL --profile ...`: read the model, predict, decide,
// print. cal may be nil for the committed calibration.
func Run(ctx context.Context, w io.Writer, modelPath string, p Profile, runtime string, cal *Calibration) (Verdict, error) {
	if err := ctx.Err(); err != nil {
		return Verdict{}, err
	}
	if cal == nil {
		var err error
		if cal, err = DefaultCalibration(); err != nil {
			return Verdict{}, err
		}
	}
	f, err := gguf.Open(modelPath)
	if err != nil {
		return Verdict{}, err
	}
	e, err := Predict(f, p, runtime, cal)
	if err != nil {
		return Verdict{}, err
	}
	v := Decide(e, p, time.Now())
	return v, v.Print(w)
}

// slotsNote says, for a profile of several slots, that the KV cache holds a
// whole context for each: the arm is not run at less to make it fit.
func slotsNote(p Profile) string {
	if p.Slots() <= 1 {
		return ""
	}
	return fmt.Sprintf(": %d slots × context %d, each trial keeping its whole pinned context", p.Slots(), p.Context)
}
