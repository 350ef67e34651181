package fidelity

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math"
	"slices"
	"strings"

	"rig/internal/gguf"
)

// ErrVocabDiffers says two models do not share a tokenizer, so their
// next-token distributions are over different things and no divergence
// between them means anything.
var ErrVocabDiffers = errors.New("the models' tokenizers differ")

// tokenizerPrefix is where GGUF keeps the tokenizer: its model, pre-tokenizer,
// token list, types, scores, merges and special ids. The chat template
// (tokenizer.chat_template) lies outside it, rightly: it renders prompts and
// does not change what a token id means.
const tokenizerPrefix = "tokenizer.ggml."

// VocabHash is the sha256 of a GGUF file's tokenizer metadata (every
// tokenizer.ggml.* key and value, in key order), read from its header.
func VocabHash(path string) (string, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return "", err
	}
	return vocabHash(f)
}

func vocabHash(f *gguf.File) (string, error) {
	var kvs []gguf.KV
	for _, kv := range f.Metadata {
		if strings.HasPrefix(kv.Key, tokenizerPrefix) {
			kvs = append(kvs, kv)
		}
	}
	if !slices.ContainsFunc(kvs, func(kv gguf.KV) bool { return kv.Key == tokenizerPrefix+"tokens" }) {
		return "", fmt.Errorf("%s: the GGUF header has no %stokens, so its vocabulary cannot be checked (use a model file converted with its tokenizer)", f.Path, tokenizerPrefix)
	}
	slices.SortFunc(kvs, func(a, b gguf.KV) int { return strings.Compare(a.Key, b.Key) })
	h := sha256.New()
	for _, kv := range kvs {
		writeString(h, kv.Key)
		writeValue(h, kv.Value)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SameTokenizer checks that arm's tokenizer is reference's, by VocabHash.
func SameTokenizer(reference, arm string) error {
	ref, err := VocabHash(reference)
	if err != nil {
		return err
	}
	got, err := VocabHash(arm)
	if err != nil {
		return err
	}
	if ref != got {
		return fmt.Errorf("%w: %s has tokenizer sha256:%.12s, the reference %s has sha256:%.12s (fidelity compares next-token distributions token id by token id, so an arm must be the same model family converted with the same tokenizer; pick a reference of the arm's family)", ErrVocabDiffers, arm, got, reference, ref)
	}
	return nil
}

// writeValue writes a metadata value unambiguously: a type tag, then
// lengths before contents.
func writeValue(h hash.Hash, v any) {
	var b [8]byte
	num := func(tag byte, u uint64) {
		binary.LittleEndian.PutUint64(b[:], u)
		h.Write([]byte{tag})
		h.Write(b[:])
	}
	switch x := v.(type) {
	case string:
		h.Write([]byte{'s'})
		writeString(h, x)
	case bool:
		num('b', map[bool]uint64{false: 0, true: 1}[x])
	case float32:
		num('f', uint64(math.Float32bits(x)))
	case float64:
		num('d', math.Float64bits(x))
	case []string:
		num('S', uint64(len(x)))
		for _, s := range x {
			writeString(h, s)
		}
	case []int32:
		num('I', uint64(len(x)))
		for _, n := range x {
			num('i', uint64(uint32(n)))
		}
	case []uint32:
		num('U', uint64(len(x)))
		for _, n := range x {
			num('u', uint64(n))
		}
	case []float32:
		num('F', uint64(len(x)))
		for _, n := range x {
			num('f', uint64(math.Float32bits(n)))
		}
	case []any:
		num('A', uint64(len(x)))
		for _, e := range x {
			writeValue(h, e)
		}
	default:
		if u, ok := gguf.AsUint(v); ok {
			num('n', u)
			return
		}
		// Signed integers AsUint refuses (negative ids) keep their text.
		h.Write([]byte{'?'})
		writeString(h, fmt.Sprintf("%T:%v", v, v))
	}
}

func writeString(h hash.Hash, s string) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
	h.Write(b[:])
	h.Write([]byte(s))
}
