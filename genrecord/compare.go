package genrecord

import (
	"fmt"
	"math"
)

// Tolerance bounds how far re-scored log-probs may move, in nats. Token is
// the largest allowed |Δ| at any step (chosen token and each top-K entry);
// Row is the largest allowed mean of the per-step |Δ| over a row. The zero
// Tolerance demands exact equality, the goal on an unchanged stack.
type Tolerance struct {
	Token float64 `json:"token_nats"`
	Row   float64 `json:"row_mean_nats"`
}

// Mismatch reasons.
const (
	ReasonToken   = "token"   // the chosen token differs
	ReasonLogprob = "logprob" // the chosen token's log-prob moved beyond Token
	ReasonTop     = "top"     // a top-K entry moved beyond Token, or left the top-K
	ReasonShort   = "short"   // the rescorer returned fewer steps than recorded
	ReasonRow     = "row"     // every step within Token, but the row mean beyond Row
	// ReasonField (fields.go): a kept field is not what the tokens say.
)

// Mismatch is the first step where a re-scored row departs from the record.
type Mismatch struct {
	Step   int    `json:"step"`
	Reason string `json:"reason"`
	// Field names the kept field a ReasonField mismatch is about ("text",
	// "rendered_prompt"); Step is then the step holding the first differing
	// byte, or -1.
	Field           string   `json:"field,omitempty"`
	ExpectedText    string   `json:"expected_text"`
	ObservedText    string   `json:"observed_text"`
	ExpectedID      *int     `json:"expected_id,omitempty"`
	ObservedID      *int     `json:"observed_id,omitempty"`
	ExpectedLogprob *float64 `json:"expected_logprob,omitempty"`
	ObservedLogprob *float64 `json:"observed_logprob,omitempty"`
	AbsDiff         float64  `json:"abs_diff"`
	ExpectedTop     []Alt    `json:"expected_top,omitempty"`
	ObservedTop     []Alt    `json:"observed_top,omitempty"`
	Detail          string   `json:"detail,omitempty"`
}

func (m Mismatch) String() string {
	if m.Reason == ReasonField {
		return fmt.Sprintf("mismatch in %s: %s", m.Field, m.Detail)
	}
	s := fmt.Sprintf("mismatch at step %d (%s): expected %s", m.Step, m.Reason, tokenLabel(m.ExpectedText, m.ExpectedID))
	if m.ExpectedLogprob != nil {
		s += fmt.Sprintf(" logprob %.6g", *m.ExpectedLogprob)
	}
	s += ", observed " + tokenLabel(m.ObservedText, m.ObservedID)
	if m.ObservedLogprob != nil {
		s += fmt.Sprintf(" logprob %.6g", *m.ObservedLogprob)
	}
	if m.Reason != ReasonToken && m.Reason != ReasonShort {
		s += fmt.Sprintf(", |Δ| %.6g", m.AbsDiff)
	}
	if m.Detail != "" {
		s += "; " + m.Detail
	}
	return s
}

func tokenLabel(text string, id *int) string {
	if id != nil {
		return fmt.Sprintf("%q (id %d)", text, *id)
	}
	return fmt.Sprintf("%q", text)
}

// Comparison is the outcome of comparing re-scored steps with a row.
type Comparison struct {
	Reproduced   bool      `json:"reproduced"`
	Steps        int       `json:"steps"`
	Checked      int       `json:"checked"`   // steps with log-probs on both sides
	Unchecked    int       `json:"unchecked"` // gaps on either side, never counted as agreement
	Mismatched   int       `json:"mismatched_steps"`
	TokenChanged bool      `json:"token_changed"`
	Short        bool      `json:"short"`
	MaxAbsDiff   float64   `json:"max_abs_diff"`
	MeanAbsDiff  float64   `json:"mean_abs_diff"`
	First        *Mismatch `json:"first_mismatch,omitempty"`
	// FieldChanged is set when a kept field (the text, the rendered
	// prompt) is not what the kept tokens say; First then names it.
	FieldChanged bool `json:"field_changed,omitempty"`
	// FieldChecks lists the field checks that applied to the row.
	FieldChecks []string `json:"field_checks,omitempty"`
}

// WithField records a failed field check: the row is a mismatch whatever its
// log-probs did, and the field is what the summary names first, since the
// tokens may be genuine while what people read is not.
func (c Comparison) WithField(checks []string, m *Mismatch) Comparison {
	c.FieldChecks = checks
	if m == nil {
		return c
	}
	c.FieldChanged, c.Reproduced = true, false
	c.First = m
	c.Mismatched++
	return c
}

// Distance is the tolerance-free part of a Comparison, what Calibrate uses.
func (c Comparison) Distance(label string) Distance {
	return Distance{Label: label, Changed: c.TokenChanged || c.Short || c.FieldChanged, Token: c.MaxAbsDiff, Row: c.MeanAbsDiff}
}

