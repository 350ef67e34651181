package genrecord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/offload"
)

func recordWith(t *testing.T, rows []Row) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "generations.jsonl")
	w := writeRecord(t, path, rows)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func genuineRows(m fakeModel, n int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = makeRow(m, i, 6+i%5)
	}
	return rows
}

// editToken replaces the token at step i with another id, keeping the
// recorded log-probs: what a forger who edits the kept text produces.
func editToken(r Row, i int) Row {
	out := make([]Step, len(r.Output))
	copy(out, r.Output)
	id := (*out[i].ID + 1) % 40
	out[i].ID, out[i].Text, out[i].Bytes = intp(id), tokText(id), Bytes(tokText(id))
	r.Output = out
	return r
}

func TestReplay(t *testing.T) {
	smol := fakeModel{salt: "smol", vocab: 40}
	gemma := fakeModel{salt: "gemma", vocab: 40}
	rows := genuineRows(smol, 20)
	edited := append([]Row(nil), rows...)
	edited[7] = editToken(rows[7], 2)
	edited[13] = editToken(rows[13], len(rows[13].Output)-1) // last token: no later step moves
	otherStack := testPins()
	otherStack.Libraries["/elsewhere/libggml.so"] = otherStack.Libraries["/opt/rig/lib/libggml.so"]
	delete(otherStack.Libraries, "/opt/rig/lib/libggml.so")

	for _, tc := range []struct {
		name       string
		rows       []Row
		rescorer   *fakeRescorer
		opts       ReplayOptions
		status     Status
		mismatched []string
		replayed   int
	}{
		{name: "genuine rows reproduce exactly", rows: rows, rescorer: &fakeRescorer{model: smol, pins: testPins()}, status: StatusReproduced, replayed: 20},
		{name: "libraries moved, same files", rows: rows, rescorer: &fakeRescorer{model: smol, pins: otherStack}, status: StatusReproduced, replayed: 20},
		{name: "one-token edits caught", rows: edited, rescorer: &fakeRescorer{model: smol, pins: testPins()}, status: StatusMismatch, mismatched: []string{"r0007", "r0013"}, replayed: 20},
		{name: "swapped model same pins caught", rows: rows[:5], rescorer: &fakeRescorer{model: gemma, pins: testPins()}, status: StatusMismatch, mismatched: []string{"r0000", "r0001", "r0002", "r0003", "r0004"}, replayed: 5},
		{name: "row ids", rows: edited, rescorer: &fakeRescorer{model: smol, pins: testPins()}, opts: ReplayOptions{Rows: []string{"r0013", "r0002"}}, status: StatusMismatch, mismatched: []string{"r0013"}, replayed: 2},
		{name: "sample", rows: rows, rescorer: &fakeRescorer{model: smol, pins: testPins()}, opts: ReplayOptions{Sample: 6, Seed: 42}, status: StatusReproduced, replayed: 6},
		{name: "rescorer error", rows: rows[:3], rescorer: &fakeRescorer{model: smol, pins: testPins(), fail: map[string]error{"r0001": errors.New("slot busy")}}, status: StatusError, replayed: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := recordWith(t, tc.rows)
			s, err := Replay(context.Background(), path, tc.rescorer, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != tc.status || s.Replayed != tc.replayed || tc.rescorer.calls != tc.replayed {
				t.Fatalf("status %q replayed %d (rescorer called %d), want %q and %d", s.Status, s.Replayed, tc.rescorer.calls, tc.status, tc.replayed)
			}
			var got []string
			for _, r := range s.Results {
				if r.Status == StatusMismatch {
					got = append(got, r.RowID)
				}
				if r.Status == StatusReproduced && r.Comparison.MaxAbsDiff != 0 {
					t.Errorf("row %s reproduced with |Δ| %g under a zero tolerance", r.RowID, r.Comparison.MaxAbsDiff)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.mismatched, ",") {
				t.Errorf("mismatched rows %v, want %v", got, tc.mismatched)
			}
			if s.Reproduced+s.Mismatched+s.Errors != s.Replayed {
				t.Errorf("counts do not add up: %+v", s)
			}
			var text bytes.Buffer
			if err := s.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "summary: "+string(tc.status)) {
				t.Errorf("text summary lacks the status:\n%s", text.String())
			}
			js, err := s.JSON()
			if err != nil {
				t.Fatal(err)
			}
			var back Summary
			if err := json.Unmarshal(js, &back); err != nil || back.Replayed != s.Replayed {
				t.Errorf("JSON summary does not read back: %v", err)
			}
		})
	}
}

