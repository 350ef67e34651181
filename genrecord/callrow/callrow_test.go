package callrow

import (
	"reflect"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/offload"
	"rig/runtimes"
)

// TestPinsCarryContextAndOffload: a record carries the arm's context,
// and one made on the card the arm's offload pin, so that replay starts the
// same build the same way; the CPU path writes no offload pin and reads as
// every record before the pin.
func TestPinsCarryContextAndOffload(t *testing.T) {
	card := offload.Pin{Backend: offload.BackendCUDA, GPULayers: 20, FlashAttention: "off", KVOnHost: true}
	for _, tc := range []struct {
		name string
		pin  offload.Pin
		want *offload.Pin
	}{
		{"cpu path, pin left out", offload.Pin{}, nil},
		{"cpu path, said", offload.Pin{Backend: offload.BackendCPU}, nil},
		{"on the card", card, &card},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Pins(runtimes.Pins{Offload: tc.pin, Context: 8192}, "d", "s", "x")
			switch {
			case p.Context != 8192 || p.ReplayContext() != 8192:
				t.Errorf("context %d (replayed at %d), the runtime ran at 8192", p.Context, p.ReplayContext())
			case tc.want == nil && p.Offload != nil:
				t.Errorf("offload %+v written for the CPU path", *p.Offload)
			case tc.want != nil && (p.Offload == nil || *p.Offload != *tc.want):
				t.Errorf("offload %v, want %+v", p.Offload, *tc.want)
			case p.OffloadPin().BackendName() != tc.pin.BackendName():
				t.Errorf("read back on backend %s, ran on %s", p.OffloadPin().BackendName(), tc.pin.BackendName())
			}
		})
	}
}

// TestRowKeepsTheCall: a row keeps the call's sampling, stop reason, tokens
// and top-K alternatives, and a token the runtime gave no id keeps none (so
// it is compared by text), not id -1.
func TestRowKeepsTheCall(t *testing.T) {
	res := runtimes.Result{CallID: "c1", Text: "Hi", OutputTokens: 2, Wall: 1500 * time.Microsecond,
		Steps: []runtimes.Step{
			{Candidate: runtimes.Candidate{Text: "H", Bytes: []byte("H"), Logprob: -0.5, ID: 7},
				Top: []runtimes.Candidate{{ID: 7, Text: "H", Logprob: -0.5}, {ID: -1, Text: "h", Logprob: -1.5}}},
			{Candidate: runtimes.Candidate{Text: "i", Bytes: []byte("i"), Logprob: -0.25, ID: -1}},
		}}
	s := Sampling(runtimes.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42}, 48)
	row := Row("r1", "arm-a", genrecord.RoleCandidate, s, 5, res)
	if !reflect.DeepEqual(row.Sampling, genrecord.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42, MaxTokens: 48}) {
		t.Errorf("sampling %+v", row.Sampling)
	}
	if row.StopReason != genrecord.StopEOS {
		t.Errorf("stop reason %q for a call that gave none, want %q", row.StopReason, genrecord.StopEOS)
	}
	if row.Prompt != "c1" || row.RowID != "r1" || row.Arm != "arm-a" || row.K != 5 || row.RuntimeTokenCount != 2 || row.WallMS != 1.5 {
		t.Errorf("row %+v", row)
	}
	if len(row.Output) != 2 || row.Output[0].ID == nil || *row.Output[0].ID != 7 || row.Output[1].ID != nil {
		t.Fatalf("output ids %+v", row.Output)
	}
	if *row.Output[1].Logprob != -0.25 || len(row.Output[0].Top) != 2 || row.Output[0].Top[1].ID != nil {
		t.Errorf("steps %+v", row.Output)
	}
}
