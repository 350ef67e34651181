package genrecord

import "testing"

// A hand-made greedy row and what a forced replay of it observes: the tests
// below edit the record the way a forger without the model would.
func greedyCase() (Row, []Step) {
	top := []Alt{{ID: intp(7), Text: "a", Logprob: -0.1}, {ID: intp(8), Text: "b", Logprob: -2.4}}
	step := func(id int, text string, lp float64) Step {
		return Step{ID: intp(id), Text: text, Logprob: f64p(lp), Top: top}
	}
	row := Row{Kind: KindRow, RowID: "g", K: 2, Sampling: Sampling{Temperature: 0}, StopReason: StopLength,
		Output: []Step{step(7, "a", -0.1), step(7, "a", -0.1)}}
	observed := []Step{step(7, "a", -0.1), step(7, "a", -0.1)}
	return row, observed
}

func TestCompareRowGreedy(t *testing.T) {
	row, observed := greedyCase()
	if c := CompareRow(row, observed, Tolerance{}, true); !c.Reproduced {
		t.Fatalf("genuine greedy row not reproduced: %v", c.First)
	}
	// The last token edited to the runner-up, its log-prob copied from the
	// top-K: forced re-scoring sees the same numbers, greedy decoding could
	// not have chosen it.
	row.Output[1] = Step{ID: intp(8), Text: "b", Logprob: f64p(-2.4), Top: row.Output[1].Top}
	observed[1] = Step{ID: intp(8), Text: "b", Logprob: f64p(-2.4), Top: observed[1].Top}
	if c := Compare(row.Output, observed, Tolerance{}); !c.Reproduced {
		t.Fatalf("precondition: Compare alone should see no difference, got %v", c.First)
	}
	c := CompareRow(row, observed, Tolerance{}, true)
	if c.Reproduced || c.First == nil || c.First.Reason != ReasonGreedy || c.First.Step != 1 || !c.TokenChanged {
		t.Fatalf("forged greedy edit: reproduced %v, first %v; want a greedy mismatch at step 1", c.Reproduced, c.First)
	}
	// Within tolerance a near-tie is not a mismatch.
	if c := CompareRow(row, observed, Tolerance{Token: 3, Row: 3}, true); !c.Reproduced {
		t.Errorf("a gap of 2.3 nats under a 3-nat tolerance failed: %v", c.First)
	}
	// Where greedy decoding is not the argmax of the reported log-probs
	// (Ollama's repeat penalty), the check is off.
	if c := CompareRow(row, observed, Tolerance{}, false); !c.Reproduced {
		t.Errorf("greedy check applied where the runtime's greedy is not the argmax: %v", c.First)
	}
	// A sampled row may choose the runner-up.
	row.Sampling.Temperature = 0.8
	if c := CompareRow(row, observed, Tolerance{}, true); !c.Reproduced {
		t.Errorf("sampled row with a runner-up failed: %v", c.First)
	}
}
