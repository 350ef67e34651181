package fidelity

import (
	"errors"
	"fmt"

	"rig/internal/gguf"
)

// ErrVocabDiffers says two models do not share a tokenizer, so their
// next-token distributions are over different things and no divergence
// between them means anything.
var ErrVocabDiffers = errors.New("the models' tokenizers differ")

// VocabHash is the sha256 of a GGUF file's tokenizer metadata (every
// tokenizer.ggml.* key and value, in key order), read from its header
// (gguf.File.VocabHash, which the design's validation uses too).
func VocabHash(path string) (string, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return "", err
	}
	return f.VocabHash()
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
