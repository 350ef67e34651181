package tasks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestCheckLeakage(t *testing.T) {
	b, err := LoadBank("banks/extract-json.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	victim, _ := b.Task("xj-contact-4")
	text := victim.Input.Prompt[strings.Index(victim.Input.Prompt, "Text: ")+6:]
	reworded := strings.Replace(victim.Input.Prompt, "Extract these fields", "Pull out the following fields", 1)
	places := []Place{
		{Name: "arms[0].system_prompt", Kind: PlaceSystemPrompt, Text: "You are a helpful assistant. Always answer in JSON."},
		{Name: "retrieval/docs.md", Kind: PlaceRetrieval, Text: "Some notes.\n\nExample: " + text + "\n\nMore notes about other things entirely."},
		{Name: "train/finetune.jsonl", Kind: PlaceTraining, Text: reworded},
	}
	r, err := CheckLeakage(context.Background(), []*Bank{b}, places)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tasks != len(b.Tasks) || !strings.Contains(r.Method, "8-gram") || !strings.Contains(r.Method, "0.50") {
		t.Errorf("report does not state its method and thresholds: %+v", r.Method)
	}
	hits := map[string]LeakHit{}
	for _, h := range r.Hits {
		if h.TaskID != victim.ID {
			t.Errorf("unexpected hit %s", h)
		}
		hits[h.Place+"/"+h.Part] = h
	}
	if _, ok := hits["retrieval/docs.md/input.prompt#2"]; !ok {
		t.Errorf("task text pasted into a retrieval doc not found: %v", r.Hits)
	}
	if h, ok := hits["train/finetune.jsonl/input"]; !ok || h.Method == "exact" {
		t.Errorf("reworded near-copy in training data not found as near-duplicate: %v", r.Hits)
	}
	for _, h := range r.Hits {
		if h.Place == "arms[0].system_prompt" {
			t.Errorf("clean system prompt flagged: %s", h)
		}
	}
	err = r.Err()
	if !errors.Is(err, ErrLeak) || !strings.Contains(err.Error(), "banks/extract-json.jsonl:xj-contact-4") || !strings.Contains(err.Error(), "retrieval/docs.md") {
		t.Errorf("leak error does not name both places: %v", err)
	}
}

func TestCheckLeakageKeyInTools(t *testing.T) {
	b, err := LoadBank("banks/fix-test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	task, _ := b.Task("ft-empty-input-4")
	var k codeKey
	if err := decodeKey(task, &k); err != nil {
		t.Fatal(err)
	}
	tool := Place{Name: "tools/snippets.json", Kind: PlaceToolSpec, Text: `{"snippets":["` + k.Files["ratio.py"] + `"]}`}
	r, err := CheckLeakage(context.Background(), []*Bank{b}, []Place{tool})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, h := range r.Hits {
		found = found || (h.TaskID == task.ID && strings.HasPrefix(h.Part, "key"))
	}
	if !found {
		t.Errorf("fixed file in a tool spec not found: %v", r.Hits)
	}
}

func TestCheckLeakageClean(t *testing.T) {
	bs, err := Bundled()
	if err != nil {
		t.Fatal(err)
	}
	places := []Place{{Name: "p", Kind: PlacePrompt, Text: "Answer the user's question in JSON. Be brief and exact."}}
	r, err := CheckLeakage(context.Background(), bs, places)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hits) != 0 || r.Err() != nil {
		t.Errorf("hits in a clean prompt: %v", r.Hits)
	}
}

// TestExactInIsSubstring: the window index never changes the exact step's
// answer: exactIn agrees with a scan of the place for parts cut from the
// place, parts with one word changed, and parts from nowhere.
func TestExactInIsSubstring(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	word := func() string { return fmt.Sprintf("w%d", rng.IntN(40)) } // small vocabulary: many shared windows
	var ws []string
	for range 5000 {
		ws = append(ws, word())
	}
	place := newPlaceText(strings.Join(ws, " "))
	hits := 0
	for i := range 3000 {
		n := leakMinWords + rng.IntN(20)
		at := rng.IntN(len(ws) - n)
		part := append([]string(nil), ws[at:at+n]...)
		switch i % 3 {
		case 1:
			part[rng.IntN(n)] = word()
		case 2:
			for j := range part {
				part[j] = word()
			}
		}
		tt := newLeakText(strings.Join(part, " "))
		want := strings.Contains(place.norm, tt.norm)
		if got := exactIn(tt, place); got != want {
			t.Fatalf("exactIn(%q) = %v, the scan says %v", tt.norm, got, want)
		}
		if want {
			hits++
		}
	}
	if hits < 1000 {
		t.Fatalf("only %d parts found: the test does not exercise hits", hits)
	}
}
