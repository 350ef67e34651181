package tasks

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// fuzzImport holds one format's parser to what Import promises for any
// input: a bank or an error, never both; an error is a *BankError whose
// problems name the file (or a refused option); a bank re-reads through
// the strict bank reader with the same hash.
func fuzzImport(f *testing.F, c importCase, seeds ...string) {
	f.Add(readFixture(f, c.file))
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	reg := DefaultRegistry(nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Import(context.Background(), data, c.file, c.o, reg)
		if err != nil {
			var be *BankError
			if b != nil || !errors.As(err, &be) || be.Count == 0 {
				t.Fatalf("bank %v with error %v (want no bank and a *BankError)", b != nil, err)
			}
			for _, p := range be.Problems {
				if p.File != c.file || p.Field == "" {
					t.Fatalf("a problem without its file or field: %+v", p)
				}
			}
			return
		}
		var buf bytes.Buffer
		if err := b.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		again, err := ParseBank(&buf, "bank.jsonl")
		if err != nil {
			t.Fatalf("an imported bank does not parse: %v\n%s", err, buf.String())
		}
		if again.Hash != b.Hash || len(again.Tasks) != len(b.Tasks) {
			t.Fatalf("re-read hash %s (%d tasks), imported %s (%d)", again.Hash, len(again.Tasks), b.Hash, len(b.Tasks))
		}
	})
}

func FuzzImportInspect(f *testing.F) {
	fuzzImport(f, importCases()[0],
		`[{"id":"a","input":"q","target":"x","metadata":{"category":"c","level":"easy"}}]`,
		`{"input":[{"role":"assistant","content":"x"}],"target":"y"}`,
		`{"id":1.5,"input":"q","choices":["a"],"target":"A","metadata":{"category":"c","level":"hard"}}`,
		"[\n{\"input\":")
}

func FuzzImportPromptfoo(f *testing.F) {
	fuzzImport(f, importCases()[1],
		"- vars: {question: hi}\n  assert: [{type: equals, value: x}]\n  metadata: {topic: t, level: easy}\n",
		"prompts: ['{{question}} {% if x %}']\ntests: []\n",
		"tests: tests.yaml\n",
		"defaultTest: {vars: {question: [a, b]}}\ntests:\n- assert: [{type: python, value: x}]\n",
		"a: &a [*a]\n")
}

func FuzzImportLMEval(f *testing.F) {
	fuzzImport(f, importCases()[2],
		`{"doc_id":0,"doc":{"kind":"k"},"target":7,"arguments":[["p",{}],["q",{}]]}`,
		`{"doc_id":"x y","doc":{},"target":["a",""],"arguments":{"gen_args_0":{"arg_0":"p"}}}`)
}

func FuzzImportCSV(f *testing.F) {
	fuzzImport(f, importCases()[3],
		"id,question,answer,template,difficulty,holdout\na,\"q\nq\",b,t,easy,maybe\n",
		"id,question\n",
		"\ufeffid,question,answer,template,difficulty,holdout\n\"a,q,b,t,easy,no\n")
}