func TestReplayEditReportsStep(t *testing.T) {
	smol := fakeModel{salt: "smol", vocab: 40}
	row := editToken(makeRow(smol, 1, 10), 4)
	path := recordWith(t, []Row{row})
	s, err := Replay(context.Background(), path, &fakeRescorer{model: smol, pins: testPins()}, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := s.Results[0].Comparison.First
	if m == nil || m.Step != 4 || m.ExpectedLogprob == nil || m.ObservedLogprob == nil || *m.ExpectedLogprob == *m.ObservedLogprob {
		t.Fatalf("first mismatch %+v, want step 4 with differing expected/observed log-probs", m)
	}
	if s.Results[0].Comparison.Mismatched < 2 {
		t.Errorf("an edit at step 4 of 10 should move later steps too; %d steps mismatched", s.Results[0].Comparison.Mismatched)
	}
	var text bytes.Buffer
	s.WriteText(&text)
	if !strings.Contains(text.String(), "mismatch at step 4") {
		t.Errorf("text does not name the step:\n%s", text.String())
	}
}

func TestReplayStackDiffers(t *testing.T) {
	smol := fakeModel{salt: "smol", vocab: 40}
	path := recordWith(t, genuineRows(smol, 3))
	for _, tc := range []struct {
		name  string
		edit  func(*Pins)
		field string
	}{
		{"model file", func(p *Pins) { p.ModelSHA256 = strings.Repeat("9", 64) }, "model_sha256"},
		{"binary", func(p *Pins) { p.BinarySHA256 = strings.Repeat("9", 64) }, "binary_sha256"},
		{"library", func(p *Pins) { p.Libraries["/opt/rig/lib/libllama.so"] = strings.Repeat("9", 64) }, "libraries[libllama.so]"},
		{"extra library", func(p *Pins) { p.Libraries["/opt/rig/lib/libcuda.so"] = strings.Repeat("9", 64) }, "libraries[libcuda.so]"},
		{"runtime", func(p *Pins) { p.Runtime = "ollama" }, "runtime"},
		// A generic server asked to keep its prompt cache evaluates a
		// prompt on top of the previous request's, unlike the record's.
		{"server request", func(p *Pins) { p.ServerRequest = `{"cache_prompt":false}` }, "server_request"},
		// The record ran on the CPU path; a stack that put the model on a
		// card computes with other kernels.
		{"offload", func(p *Pins) {
			p.Offload = &offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers, FlashAttention: "on"}
		}, "offload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPins()
			tc.edit(&p)
			rs := &fakeRescorer{model: smol, pins: p}
			s, err := Replay(context.Background(), path, rs, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Status != StatusStackDiffers || rs.calls != 0 || len(s.Results) != 0 {
				t.Fatalf("status %q, %d rows rescored; want stack differs and none", s.Status, rs.calls)
			}
			if len(s.StackDiffs) != 1 || s.StackDiffs[0].Field != tc.field {
				t.Errorf("diffs %v, want one on %s", s.StackDiffs, tc.field)
			}
			var text bytes.Buffer
			s.WriteText(&text)
			if !strings.Contains(text.String(), "stack differs") || strings.Contains(text.String(), "reproduced") {
				t.Errorf("text:\n%s", text.String())
			}
		})
	}
}

