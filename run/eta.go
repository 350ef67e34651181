package run

import (
	"time"

	"rig/receipts"
	"rig/studies"
)

// eta prices the trials still to run arm by arm: at the mean wall time that
// arm's trials took so far in this execution, or, for an arm not yet
// measured here, at the dry run's price of one of its trials. An average
// over all trials so far would price a slow arm's remaining trials at the
// speed of the fast arms that happened to run first.
type eta struct {
	priced map[string]time.Duration // arm → the dry run's price per trial
	spent  map[string]time.Duration // arm → wall time of its trials so far
	done   map[string]int           // arm → its trials so far
}

func newETA(priced map[string]time.Duration) *eta {
	return &eta{priced: priced, spent: map[string]time.Duration{}, done: map[string]int{}}
}

// observe records one finished trial of arm and how long it took, its
// runtime's start included (a load is part of what a trial costs when
// blocks interleave the arms).
func (e *eta) observe(arm string, took time.Duration) {
	e.spent[arm] += took
	e.done[arm]++
}

// perTrial is what one more trial of arm is expected to take; false when
// neither a measurement nor a price is known for it.
func (e *eta) perTrial(arm string) (time.Duration, bool) {
	if n := e.done[arm]; n > 0 {
		return e.spent[arm] / time.Duration(n), true
	}
	p, ok := e.priced[arm]
	return p, ok && p > 0
}

// left is the expected wall time of trials. An arm with neither a
// measurement nor a price is priced at the mean of the arms measured so
// far: a guess, but never zero.
func (e *eta) left(trials []studies.Trial) time.Duration {
	var all time.Duration
	var n int
	for arm, d := range e.spent {
		all += d
		n += e.done[arm]
	}
	var sum time.Duration
	for _, t := range trials {
		if d, ok := e.perTrial(t.Key.Arm); ok {
			sum += d
		} else if n > 0 {
			sum += all / time.Duration(n)
		}
	}
	return sum
}

// leftInFlight is the ETA partway through a stretch of an arm's trials in
// flight together: the stretch's trials not yet ended at the share of the
// stretch's time each ended one took so far (spent over finished: N in
// flight end N times as often as one alone), then the trials after it.
func (e *eta) leftInFlight(arm string, spent time.Duration, finished, unfinished int, after []studies.Trial) time.Duration {
	per, ok := e.perTrial(arm)
	if finished > 0 {
		per, ok = spent/time.Duration(finished), true
	}
	left := e.left(after)
	if ok && unfinished > 0 {
		left += per * time.Duration(unfinished)
	}
	return left
}

// remaining are the planned trials after index i that have no counted
// receipt yet: what the ETA prices.
func remaining(plan *studies.Plan, i int, counted map[receipts.TrialKey]receipts.Receipt) []studies.Trial {
	var out []studies.Trial
	for _, t := range plan.Trials[i+1:] {
		if _, ok := counted[receiptTrial(t.Key)]; !ok {
			out = append(out, t)
		}
	}
	return out
}
