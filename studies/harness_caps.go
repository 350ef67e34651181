package studies

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// AiderCaps are the caps in force for one Aider trial: the runner hands them
// to the harness as they are.
type AiderCaps struct {
	Turns  int           `json:"turns"`  // model calls per task
	Wall   time.Duration `json:"wall"`   // whole run
	Tokens int           `json:"tokens"` // output tokens summed over calls
}

// Harness caps held equal across every Aider arm of a job kind, unless its
// harness_caps say otherwise. Small models get one message and up to two
// reflections (test-fix turns) within two minutes.
var defaultAiderCaps = AiderCaps{Turns: 3, Wall: 2 * time.Minute, Tokens: 2048}

// AutoWall, as harness_caps.wall, derives the wall cap from the speed this
// machine's validation run measured, so that the turn and token caps bound
// the work and the wall only stops a run that hangs. A fixed wall censors a
// different amount of work on a slower machine; a derived one does not.
const AutoWall = "auto"

// AutoWallMargin multiplies the measured worst case of a trial (every turn
// taken, every allowed token written) to give its derived wall: one run
// varies by tens of percent with what else the machine does, never by two.
const AutoWallMargin = 2.0

// reflectionTokens is what each later Aider turn adds to its prompt besides
// the previous answer: Aider's note of what failed.
const reflectionTokens = 256

// aiderPromptTokens prices an Aider call whose prompt was never measured:
// Aider's system prompt, its examples and the files come to about this.
const aiderPromptTokens = 2048

// Validation runs are short by construction: one task, one model call of at
// most ValidationStopCap output tokens. They show that the record, the
// runtime and the containment read correctly; a benchmark they are not, so
// their wall is generous enough for the slowest machine rig runs on.
const ValidationStopCap = 64

var ValidationCaps = AiderCaps{Turns: 1, Tokens: ValidationStopCap, Wall: 15 * time.Minute}

// DescribeCaps is how caps read in validation records, receipts and messages.
func DescribeCaps(c AiderCaps) string {
	return fmt.Sprintf("turns %d, output tokens %d, wall %s", c.Turns, c.Tokens, c.Wall)
}

// AiderCapsFor are the caps of the named job kind: its harness_caps over the
// defaults. The design was validated, so a fixed wall parses; an auto wall is
// left at zero here, for the execution to derive (see deriveWalls).
func (d *Design) AiderCapsFor(jobKind string) AiderCaps {
	caps := defaultAiderCaps
	for _, jk := range d.JobKinds {
		if jk.Name != jobKind || jk.HarnessCaps == nil {
			continue
		}
		if jk.HarnessCaps.Turns > 0 {
			caps.Turns = jk.HarnessCaps.Turns
		}
		if jk.HarnessCaps.Tokens > 0 {
			caps.Tokens = jk.HarnessCaps.Tokens
		}
		if jk.HarnessCaps.Wall == AutoWall {
			caps.Wall = 0
		} else if w, err := time.ParseDuration(jk.HarnessCaps.Wall); err == nil && w > 0 {
			caps.Wall = w
		}
	}
	return caps
}

// AutoWallJobKinds names the job kinds whose wall is derived, in design order.
func (d *Design) AutoWallJobKinds() []string {
	var out []string
	for _, jk := range d.JobKinds {
		if jk.HarnessCaps != nil && jk.HarnessCaps.Wall == AutoWall {
			out = append(out, jk.Name)
		}
	}
	return out
}

// WallDerivation is how one job kind's auto wall was derived.
type WallDerivation struct {
	JobKind string        `json:"job_kind"`
	Wall    time.Duration `json:"wall"`
	// Slowest is the arm whose worst case set the wall; the wall is the same
	// for every arm of the job kind, as every harness cap is.
	Slowest   string        `json:"slowest_arm"`
	WorstCase time.Duration `json:"worst_case"`
	Margin    float64       `json:"margin"`
	Why       string        `json:"why"`
}

// String is the line the dry run and the run print.
func (w WallDerivation) String() string {
	return fmt.Sprintf("%s: wall cap %s = %.0f× the worst case %s of %s (%s)", w.JobKind, w.Wall, w.Margin, w.WorstCase.Round(time.Second), w.Slowest, w.Why)
}

// DeriveWalls gives each auto-wall job kind its wall: the margin times the
// slowest arm's worst case, which is every turn taken with every allowed
// output token written, at the speed measured on this machine.
func DeriveWalls(d *Design, speeds SpeedTable) (map[string]WallDerivation, error) {
	out := map[string]WallDerivation{}
	for _, name := range d.AutoWallJobKinds() {
		caps := d.AiderCapsFor(name)
		var best WallDerivation
		var missing []string
		for _, a := range d.Arms {
			if !a.Runtime.Aider() || (len(a.JobKinds) > 0 && !slices.Contains(a.JobKinds, name)) {
				continue
			}
			sp, ok := speeds[a.Name]
			if !ok || sp.GenTokensPerSec <= 0 || sp.PromptTokensPerSec <= 0 {
				missing = append(missing, a.Name)
				continue
			}
			worst, why := worstCase(caps, a.Pins.StopCap, sp)
			if worst > best.WorstCase {
				best = WallDerivation{JobKind: name, Slowest: a.Name, WorstCase: worst, Margin: AutoWallMargin, Why: why}
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return nil, fmt.Errorf("job_kinds %s: harness_caps.wall is %q, and no speed was measured for %s on this machine (run rig study validate first, or give harness_caps.wall a duration such as \"10m\")",
				name, AutoWall, strings.Join(missing, ", "))
		}
		if best.Slowest == "" {
			continue // no Aider arm runs this job kind: the wall binds nothing
		}
		wall := time.Duration(best.Margin * float64(best.WorstCase))
		wall = max(time.Minute, (wall + 9*time.Second).Truncate(10*time.Second))
		best.Wall = wall
		out[name] = best
	}
	return out, nil
}

// worstCase is the longest one trial may take within its turn and token caps:
// each call writes up to the stop cap, the calls stop once the token cap is
// reached, and each later prompt carries the earlier answers.
func worstCase(c AiderCaps, stopCap int, sp Speed) (time.Duration, string) {
	if stopCap <= 0 {
		stopCap = c.Tokens
	}
	turns := max(1, c.Turns)
	output := min(turns*stopCap, c.Tokens-1+stopCap)
	first := sp.PromptTokens
	if first <= 0 {
		first = aiderPromptTokens
	}
	prompt := float64(turns)*first + float64(turns*(turns-1)/2)*float64(stopCap+reflectionTokens)
	secs := sp.OverheadSeconds + prompt/sp.PromptTokensPerSec + float64(output)/sp.GenTokensPerSec
	d := time.Duration(math.Ceil(secs)) * time.Second
	why := fmt.Sprintf("%d turns, ≤ %d output tokens at %.1f tok/s, ≤ %.0f prompt tokens at %.0f tok/s, %.0fs harness start; %s",
		turns, output, sp.GenTokensPerSec, prompt, sp.PromptTokensPerSec, sp.OverheadSeconds, sp.Source)
	return d, why
}
