package genrecord

import (
	"reflect"
	"regexp"
	"strconv"
	"testing"
)

// tokenLiteral is llama.cpp's parse_token for the id form: '<' '[' digits ']' '>'.
var tokenLiteral = regexp.MustCompile(`^<\[([0-9]+)\]>$`)

func TestForcedGrammar(t *testing.T) {
	for _, tc := range []struct {
		ids  []int
		want string
	}{
		{[]int{52, 40}, "root ::= <[52]> <[40]>"},
		{[]int{0}, "root ::= <[0]>"},
		{nil, `root ::= ""`},
	} {
		if got := ForcedGrammar(tc.ids); got != tc.want {
			t.Errorf("ForcedGrammar(%v) = %q, want %q", tc.ids, got, tc.want)
		}
	}
	ids := []int{151643, 7, 0, 32000, 1}
	g := ForcedGrammar(ids)
	fields := regexp.MustCompile(`\s+`).Split(g, -1)
	if fields[0] != "root" || fields[1] != "::=" {
		t.Fatalf("grammar %q does not define root", g)
	}
	for i, f := range fields[2:] {
		m := tokenLiteral.FindStringSubmatch(f)
		if m == nil {
			t.Fatalf("element %q is not a token-id literal", f)
		}
		if n, _ := strconv.Atoi(m[1]); n != ids[i] {
			t.Errorf("element %d forces %d, want %d", i, n, ids[i])
		}
	}
}

func TestForcedTokens(t *testing.T) {
	step := func(id int, text string) Step { return Step{ID: intp(id), Text: text, Bytes: Bytes(text)} }
	for _, tc := range []struct {
		name    string
		row     Row
		want    []int
		leftOut bool
		err     bool
	}{
		{"length stop keeps all", Row{StopReason: StopLength, Output: []Step{step(5, "a"), step(6, "b")}}, []int{5, 6}, false, false},
		{"eos left out", Row{StopReason: StopEOS, Output: []Step{step(5, "a"), step(2, "")}}, []int{5}, true, false},
		{"stop string keeps its token", Row{StopReason: StopEOS, Output: []Step{step(5, "a"), step(6, "\n\n")}}, []int{5, 6}, false, false},
		{"partial utf-8 token is not eos", Row{StopReason: StopEOS, Output: []Step{step(5, "a"), {ID: intp(7), Bytes: Bytes{0xe2}}}}, []int{5, 7}, false, false},
		{"no ids", Row{StopReason: StopLength, Output: []Step{{Text: "a"}}}, nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, left, err := ForcedTokens(tc.row)
			if (err != nil) != tc.err || left != tc.leftOut || !reflect.DeepEqual(ids, tc.want) {
				t.Fatalf("ForcedTokens = %v, %v, %v; want %v, %v, error %v", ids, left, err, tc.want, tc.leftOut, tc.err)
			}
		})
	}
}
