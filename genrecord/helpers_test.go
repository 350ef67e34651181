package genrecord

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
)

// fakeModel is a deterministic stand-in for a language model: the logits at
// each step hash the prompt, every earlier token and a per-model salt, so an
// edited token moves every later step, and another salt is another model.
type fakeModel struct {
	salt  string
	vocab int
}

func (m fakeModel) logprobs(prompt string, prefix []int) []float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%v", m.salt, prompt, prefix)
	seed := h.Sum64()
	logits := make([]float64, m.vocab)
	maxL := math.Inf(-1)
	for i := range logits {
		seed = seed*6364136223846793005 + 1442695040888963407
		logits[i] = float64(seed>>11) / float64(1<<53) * 8
		maxL = math.Max(maxL, logits[i])
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(l - maxL)
	}
	lz := maxL + math.Log(z)
	for i := range logits {
		logits[i] -= lz
	}
	return logits
}

func tokText(id int) string { return fmt.Sprintf("t%d", id) }

func intp(v int) *int         { return &v }
func f64p(v float64) *float64 { return &v }

// step builds the recorded step for token id at this position.
func (m fakeModel) step(prompt string, prefix []int, id, k int) Step {
	lp := m.logprobs(prompt, prefix)
	order := make([]int, len(lp))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return lp[order[a]] > lp[order[b]] })
	top := make([]Alt, k)
	for j := 0; j < k; j++ {
		t := order[j]
		top[j] = Alt{ID: intp(t), Text: tokText(t), Bytes: Bytes(tokText(t)), Logprob: lp[t]}
	}
	return Step{ID: intp(id), Text: tokText(id), Bytes: Bytes(tokText(id)), Logprob: f64p(lp[id]), Top: top}
}

// generate produces n steps greedily (temperature 0) or by a seeded walk.
func (m fakeModel) generate(prompt string, n, k int, seed uint64) []Step {
	var ids []int
	var out []Step
	for i := 0; i < n; i++ {
		lp := m.logprobs(prompt, ids)
		best := 0
		for t := range lp {
			if lp[t] > lp[best] {
				best = t
			}
		}
		if seed != 0 {
			best = int((seed + uint64(i)*7919) % uint64(m.vocab))
		}
		out = append(out, m.step(prompt, ids, best, k))
		ids = append(ids, best)
	}
	return out
}

// rescore forces the row's tokens, as llama-server does with ForcedGrammar.
func (m fakeModel) rescore(row Row) []Step {
	var ids []int
	var out []Step
	for _, s := range row.Output {
		out = append(out, m.step(row.RenderedPrompt, ids, *s.ID, row.K))
		ids = append(ids, *s.ID)
	}
	return out
}

func testPins() Pins {
	return Pins{
		ModelSHA256:    strings.Repeat("a", 64),
		ModelName:      "smollm2-135m-instruct-q8_0",
		Runtime:        "llama-server",
		RuntimeVersion: "b6500",
		BinarySHA256:   strings.Repeat("b", 64),
		Libraries:      map[string]string{"/opt/rig/lib/libggml.so": strings.Repeat("c", 64), "/opt/rig/lib/libllama.so": strings.Repeat("d", 64)},
		BuildFlags:     "-DGGML_CUDA=OFF",
		MachineLine:    "test host, 2 cpu",
		DesignHash:     strings.Repeat("e", 64),
		StudyID:        "s1",
		ExecutionID:    "x1",
	}
}

func makeRow(m fakeModel, i, n int) Row {
	prompt := fmt.Sprintf("<|im_start|>user\nwrite item %d & more<|im_end|>\n", i)
	out := m.generate(prompt, n, DefaultK, uint64(i%3))
	return Row{
		Kind: KindRow, RowID: fmt.Sprintf("r%04d", i), Arm: "smollm2", Prompt: fmt.Sprintf("call-%d", i),
		Role: RoleCandidate, RenderedPrompt: prompt, PromptTokenIDs: []int{1, 2, 3},
		Output: out, K: DefaultK,
		Sampling:   Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, Seed: int64(i)},
		StopReason: StopLength, RuntimeTokenCount: n, WallMS: 10,
	}
}

// fakeRescorer re-scores rows with a fakeModel on a stack with given pins.
type fakeRescorer struct {
	model fakeModel
	pins  Pins
	calls int
	fail  map[string]error
}

func (f *fakeRescorer) Stack(context.Context) (Pins, error) { return f.pins, nil }

func (f *fakeRescorer) Rescore(_ context.Context, row Row) ([]Step, error) {
	f.calls++
	if err := f.fail[row.RowID]; err != nil {
		return nil, err
	}
	return f.model.rescore(row), nil
}