func sameToken(aID *int, aText string, bID *int, bText string) bool {
	if aID != nil && bID != nil {
		return *aID == *bID
	}
	return aText == bText
}

// Compare checks observed steps against the recorded ones under tol. A step
// the record has no log-prob for is unchecked; so is a step the rescorer
// could not score. A row with no checked step is not reproduced.
func Compare(expected, observed []Step, tol Tolerance) Comparison {
	c := Comparison{Steps: len(expected)}
	var sum float64
	var worst *Mismatch
	note := func(m Mismatch) {
		c.Mismatched++
		if c.First == nil {
			mm := m
			c.First = &mm
		}
	}
	for i, e := range expected {
		if i >= len(observed) {
			note(Mismatch{Step: i, Reason: ReasonShort, ExpectedText: e.Text, ExpectedID: e.ID, ExpectedLogprob: e.Logprob,
				Detail: fmt.Sprintf("rescorer returned %d steps, the record has %d", len(observed), len(expected))})
			c.Mismatched += len(expected) - i - 1
			c.Short = true
			break
		}
		o := observed[i]
		if !sameToken(e.ID, e.Text, o.ID, o.Text) {
			c.TokenChanged = true
			note(Mismatch{Step: i, Reason: ReasonToken, ExpectedText: e.Text, ObservedText: o.Text, ExpectedID: e.ID, ObservedID: o.ID,
				ExpectedLogprob: e.Logprob, ObservedLogprob: o.Logprob, Detail: "the re-scored token is not the recorded one"})
			continue
		}
		if e.Logprob == nil || o.Logprob == nil {
			c.Unchecked++
			continue
		}
		c.Checked++
		d := math.Abs(*e.Logprob - *o.Logprob)
		step := Mismatch{Step: i, ExpectedText: e.Text, ObservedText: o.Text, ExpectedID: e.ID, ObservedID: o.ID,
			ExpectedLogprob: e.Logprob, ObservedLogprob: o.Logprob, AbsDiff: d, ExpectedTop: e.Top, ObservedTop: o.Top}
		bad := ""
		if d > tol.Token {
			bad = ReasonLogprob
		}
		topD, detail := compareTop(e.Top, o.Top, tol.Token)
		if topD > d {
			d = topD
		}
		if bad == "" && (topD > tol.Token || detail != "") {
			bad, step.AbsDiff, step.Detail = ReasonTop, topD, detail
		}
		sum += d
		if worst == nil || d > c.MaxAbsDiff {
			c.MaxAbsDiff = d
			w := step
			w.AbsDiff = d
			worst = &w
		}
		if bad != "" {
			step.Reason = bad
			note(step)
		}
	}
	if c.Checked > 0 {
		c.MeanAbsDiff = sum / float64(c.Checked)
	}
	if c.First == nil && c.MeanAbsDiff > tol.Row && worst != nil {
		w := *worst
		w.Reason = ReasonRow
		w.Detail = fmt.Sprintf("row mean |Δ| %.6g exceeds %.6g", c.MeanAbsDiff, tol.Row)
		c.First = &w
		c.Mismatched++
	}
	c.Reproduced = c.First == nil && c.Checked > 0
	if c.Steps == 0 && len(observed) == 0 {
		// An empty output is reproduced when the rescorer also sees none.
		c.Reproduced = true
	}
	return c
}

// compareTop returns the largest |Δ| over top-K entries present on both
// sides, and a detail when a recorded entry left the observed top-K although
// it scores above the observed K-th entry by more than tol (a boundary swap
// between near-equal entries is not a mismatch).
func compareTop(exp, obs []Alt, tol float64) (float64, string) {
	var maxD float64
	if len(exp) == 0 {
		return 0, ""
	}
	floor := math.Inf(-1)
	if len(obs) > 0 {
		floor = obs[len(obs)-1].Logprob
		for _, a := range obs {
			floor = math.Min(floor, a.Logprob)
		}
	}
	// An entry pairs with the first observed one of the same token not yet
	// paired. Without ids (Ollama) several entries can share a text: every
	// token holding part of a character reads as U+FFFD, and one step's top-K
	// was seen to be five of them. Both lists run from the likeliest down, so
	// the n-th of a text on one side pairs with the n-th on the other; pairing
	// each with the first would compare different tokens' log-probs.
	paired := make([]bool, len(obs))
	for _, e := range exp {
		found := false
		for j, o := range obs {
			if !paired[j] && sameToken(e.ID, e.Text, o.ID, o.Text) {
				found, paired[j] = true, true
				maxD = math.Max(maxD, math.Abs(e.Logprob-o.Logprob))
				break
			}
		}
		if !found && (len(obs) < len(exp) || e.Logprob > floor+tol) {
			return maxD, fmt.Sprintf("top-K entry %s (logprob %.6g) is missing from the observed top-%d", tokenLabel(e.Text, e.ID), e.Logprob, len(obs))
		}
	}
	return maxD, ""
}
