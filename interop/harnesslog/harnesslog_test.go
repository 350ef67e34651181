package harnesslog

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeLMEvalLine is a line in the shape of lm-eval's --log_samples output,
// written here by hand for the parser's tests (not lm-eval's output: the
// real one is read in cmd/rig's end-to-end test).
func fakeLMEvalLine(doc int, exact float64) string {
	return fmt.Sprintf(`{"doc_id": %d, "doc": {"q": "q%d"}, "target": "t", "arguments": {}, "resps": [["x"]], "filtered_resps": ["x"], "filter": "none", "metrics": ["exact_match", "bleu"], "doc_hash": "h%d", "prompt_hash": "p", "target_hash": "t", "exact_match": %g, "bleu": ["a", "b"]}`, doc, doc, doc, exact)
}

func writeFakeLMEval(t *testing.T, dir, model string, passes []bool) string {
	t.Helper()
	var b strings.Builder
	for i, p := range passes {
		v := 0.0
		if p {
			v = 1
		}
		b.WriteString(fakeLMEvalLine(i, v) + "\n")
	}
	d := filepath.Join(dir, model)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d, "samples_tiny_qa_2026-12-06T12-00-00.123456.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// exactMcNemar is the two-sided exact binomial test of min(b, c) of b+c at
// one half, in exact rational arithmetic: the test's own reference.
func exactMcNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	tail := new(big.Rat)
	for i := 0; i <= min(b, c); i++ {
		tail.Add(tail, new(big.Rat).SetFrac(new(big.Int).Binomial(int64(n), int64(i)), new(big.Int).Lsh(big.NewInt(1), uint(n))))
	}
	p, _ := tail.Mul(tail, big.NewRat(2, 1)).Float64()
	return math.Min(1, p)
}

