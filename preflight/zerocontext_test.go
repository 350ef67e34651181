package preflight

import (
	"bytes"
	"strings"
	"testing"

	"rig/internal/gguf"
)

// TestZeroTrainedContextIsNoted: a model file whose <arch>.context_length is
// 0 is read as 0, as ggml's own reader reads it, and the preflight says so
// beside its verdict instead of checking the pinned context against nothing
// (issue 46: it said "fits" with no note). A file without the key gets no
// such note.
func TestZeroTrainedContextIsNoted(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []gguf.KV
		note bool
	}{
		{"stated as 0", []gguf.KV{{Key: "llama.context_length", Type: gguf.ValueUint32, Value: uint32(0)}}, true},
		{"stated as 4096", []gguf.KV{{Key: "llama.context_length", Type: gguf.ValueUint32, Value: uint32(4096)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := encodeModel(t, gguf.PlausibleMeta("llama", tc.set...), 4)
			f, err := gguf.Read(bytes.NewReader(b), int64(len(b)), "zero.gguf")
			if err != nil {
				t.Fatal(err)
			}
			e, err := Predict(f, Profile{Name: "p", CardMemory: GiB, Context: 1024, Simulated: true}, RuntimeLlamaServer, mustCal(t))
			if err != nil {
				t.Fatal(err)
			}
			noted := strings.Contains(strings.Join(e.Notes, "\n"), "trained context of 0 (llama.context_length)")
			if noted != tc.note {
				t.Errorf("notes %q: the zero-context note present %v, want %v", e.Notes, noted, tc.note)
			}
		})
	}
}
