package fidelity

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/genrecord"
	"rig/internal/gguf"
)

func writeHeader(t *testing.T, name string, tokens []string, template string) string {
	t.Helper()
	meta := []gguf.KV{
		{Key: "general.architecture", Type: gguf.ValueString, Value: "llama"},
		{Key: "tokenizer.ggml.model", Type: gguf.ValueString, Value: "gpt2"},
		{Key: "tokenizer.ggml.tokens", Type: gguf.ValueArray, Value: tokens},
		{Key: "tokenizer.ggml.bos_token_id", Type: gguf.ValueUint32, Value: uint32(1)},
		{Key: "tokenizer.chat_template", Type: gguf.ValueString, Value: template},
	}
	if tokens == nil {
		meta = append(meta[:2], meta[3:]...)
	}
	path := filepath.Join(t.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gguf.Encode(f, meta, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSameTokenizerReadsTheVocabularyNotTheTemplate(t *testing.T) {
	a := writeHeader(t, "a.gguf", []string{"<unk>", "<s>", "a", "b"}, "{{ x }}")
	sameOtherTemplate := writeHeader(t, "b.gguf", []string{"<unk>", "<s>", "a", "b"}, "{{ y }}")
	otherToken := writeHeader(t, "c.gguf", []string{"<unk>", "<s>", "a", "c"}, "{{ x }}")
	noTokens := writeHeader(t, "d.gguf", nil, "{{ x }}")
	if err := SameTokenizer(a, sameOtherTemplate); err != nil {
		t.Errorf("same tokens, other chat template: %v", err)
	}
	err := SameTokenizer(a, otherToken)
	if !errors.Is(err, ErrVocabDiffers) || !strings.Contains(err.Error(), otherToken) {
		t.Errorf("one token differs: got %v, want ErrVocabDiffers naming %s", err, otherToken)
	}
	if err := SameTokenizer(a, noTokens); err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.tokens") {
		t.Errorf("no token list: got %v, want an error naming tokenizer.ggml.tokens", err)
	}
}

func TestChunksAsLlamaPerplexity(t *testing.T) {
	ids := make([]int, 10)
	for i := range ids {
		ids[i] = 100 + i
	}
	segs, err := Chunks(Tokenized{IDs: ids, AddBOS: true, BOS: 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	// 10 tokens make two chunks of 4 (the remainder is dropped), each
	// starting at BOS and scoring positions 2..2, that is tokens 3..3.
	if len(segs) != 2 {
		t.Fatalf("%d chunks, want 2", len(segs))
	}
	for i, s := range segs {
		if s.Tokens[0] != 1 || s.Tokens[1] != 100+4*i+1 || s.Context != 3 || s.Scored() != 1 {
			t.Errorf("chunk %d: %+v, want BOS first, context 3, one token scored", i, s)
		}
	}
	if _, err := Chunks(Tokenized{IDs: ids}, 16); err == nil || !strings.Contains(err.Error(), "--ctx") {
		t.Errorf("a text shorter than a chunk: got %v, want an error that says what to change", err)
	}
}

func TestQuantileIsLlamaPerplexitys(t *testing.T) {
	xs := []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ f, want float64 }{{0, 0}, {0.5, 5}, {0.99, 9.9}, {0.95, 9.5}, {1, 10}} {
		if got := quantile(xs, c.f); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("quantile(%g) = %g, want %g", c.f, got, c.want)
		}
	}
}

// fakeUnits builds an arm's tokens by hand (a fake for the statistics, not a
// scorer): unit i has n tokens of KL kl(i, j) agreeing unless agree says not.
func fakeUnits(arm string, units, n int, kl func(i, j int) float64, agree func(i, j int) bool) Units {
	u := Units{Arm: arm}
	for i := range units {
		u.Names = append(u.Names, "task-"+string(rune('a'+i)))
		var toks []Token
		for j := range n {
			top := 7
			if !agree(i, j) {
				top = 8
			}
			toks = append(toks, Token{KL: kl(i, j), RefTop: 7, ArmTop: top, RefLogprob: math.Log(0.5), ArmLogprob: math.Log(0.25)})
		}
		u.Tokens = append(u.Tokens, toks)
	}
	return u
}

func TestSummarizeAndCompare(t *testing.T) {
	ctx := context.Background()
	o := Options{Resamples: 2000, Level: 0.95, Seed: 1}
	near := fakeUnits("near", 24, 50, func(i, j int) float64 { return 0.01 + 0.0005*float64(i%4) + 0.001*float64(j%5) }, func(i, j int) bool { return j%25 != 0 })
	far := fakeUnits("far", 24, 50, func(i, j int) float64 { return 0.05 + 0.004*float64((i*3+j)%7) }, func(i, j int) bool { return j%5 != 0 })
	fn, err := Summarize(ctx, near, o)
	if err != nil {
		t.Fatal(err)
	}
	if fn.Units != 24 || fn.Tokens != 1200 || math.Abs(fn.TopAgreement.Value-0.96) > 1e-12 || math.Abs(fn.MeanKL.Value-fn.TokenMeanKL) > 1e-12 {
		t.Errorf("near: %+v", fn)
	}
	if lo, hi := float64(fn.MeanKL.Interval.Lo), float64(fn.MeanKL.Interval.Hi); !(lo <= fn.MeanKL.Value && fn.MeanKL.Value <= hi && hi > lo && hi-lo < 0.002) {
		t.Errorf("near mean KL %g has interval [%g, %g]", fn.MeanKL.Value, lo, hi)
	}
	if fn.P99KL.Value < 0.014 || fn.P99KL.Value > 0.0155+1e-12 || math.Abs(fn.RefProb-0.5) > 1e-12 || math.Abs(fn.ArmProb-0.25) > 1e-12 {
		t.Errorf("near p99 %g, probabilities %g %g", fn.P99KL.Value, fn.RefProb, fn.ArmProb)
	}
	d, err := Compare(ctx, near, far, o)
	if err != nil {
		t.Fatal(err)
	}
	if d.MeanKL.Value < 0.04 || float64(d.MeanKL.Interval.Lo) <= 0 || d.TopAgreement.Value > -0.1 || float64(d.TopAgreement.Interval.Hi) >= 0 || d.P99KL.Value <= 0 {
		t.Errorf("far less near should be clearly worse: %+v", d)
	}
	short := fakeUnits("short", 23, 50, func(i, j int) float64 { return 0.01 }, func(i, j int) bool { return true })
	if _, err := Compare(ctx, near, short, o); err == nil {
		t.Error("arms scored on different units were paired")
	}
}

func TestParseScoresRefusesWhatItCannotTrust(t *testing.T) {
	segs := []Segment{{Unit: "chunk 1", Context: 2, Tokens: []int{1, 2, 3, 4}}}
	good := "ready 256 10 CPU : AVX = 1\nseg s0 2\n0 0.01 3 3 -0.5 -0.6\n1 0.02 4 5 -1 -1.2\ndone 12.5 20\n"
	h, toks, err := parseScores(strings.NewReader(good), segs)
	if err != nil || h.NVocab != 10 || h.Busy != (Busy{Wall: 12500 * time.Microsecond, CPU: 20 * time.Millisecond}) || len(toks[0]) != 2 || toks[0][1].Agrees() || !toks[0][0].Agrees() {
		t.Fatalf("good answer: %+v %+v %v", h, toks, err)
	}
	for name, bad := range map[string]string{
		"refused":     "ready 256 10\nerror s0 decode failed\n",
		"short":       "ready 256 10\nseg s0 2\n0 0.01 3 3 -0.5 -0.6\n",
		"negative KL": "ready 256 10\nseg s0 2\n0 -0.5 3 3 -0.5 -0.6\n1 0.02 4 5 -1 -1.2\n",
		"top outside": "ready 256 10\nseg s0 2\n0 0.01 3 10 -0.5 -0.6\n1 0.02 4 5 -1 -1.2\n",
		"NaN":         "ready 256 10\nseg s0 2\n0 NaN 3 3 -0.5 -0.6\n1 0.02 4 5 -1 -1.2\n",
		"wrong count": "ready 256 10\nseg s0 3\n",
		"no done":     "ready 256 10\nseg s0 2\n0 0.01 3 3 -0.5 -0.6\n1 0.02 4 5 -1 -1.2\n",
	} {
		if _, _, err := parseScores(strings.NewReader(bad), segs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseScores(f *testing.F) {
	f.Add("ready 256 10 CPU\nseg s0 2\n0 0.01 3 3 -0.5 -0.6\n1 0.02 4 5 -1 -1.2\ndone 3 4\n")
	f.Add("ready 256 10\nerror s0 x\n")
	segs := []Segment{{Unit: "u", Context: 2, Tokens: []int{1, 2, 3, 4}}}
	f.Fuzz(func(t *testing.T, s string) {
		_, toks, err := parseScores(strings.NewReader(s), segs)
		if err == nil && (len(toks) != 1 || len(toks[0]) != 2) {
			t.Fatalf("accepted %q as %d segments", s, len(toks))
		}
		for _, seg := range toks {
			for _, tok := range seg {
				if math.IsNaN(tok.KL) || tok.RefLogprob > 0 {
					t.Fatalf("accepted %+v", tok)
				}
			}
		}
	})
}

func FuzzParseTokenized(f *testing.F) {
	f.Add("tokens 3 1 1\n1 2 3\n")
	f.Add("tokens 0 0 0\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := parseTokenized(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, id := range tok.IDs {
			if id < 0 {
				t.Fatalf("accepted a negative id from %q", s)
			}
		}
	})
}

func TestWriteTextSaysWhatItMeasures(t *testing.T) {
	ctx := context.Background()
	o := Options{Resamples: 500, Level: 0.95, Seed: 1}
	a := fakeUnits("q8", 4, 10, func(i, j int) float64 { return 0.001 * float64(1+i+j%3) }, func(i, j int) bool { return true })
	b := fakeUnits("q4", 4, 10, func(i, j int) float64 { return 0.01 * float64(1+i+j%3) }, func(i, j int) bool { return j != 0 })
	fa, err := Summarize(ctx, a, o)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := Summarize(ctx, b, o)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Compare(ctx, a, b, o)
	if err != nil {
		t.Fatal(err)
	}
	r := TextResult{Reference: "/m/ref.gguf", Text: "t.txt", Ctx: 64, TextTokens: 300, Chunks: 4, Arms: []Figures{fa, fb}, Pairs: []Difference{d}}
	var sb strings.Builder
	if err := r.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	for _, want := range []string{"reference ref:", "not correctness", "4 chunks of 64", "the chunk is the unit", "q4 − q8", "90.00% ["} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}

func TestRowSegmentScoresTheOutputOnly(t *testing.T) {
	id := func(n int) *int { return &n }
	row := genrecord.Row{RowID: "r1", PromptTokenIDs: []int{1, 2, 3}, Output: []genrecord.Step{{ID: id(7)}, {ID: id(8)}}}
	s, err := RowSegment("task-1", row)
	if err != nil {
		t.Fatal(err)
	}
	if s.Unit != "task-1" || s.Context != 3 || s.Scored() != 2 || len(s.Tokens) != 5 || s.Tokens[3] != 7 {
		t.Errorf("segment %+v: want the 3 prompt ids as context and the 2 output ids scored", s)
	}
	row.Output = append(row.Output, genrecord.Step{})
	if _, err := RowSegment("task-1", row); err == nil || !strings.Contains(err.Error(), "r1") {
		t.Errorf("a step without an id: got %v", err)
	}
	row.PromptTokenIDs = nil
	if _, err := RowSegment("task-1", row); err == nil || !strings.Contains(err.Error(), "prompt token ids") {
		t.Errorf("no prompt ids: got %v", err)
	}
}
