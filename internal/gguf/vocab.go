package gguf

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"math"
	"slices"
	"strings"
)

// TokenizerPrefix is where GGUF keeps the tokenizer: its model,
// pre-tokenizer, token list, types, scores, merges and special ids. The chat
// template (tokenizer.chat_template) lies outside it, rightly: it renders
// prompts and does not change what a token id means.
const TokenizerPrefix = "tokenizer.ggml."

// VocabHash is the sha256 of the file's tokenizer metadata (every
// tokenizer.ggml.* key and value, in key order): two files with the same
// hash mean the same thing by every token id, so their next-token
// distributions can be compared id by id. It lives here, beside the reader,
// so that the design's validation (package studies) and the fidelity
// measure hash a file the same way.
func (f *File) VocabHash() (string, error) {
	var kvs []KV
	for _, kv := range f.Metadata {
		if strings.HasPrefix(kv.Key, TokenizerPrefix) {
			kvs = append(kvs, kv)
		}
	}
	if !slices.ContainsFunc(kvs, func(kv KV) bool { return kv.Key == TokenizerPrefix+"tokens" }) {
		return "", fmt.Errorf("%s: the GGUF header has no %stokens, so its vocabulary cannot be checked (use a model file converted with its tokenizer)", f.Path, TokenizerPrefix)
	}
	slices.SortFunc(kvs, func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	h := sha256.New()
	for _, kv := range kvs {
		hashString(h, kv.Key)
		hashValue(h, kv.Value)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// hashValue writes a metadata value unambiguously: a type tag, then
// lengths before contents.
func hashValue(h hash.Hash, v any) {
	var b [8]byte
	num := func(tag byte, u uint64) {
		binary.LittleEndian.PutUint64(b[:], u)
		h.Write([]byte{tag})
		h.Write(b[:])
	}
	switch x := v.(type) {
	case string:
		h.Write([]byte{'s'})
		hashString(h, x)
	case bool:
		num('b', map[bool]uint64{false: 0, true: 1}[x])
	case float32:
		num('f', uint64(math.Float32bits(x)))
	case float64:
		num('d', math.Float64bits(x))
	case []string:
		num('S', uint64(len(x)))
		for _, s := range x {
			hashString(h, s)
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
			hashValue(h, e)
		}
	default:
		if u, ok := AsUint(v); ok {
			num('n', u)
			return
		}
		// Signed integers AsUint refuses (negative ids) keep their text.
		h.Write([]byte{'?'})
		hashString(h, fmt.Sprintf("%T:%v", v, v))
	}
}

func hashString(h hash.Hash, s string) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
	h.Write(b[:])
	h.Write([]byte(s))
}
