package preflight

import (
	"strings"
	"testing"
	"time"
)

// TestSlotsCountKVCache: each parallel slot holds a whole context of KV
// cache, so a profile that fits at one slot can fail at many, and the
// verdict says it is the slots, never a smaller context per slot.
func TestSlotsCountKVCache(t *testing.T) {
	f := fakeModel(t, "llama", 30, 576, 9, 3, 64, 0, 1000)
	one := predict(t, f, Profile{Context: 4096, Simulated: true})
	four := predict(t, f, Profile{Context: 4096, Parallel: 4, Simulated: true})
	if four.KVCells != 4*one.KVCells {
		t.Errorf("4 slots: %d KV cells, want 4 × %d", four.KVCells, one.KVCells)
	}
	if four.KVCache != 4*one.KVCache {
		t.Errorf("4 slots: KV cache %s, want 4 × %s", four.KVCache, one.KVCache)
	}
	if four.Card <= one.Card+3*one.KVCache-1 {
		t.Errorf("4 slots: card %s does not carry the three more contexts of KV cache (%s each) over one slot's %s", four.Card, one.KVCache, one.Card)
	}
	// A card with room for one slot and its measured error, not for four.
	card := Size(float64(one.Card)*(1+2*one.RelError)) + 1
	if card >= four.Card {
		t.Fatalf("test card %s is not below four slots' %s", card, four.Card)
	}
	p := Profile{Name: "sim", CardMemory: card, Context: 4096, Simulated: true}
	if v := Decide(predict(t, f, p), p, time.Unix(0, 0)); !v.Fits {
		t.Fatalf("one slot does not fit a %s card: %s", card, v.Reason)
	}
	p.Parallel = 4
	v := Decide(predict(t, f, p), p, time.Unix(0, 0))
	if v.Fits || v.Outcome != OutcomeDoesntFit {
		t.Fatalf("four slots fit a card sized for one: %s", v.Reason)
	}
	for _, w := range []string{"4 slots × context 4096", "whole pinned context"} {
		if !strings.Contains(v.Reason, w) {
			t.Errorf("verdict %q does not say %q", v.Reason, w)
		}
	}
}
