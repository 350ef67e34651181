package analysis

import (
	"fmt"
	"sort"
)

// Cost under load. Trials of an arm with pins.slots > 1 ran several at
// once on one runtime: each one's own wall time is its latency under that
// load, not what it cost, and the card's (or the host's) energy counter
// over its interval counted its neighbours' work too. Summing either would
// charge the runtime's time N times over. So the trials that overlapped in
// time (a round: what one start of the runtime served together) share the
// round's time and energy: the round is cut at every trial's start and
// end, and in each piece every trial then in flight is charged the piece's
// time and energy in proportion to its rate of tokens (its prompt and
// output tokens over its own wall time; a trial that reports none counts
// as one token). A trial that overlapped nothing is charged exactly its
// own wall time and energy, so one slot gives what it always gave.

// charge is what one trial is charged once its round is apportioned.
type charge struct {
	seconds float64 // its share of the runtime's time
	joules  float64 // its share of the counter's (or the estimate's) energy
	// peak is the runtime's peak memory over the round: the same for every
	// trial of the round, since they shared one process.
	peak   int64
	shared bool // it overlapped another trial
}

// timed reports whether t can be placed in time.
func timed(t Trial) bool { return !t.Missing && t.StartMS > 0 && t.WallSeconds > 0 }

// chargesOf apportions arm's trials (every job kind: they share the arm's
// runtime) by index into trials. Preempted trials take their share of a
// round too, so that the others are not charged for work that was thrown
// away; the cost summaries then leave them out.
func chargesOf(trials []Trial, arm string) map[int]charge {
	var idx []int
	for i, t := range trials {
		if t.Arm == arm && timed(t) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return trials[idx[a]].StartMS < trials[idx[b]].StartMS })
	out := make(map[int]charge, len(idx))
	for lo := 0; lo < len(idx); {
		hi, end := lo+1, endMS(trials[idx[lo]])
		for hi < len(idx) && float64(trials[idx[hi]].StartMS) < end {
			end = max(end, endMS(trials[idx[hi]]))
			hi++
		}
		apportion(trials, idx[lo:hi], out)
		lo = hi
	}
	return out
}

func endMS(t Trial) float64 { return float64(t.StartMS) + t.WallSeconds*1000 }

// apportion charges one round: the trials of round overlapped one another.
func apportion(trials []Trial, round []int, out map[int]charge) {
	var peak int64
	for _, i := range round {
		peak = max(peak, trials[i].PeakMemoryBytes)
	}
	if len(round) == 1 {
		t := trials[round[0]]
		out[round[0]] = charge{seconds: t.WallSeconds, joules: t.EnergyJoules, peak: peak}
		return
	}
	var cuts []float64
	for _, i := range round {
		cuts = append(cuts, float64(trials[i].StartMS), endMS(trials[i]))
	}
	sort.Float64s(cuts)
	acc := make(map[int]*charge, len(round))
	for _, i := range round {
		acc[i] = &charge{peak: peak, shared: true}
	}
	for c := 1; c < len(cuts); c++ {
		a, b := cuts[c-1], cuts[c]
		if b <= a {
			continue
		}
		var rate, power float64
		var in []int
		for _, i := range round {
			if t := trials[i]; float64(t.StartMS) <= a && endMS(t) >= b {
				in = append(in, i)
				rate += tokenRate(t)
				power += t.EnergyJoules / t.WallSeconds
			}
		}
		if len(in) == 0 {
			continue
		}
		// Every trial in flight read the same counter over this piece:
		// their mean power is the piece's.
		power /= float64(len(in))
		dur := (b - a) / 1000
		for _, i := range in {
			share := tokenRate(trials[i]) / rate
			acc[i].seconds += dur * share
			acc[i].joules += power * dur * share
		}
	}
	for i, c := range acc {
		out[i] = *c
	}
}

// tokenRate is the trial's tokens per second over its own wall time, the
// weight of its share of a piece of its round.
func tokenRate(t Trial) float64 { return float64(max(t.Tokens, 1)) / t.WallSeconds }

// Load is an arm's throughput in a job kind: how much work its runtime did
// per second of the time it was serving the arm's scored trials (the sum
// of their charges, so the time of its rounds less preempted trials'
// shares), at its slot count.
type Load struct {
	// Slots is the arm's pins.slots as its receipts recorded it.
	Slots int `json:"slots"`
	// BusySeconds is the sum of the scored trials' charged seconds.
	BusySeconds Num `json:"busy_seconds"`
	TrialsPerS  Num `json:"trials_per_s"`
	// OutputTokS is output tokens per busy second, every slot together.
	OutputTokS Num `json:"output_tok_s"`
	// WallP50Seconds is the median of the trials' own request wall times:
	// the latency a caller sees under this load.
	WallP50Seconds Num `json:"wall_p50_seconds"`
	// Shared counts the scored trials that ran beside another on the
	// runtime (their time, energy and peak memory are apportioned).
	Shared int `json:"shared"`
}

// loadOf reads arm's load in kind (every kind when empty) from its charges.
func loadOf(trials []Trial, ch map[int]charge, arm, kind string) Load {
	var busy float64
	var n, out int
	l := Load{Slots: 1}
	var walls []float64
	for i, t := range trials {
		if t.Arm != arm || (kind != "" && t.JobKind != kind) || t.Missing || t.Preempted {
			continue
		}
		l.Slots = max(l.Slots, t.Slots)
		c, ok := ch[i]
		if !ok {
			continue
		}
		n++
		busy += c.seconds
		out += t.OutputTokens
		walls = append(walls, t.WallSeconds)
		if c.shared {
			l.Shared++
		}
	}
	l.BusySeconds, l.TrialsPerS, l.OutputTokS, l.WallP50Seconds = Num(busy), nan(), nan(), nan()
	if n > 0 && busy > 0 {
		l.TrialsPerS = Num(float64(n) / busy)
		if out > 0 {
			l.OutputTokS = Num(float64(out) / busy)
		}
	}
	sort.Float64s(walls)
	if len(walls) > 0 {
		l.WallP50Seconds = Num(quantile(walls, 0.5))
	}
	return l
}

// loadNote is what a cost shared by trials in flight together means, for
// the report beside the figures; empty when no trial shared its runtime.
func loadNote(l Load) string {
	if l.Shared == 0 {
		return ""
	}
	return fmt.Sprintf("%d trials ran beside others on the runtime (slots %d): wall time and energy per trial are each one's share of its round's time and counter by its share of the tokens; peak memory is the runtime's over the round, the same for every trial in it", l.Shared, l.Slots)
}
