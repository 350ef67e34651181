package genrecord

import "fmt"

// ReasonGreedy marks a step of a greedy row whose recorded token is not the
// most likely one on the replaying stack: greedy decoding cannot have chosen
// it, whatever log-probs the record holds beside it.
const ReasonGreedy = "greedy"

// GreedyIsArgmax reports whether the runtime that made the record, as rig
// drives it, decodes a greedy row by taking the top of the log-probs it
// reports. llama-server does: rig sends it a sampler chain of top_k, top_p,
// min_p and temperature only. Ollama does not: it applies its repeat
// penalty after the log-probs it reports, so a genuine greedy token may
// score below another (its replay regenerates instead, which catches edits).
func (p Pins) GreedyIsArgmax() bool { return p.Runtime == "llama-server" }

// CompareRow compares re-scored steps with a row, as Compare does. When
// greedyArgmax holds (Pins.GreedyIsArgmax) and the row is greedy
// (temperature 0), it also checks that each recorded token is the top of
// the observed distribution, within tol.Token: forced re-scoring alone
// cannot catch an edit of a greedy row's last token whose log-prob was
// copied from the recorded top-K; this check does.
func CompareRow(row Row, observed []Step, tol Tolerance, greedyArgmax bool) Comparison {
	c := Compare(row.Output, observed, tol)
	if !greedyArgmax || row.Sampling.Temperature != 0 {
		return c
	}
	for i, e := range row.Output {
		if i >= len(observed) {
			break
		}
		o := observed[i]
		if o.Logprob == nil || len(o.Top) == 0 || !sameToken(e.ID, e.Text, o.ID, o.Text) {
			continue // a gap, or already a token mismatch
		}
		best := o.Top[0]
		for _, a := range o.Top[1:] {
			if a.Logprob > best.Logprob {
				best = a
			}
		}
		if d := best.Logprob - *o.Logprob; d > tol.Token && !sameToken(e.ID, e.Text, best.ID, best.Text) {
			m := Mismatch{Step: i, Reason: ReasonGreedy, ExpectedText: e.Text, ObservedText: best.Text, ExpectedID: e.ID, ObservedID: best.ID,
				ExpectedLogprob: o.Logprob, ObservedLogprob: &best.Logprob, AbsDiff: d,
				Detail: fmt.Sprintf("the row is greedy (temperature 0), and the recorded token scores %.6g nats below the top one", d)}
			c.TokenChanged = true
			c.Mismatched++
			if c.First == nil || c.First.Step > i {
				c.First = &m
			}
			c.Reproduced = false
			return c
		}
	}
	return c
}
