package tasks

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLintBundled(t *testing.T) {
	// fix-test keys run python; TestAuditBundledFixTest covers them.
	reg := DefaultRegistry(nil)
	for _, name := range []string{"banks/extract-json.jsonl"} {
		t.Run(name, func(t *testing.T) {
			b, err := LoadBank(name)
			if err != nil {
				t.Fatal(err)
			}
			r := Lint(context.Background(), b, reg)
			if r.Templates < 10 {
				t.Errorf("templates = %d, want >= 10", r.Templates)
			}
			for _, d := range []string{Easy, Medium, Hard} {
				if r.Difficulty[d] == 0 {
					t.Errorf("no %s tasks", d)
				}
			}
			if !r.OK() || len(r.NearDuplicates) > 0 {
				t.Errorf("lint found problems: dups %v near %v keys %v", r.ExactDuplicates, r.NearDuplicates, r.KeyFailures)
			}
			var buf bytes.Buffer
			if err := r.WriteText(&buf); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), "distinct templates") {
				t.Errorf("report lacks the template count:\n%s", buf.String())
			}
		})
	}
}

func TestLintFindsProblems(t *testing.T) {
	near := strings.Replace(testTask("c"), `What is 2+2?`, `What is 2+2 ?`, 1)
	nearish := strings.Replace(testTask("d"), `"What is 2+2?"`, `"Please tell me, in one word, what the sum of two and two is, and nothing else at all"`, 1)
	nearish2 := strings.Replace(testTask("e"), `"What is 2+2?"`, `"Please tell me, in one word, what the sum of two and two is, and nothing else at all please"`, 1)
	bad := strings.Replace(testTask("f"), `What is 2+2?`, `Name a three digit number`, 1)
	pub := strings.Replace(strings.Replace(testTask("g"), `"private"`, `"public-benchmark:gsm8k"`, 1), `What is 2+2?`, `Unrelated text about trains`, 1)
	b := mustParse(t, strings.Join([]string{testHeader, testTask("a"), near, nearish, nearish2, bad, pub}, "\n"))
	// A regex key whose example its own pattern rejects.
	b.Tasks[4].Grader = GraderRef{Name: "regex", Version: 1}
	b.Tasks[4].Key = []byte(`{"pattern":"^\\d{3}$","example":"12"}`)
	r := Lint(context.Background(), b, DefaultRegistry(nil))
	if len(r.ExactDuplicates) != 1 || r.ExactDuplicates[0].A != "a" || r.ExactDuplicates[0].B != "c" {
		t.Errorf("exact duplicates = %v, want a=c (punctuation ignored)", r.ExactDuplicates)
	}
	if len(r.NearDuplicates) != 1 || r.NearDuplicates[0].A != "d" || r.NearDuplicates[0].B != "e" {
		t.Errorf("near duplicates = %v, want d~e", r.NearDuplicates)
	}
	if len(r.KeyFailures) != 1 || r.KeyFailures[0].TaskID != "f" {
		t.Errorf("key failures = %v, want f", r.KeyFailures)
	}
	if r.Templates != 1 || r.OK() {
		t.Errorf("templates %d ok %v", r.Templates, r.OK())
	}
	var warned bool
	for _, w := range r.Warnings {
		warned = warned || strings.Contains(w, "recall")
	}
	if !warned {
		t.Errorf("no recall warning for a public benchmark task: %v", r.Warnings)
	}
}