func TestReplayRefuses(t *testing.T) {
	smol := fakeModel{salt: "smol", vocab: 40}
	path := recordWith(t, genuineRows(smol, 3))
	rs := &fakeRescorer{model: smol, pins: testPins()}
	for _, tc := range []struct {
		name string
		opts ReplayOptions
		want string
	}{
		{"unknown row", ReplayOptions{Rows: []string{"r0001", "nope"}}, "nope"},
		{"both selections", ReplayOptions{Rows: []string{"r0001"}, Sample: 2}, "not both"},
		{"sum mismatch", ReplayOptions{WantSum: strings.Repeat("0", 64)}, "receipt says"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Replay(context.Background(), path, rs, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestReplaySampleDeterministic(t *testing.T) {
	smol := fakeModel{salt: "smol", vocab: 40}
	path := recordWith(t, genuineRows(smol, 30))
	ids := func(seed uint64) string {
		s, err := Replay(context.Background(), path, &fakeRescorer{model: smol, pins: testPins()}, ReplayOptions{Sample: 5, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range s.Results {
			out = append(out, r.RowID)
		}
		return strings.Join(out, ",")
	}
	a, b, c := ids(1), ids(1), ids(2)
	if a != b {
		t.Errorf("same seed, different samples: %s vs %s", a, b)
	}
	if a == c {
		t.Errorf("seeds 1 and 2 drew the same sample %s", a)
	}
}

func TestCompare(t *testing.T) {
	exp := []Step{
		{ID: intp(5), Text: "a", Logprob: f64p(-0.5), Top: []Alt{{ID: intp(5), Text: "a", Logprob: -0.5}, {ID: intp(6), Text: "b", Logprob: -1.5}}},
		{ID: intp(7), Text: "c", Logprob: f64p(-0.25), Top: []Alt{{ID: intp(7), Text: "c", Logprob: -0.25}, {ID: intp(8), Text: "d", Logprob: -2}}},
	}
	shift := func(d float64, step int, topOnly bool) []Step {
		out := make([]Step, len(exp))
		for i, s := range exp {
			s.Top = append([]Alt(nil), s.Top...)
			if i == step {
				if !topOnly {
					s.Logprob = f64p(*s.Logprob + d)
					s.Top[0].Logprob += d
				}
				s.Top[1].Logprob += d
			}
			out[i] = s
		}
		return out
	}
	swapped := shift(0, -1, false)
	swapped[1].Top[1] = Alt{ID: intp(9), Text: "e", Logprob: -2}
	gap := shift(0, -1, false)
	gap[0].Logprob, gap[0].Top = nil, nil
	for _, tc := range []struct {
		name       string
		obs        []Step
		tol        Tolerance
		reproduced bool
		reason     string
	}{
		{"identical", shift(0, -1, false), Tolerance{}, true, ""},
		{"tiny drift, zero tolerance", shift(1e-9, 0, false), Tolerance{}, false, ReasonLogprob},
		{"tiny drift within tolerance", shift(1e-9, 0, false), Tolerance{Token: 1e-6, Row: 1e-6}, true, ""},
		{"top-K entry moved", shift(0.1, 1, true), Tolerance{Token: 0.01, Row: 1}, false, ReasonTop},
		{"boundary swap at equal logprob", swapped, Tolerance{}, true, ""},
		{"row mean over tolerance", shift(0.008, 0, false), Tolerance{Token: 0.01, Row: 0.001}, false, ReasonRow},
		{"short", shift(0, -1, false)[:1], Tolerance{}, false, ReasonShort},
		{"gap on observed side", gap, Tolerance{}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(exp, tc.obs, tc.tol)
			if c.Reproduced != tc.reproduced {
				t.Fatalf("reproduced %v, want %v (%+v)", c.Reproduced, tc.reproduced, c.First)
			}
			if tc.reason != "" && (c.First == nil || c.First.Reason != tc.reason) {
				t.Fatalf("first mismatch %+v, want reason %s", c.First, tc.reason)
			}
			if tc.name == "gap on observed side" && (c.Unchecked != 1 || c.Checked != 1) {
				t.Errorf("checked %d unchecked %d, want 1 and 1", c.Checked, c.Unchecked)
			}
		})
	}
	if c := Compare(exp, []Step{{Text: "a"}, {Text: "c"}}, Tolerance{}); c.Reproduced {
		t.Error("a row with no checked step was called reproduced")
	}
}

// TestCompareTopEntriesSharingText is the shape of a real Ollama step
// (smollm2-q8-ollama, xj-event-1, step 1): no ids, and five top-K entries
// that all read U+FFFD, each a token holding part of a character. The same
// step regenerated is reproduced; the same texts with a changed log-prob
// further down are not.
func TestCompareTopEntriesSharingText(t *testing.T) {
	top := func(lps ...float64) []Alt {
		var out []Alt
		for _, lp := range lps {
			out = append(out, Alt{Text: "\ufffd", Bytes: Bytes("\ufffd"), Logprob: lp})
		}
		return out
	}
	rec := []Step{{Text: "\ufffd", Logprob: f64p(-0.949), Top: top(-0.949, -2.165, -2.517, -2.601, -2.609)}}
	same := []Step{{Text: "\ufffd", Logprob: f64p(-0.949), Top: top(-0.949, -2.165, -2.517, -2.601, -2.609)}}
	if c := Compare(rec, same, Tolerance{}); !c.Reproduced {
		t.Fatalf("the same step regenerated is a mismatch: %v", c.First)
	}
	moved := []Step{{Text: "\ufffd", Logprob: f64p(-0.949), Top: top(-0.949, -2.165, -2.517, -2.9, -2.95)}}
	c := Compare(rec, moved, Tolerance{Token: 0.01, Row: 1})
	if c.Reproduced || c.First == nil || c.First.Reason != ReasonTop {
		t.Fatalf("a moved fourth entry was not a top mismatch: %+v", c.First)
	}
	if math.Abs(c.First.AbsDiff-0.341) > 1e-9 {
		t.Errorf("|Δ| %.6g, want 0.341 (the fifth entry against the fifth)", c.First.AbsDiff)
	}
}

func TestReplayCancelled(t *testing.T) {
	smol := fakeModel{salt: "smol", vocab: 40}
	path := recordWith(t, genuineRows(smol, 5))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rs := &fakeRescorer{model: smol, pins: testPins()}
	_, err := Replay(ctx, path, rs, ReplayOptions{})
	if !errors.Is(err, context.Canceled) || rs.calls != 0 {
		t.Fatalf("err %v after %d calls, want context.Canceled and none", err, rs.calls)
	}
}
