package fidelity

import (
	"reflect"
	"testing"
)

// A rendered prompt is cut at the vocabulary's special tokens, the longest
// first, as llama.cpp cuts a text it parses specials from; text between
// them stays whole.
func TestRowTokenizerCutsAtSpecialTokens(t *testing.T) {
	tk := &RowTokenizer{specials: []special{{"<|im_start|>", 1}, {"<|im_end|>", 2}, {"<|im", 9}}}
	for _, sp := range tk.specials {
		tk.first[sp.text[0]] = true
	}
	got := tk.cut("<|im_start|>user\nHi <b><|im_end|>\n<|im_start|>assistant\n<|im")
	want := []special{{"<|im_start|>", 1}, {"user\nHi <b>", -1}, {"<|im_end|>", 2}, {"\n", -1}, {"<|im_start|>", 1}, {"assistant\n", -1}, {"<|im", 9}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cut = %+v\nwant %+v", got, want)
	}
	if got := tk.cut("no specials here"); !reflect.DeepEqual(got, []special{{"no specials here", -1}}) {
		t.Errorf("plain text cut into %+v", got)
	}
}