func TestCompareLMEvalPairsByDocAndGivesExactMcNemar(t *testing.T) {
	dir := t.TempDir()
	// 20 items: B alone passes 7, A alone passes 1, both pass 8, neither 4.
	var a, b []bool
	for i := range 20 {
		switch {
		case i < 7:
			a, b = append(a, false), append(b, true)
		case i < 8:
			a, b = append(a, true), append(b, false)
		case i < 16:
			a, b = append(a, true), append(b, true)
		default:
			a, b = append(a, false), append(b, false)
		}
	}
	la, err := Read(LMEval, filepath.Dir(writeFakeLMEval(t, filepath.Join(dir, "a"), "model-a", a)))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := Read(LMEval, writeFakeLMEval(t, filepath.Join(dir, "b"), "model-b", b))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(context.Background(), la[0], lb[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Report.Pairs) != 1 || c.Metrics[0].Name != "tiny_qa/exact_match" || c.Metrics[0].Pairs != 20 {
		t.Fatalf("metrics %+v (bleu's tuple values must be left out)", c.Metrics)
	}
	p := c.Report.Pairs[0]
	if p.McNemar == nil || p.McNemar.CandidateOnly != 7 || p.McNemar.BaselineOnly != 1 {
		t.Fatalf("McNemar %+v, want B only 7, A only 1", p.McNemar)
	}
	if want := exactMcNemar(7, 1); math.Abs(float64(p.P)-want) > 1e-12 {
		t.Errorf("McNemar p %g, exact binomial %g", float64(p.P), want)
	}
	if !(p.Interval.Lo < p.Delta && p.Delta < p.Interval.Hi) || math.Abs(float64(p.Delta)-0.3) > 1e-12 {
		t.Errorf("delta %g in [%g, %g], want 0.3 inside", float64(p.Delta), float64(p.Interval.Lo), float64(p.Interval.Hi))
	}
	var out strings.Builder
	if err := c.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"imported evidence", "no receipts", "model-a", "tiny_qa/exact_match", "mcnemar"} {
		if !strings.Contains(strings.ToLower(out.String()), strings.ToLower(want)) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCompareRefusesDifferentDocs(t *testing.T) {
	dir := t.TempDir()
	pa := writeFakeLMEval(t, filepath.Join(dir, "a"), "m", []bool{true, false})
	pb := writeFakeLMEval(t, filepath.Join(dir, "b"), "n", []bool{true, false})
	data, _ := os.ReadFile(pb)
	os.WriteFile(pb, []byte(strings.Replace(string(data), `"doc_hash": "h1"`, `"doc_hash": "other"`, 1)), 0o644)
	la, _ := Read(LMEval, pa)
	lb, _ := Read(LMEval, pb)
	if _, err := Compare(context.Background(), la[0], lb[0]); err == nil || !strings.Contains(err.Error(), "not of the same tasks") {
		t.Errorf("err = %v, want a refusal naming the differing item", err)
	}
}

func TestParseErrorsNameFileLineAndField(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"not json", "{\n", "f.jsonl:1: line: not a JSON object"},
		{"no doc_id", `{"metrics": ["acc"], "acc": 1}`, "f.jsonl:1: doc_id: missing"},
		{"no metrics", `{"doc_id": 0, "acc": 1}`, "f.jsonl:1: metrics: missing"},
		{"no scalar", fakeLMEvalLine(0, 1) + "\n" + `{"doc_id": 1, "metrics": ["acc"], "acc": "x"}`, "f.jsonl:2: metrics: none of [acc]"},
	}
	for _, c := range cases {
		_, err := ParseLMEval(strings.NewReader(c.in), "f.jsonl", "t")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := ParsePromptfoo([]byte(`{"results": {"results": [{"provider": {"id": "p"}, "success": true}]}}`), "out.json"); err == nil || !strings.Contains(err.Error(), "out.json: results.results[0].testIdx: missing") {
		t.Errorf("promptfoo: err = %v", err)
	}
	if _, err := ParseInspectJSON([]byte(`{"eval": {"task": "t", "model": "m"}, "samples": [{"epoch": 1, "scores": {"s": {"value": 1}}}]}`), "log.json"); err == nil || !strings.Contains(err.Error(), "log.json: samples[0]: id: missing") {
		t.Errorf("inspect: err = %v", err)
	}
}

func TestParseInspectLetterGradesAndErrors(t *testing.T) {
	l, err := ParseInspectJSON([]byte(`{"eval": {"task": "t", "model": "m"}, "samples": [
		{"id": 1, "epoch": 1, "scores": {"match": {"value": "C"}}},
		{"id": "two", "epoch": 2, "scores": {"match": {"value": "I"}, "multi": {"value": {"a": 0.25, "b": "P"}}}},
		{"id": 3, "epoch": 1, "error": {"message": "boom"}}]}`), "log.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Samples) != 2 || l.Samples[0].Metrics["match"] != 1 || l.Samples[1].Metrics["multi/b"] != 0.5 || l.Samples[1].Repeat != 2 {
		t.Errorf("samples %+v (the error sample has no score and is left out)", l.Samples)
	}
}

func TestParsePromptfooOneLogPerProvider(t *testing.T) {
	logs, err := ParsePromptfoo([]byte(`{"results": {"results": [
		{"provider": {"id": "openai:chat:a", "label": "small"}, "testIdx": 0, "promptIdx": 0, "prompt": {"label": "Answer {{q}}"}, "success": true, "score": 1},
		{"provider": {"id": "openai:chat:b"}, "testIdx": 0, "promptIdx": 1, "prompt": {"label": "Answer {{q}}"}, "success": false, "score": 0, "namedScores": {"tone": 0.5}},
		{"provider": {"id": "openai:chat:b"}, "testIdx": 1, "promptIdx": 0, "success": false, "failureReason": 2, "error": "connection refused"}]}}`), "out.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 2 || logs[0].Model != "openai:chat:b" || logs[1].Model != "small" || len(logs[0].Samples) != 1 || logs[1].Samples[0].Metrics["pass"] != 1 || logs[0].Samples[0].Metrics["named:tone"] != 0.5 {
		t.Fatalf("logs %+v", logs)
	}
	// The two providers' columns have their own promptIdx; they pair by the prompt.
	if logs[0].Samples[0].key() != logs[1].Samples[0].key() {
		t.Errorf("one test of one prompt under two providers does not pair: %q vs %q", logs[0].Samples[0].key(), logs[1].Samples[0].key())
	}
}

func FuzzParseLMEval(f *testing.F) {
	f.Add(fakeLMEvalLine(0, 1) + "\n" + fakeLMEvalLine(1, 0))
	f.Add(`{"doc_id": "x", "filter": "strict", "metrics": ["acc"], "acc": true}`)
	f.Fuzz(func(t *testing.T, in string) {
		ss, err := ParseLMEval(strings.NewReader(in), "f.jsonl", "t")
		if err == nil {
			for _, s := range ss {
				if len(s.Metrics) == 0 {
					t.Fatalf("a sample with no metric: %+v", s)
				}
			}
		}
	})
}

func FuzzParseInspectJSON(f *testing.F) {
	f.Add([]byte(`{"eval": {"task": "t", "model": "m"}, "samples": [{"id": 1, "epoch": 1, "scores": {"s": {"value": "C"}}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		l, err := ParseInspectJSON(in, "log.json")
		if err == nil {
			for _, s := range l.Samples {
				if s.Repeat < 1 {
					t.Fatalf("epoch %d accepted", s.Repeat)
				}
			}
		}
	})
}

func FuzzParseInspectZip(f *testing.F) {
	f.Add([]byte(`{"eval": {"task": "t", "model": "m"}}`), []byte(`{"id": "a", "epoch": 1, "scores": {"s": {"value": 0.5}}}`))
	f.Fuzz(func(t *testing.T, header, sample []byte) {
		ParseInspectZip(map[string][]byte{"header.json": header, "samples/a_epoch_1.json": sample}, "log.eval")
	})
}

func FuzzParsePromptfoo(f *testing.F) {
	f.Add([]byte(`{"results": {"results": [{"provider": {"id": "p"}, "testIdx": 0, "promptIdx": 0, "success": true, "score": 1}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		logs, err := ParsePromptfoo(in, "out.json")
		if err == nil {
			for _, l := range logs {
				if l.Model == "" {
					t.Fatal("a log with no provider name")
				}
			}
		}
	})
}
