package analysis

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzInput feeds arbitrary JSON (as a design's analysis section and
// receipts would arrive) through Validate and Analyse: either a typed
// ErrInvalid error or a report that encodes, never a panic.
func FuzzInput(f *testing.F) {
	seed, _ := json.Marshal(Input{Design: twoArmDesign(MeasurePass), Trials: passTrials(1, 6, map[string]float64{"base": 0.5, "cand": 0.7}, map[string]float64{"base": 1, "cand": 2})})
	f.Add(seed)
	score, _ := json.Marshal(Input{Design: twoArmDesign(MeasureScore), Trials: passTrials(2, 5, nil, nil)})
	f.Add(score)
	f.Add([]byte(`{"design":{"hash":"h","arms":[{"name":"a"}],"job_kinds":[{"name":"k","measure":"pass"}]},"trials":[{"design_hash":"x","arm":"a","job_kind":"k","task":"t"}]}`))
	f.Add([]byte(`{"design":{"hash":"h","arms":[{"name":"a"},{"name":"b"}],"job_kinds":[{"name":"k","measure":"score"}],"pairs":[{"candidate":"b","baseline":"zz"}]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var in Input
		if err := json.Unmarshal(b, &in); err != nil {
			return
		}
		if len(in.Trials) > 64 || len(in.Design.Arms) > 8 || len(in.Design.JobKinds) > 3 || len(in.Design.Pairs) > 8 || in.Design.Resamples > MinResamples || in.Design.PermutationResamples > 1000 {
			return // keep each input fast; size is not what is being fuzzed
		}
		start := time.Now()
		r, err := Analyse(context.Background(), in)
		if time.Since(start) > 3*time.Second {
			t.Fatalf("slow input %s", b)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("report does not encode: %v", err)
		}
		if r.Decision.Action == "" || len(r.Decision.Trace) == 0 {
			t.Fatalf("decision without action or trace: %+v", r.Decision)
		}
	})
}

// FuzzParseAction checks that a rule's action text either parses to a known
// verdict or is refused.
func FuzzParseAction(f *testing.F) {
	for _, s := range []string{"accept qwen3", "keep the incumbent", "no decision at this sample size", "ship a", "hold", "revert", "reject  b ", "", "accept"} {
		f.Add(s)
	}
	known := map[Verdict]bool{Accept: true, Reject: true, Keep: true, NeedsReview: true, Undecided: true, Ship: true, Hold: true, Revert: true}
	f.Fuzz(func(t *testing.T, s string) {
		v, arm, ok := parseAction(s)
		if !ok {
			return
		}
		if !known[v] {
			t.Fatalf("parseAction(%q) gave unknown verdict %q", s, v)
		}
		if (v == Accept || v == Reject || v == Ship) != (arm != "") {
			t.Fatalf("parseAction(%q) = %q with arm %q", s, v, arm)
		}
	})
}
