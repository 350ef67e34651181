package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/testenv"
	"rig/runtimes"
)

// TestComparePromptfooTwoProviders runs the real promptfoo (npm) against
// rig's llama-server with two providers of one config (the same model,
// answers cut at 32 and at 3 tokens, so that they disagree), then
// `rig compare --from promptfoo` on its output: the discordant tests it
// counts and its McNemar p are what the output file itself says, the p
// computed here as an exact binomial.
func TestComparePromptfooTwoProviders(t *testing.T) {
	testenv.Long(t, "starts llama-server and runs promptfoo against it")
	rt := startSmolLlamaServer(t)
	port, err := runtimes.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var tests strings.Builder
	for _, c := range [][2]string{{"France", "paris"}, {"Italy", "rome"}, {"Spain", "madrid"}, {"Germany", "berlin"}, {"Japan", "tokyo"},
		{"Egypt", "cairo"}, {"Russia", "moscow"}, {"Canada", "ottawa"}, {"Greece", "athens"}, {"Portugal", "lisbon"}} {
		fmt.Fprintf(&tests, "  - vars: {question: \"What is the capital of %s?\"}\n    assert: [{type: icontains, value: %s}]\n", c[0], c[1])
	}
	provider := `  - id: openai:chat:smollm2-135m-instruct
    label: %s
    config: {apiBaseUrl: "http://127.0.0.1:%d/v1", apiKey: rig-local, temperature: 0, max_tokens: %d}
`
	config := "description: rig compare of two providers\nprompts:\n  - \"Answer in one short sentence. {{ question }}\"\nproviders:\n" +
		fmt.Sprintf(provider, "long", port, 32) + fmt.Sprintf(provider, "short", port, 3) + "tests:\n" + tests.String()
	if err := os.WriteFile(filepath.Join(dir, "promptfooconfig.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	output := runPromptfooEval(t, dir, rt.Endpoint(), port)

	cmpJSON := filepath.Join(t.TempDir(), "compare.json")
	text, err := runRig(t, "compare", "--from", "promptfoo", output, "--out", cmpJSON)
	if err != nil {
		t.Fatalf("rig compare --from promptfoo: %v\n%s", err, text)
	}
	if !strings.Contains(text, "imported evidence") || !strings.Contains(text, "Answer in one short sentence. {{ question }}/pass") {
		t.Errorf("rig compare's output:\n%s", text)
	}
	var c struct {
		A, B struct {
			Model string `json:"model"`
		}
		Analysis struct {
			Pairs []comparedPair `json:"pairs"`
		} `json:"analysis"`
	}
	raw, err := os.ReadFile(cmpJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	var pass *comparedPair
	for i := range c.Analysis.Pairs {
		if c.Analysis.Pairs[i].JobKind == "Answer in one short sentence. {{ question }}/pass" {
			pass = &c.Analysis.Pairs[i]
		}
	}
	if c.A.Model != "long" || c.B.Model != "short" || pass == nil || pass.McNemar == nil || pass.Tasks != 10 {
		t.Fatalf("compare.json: A %q B %q, want long and short with a McNemar row of 10 tests:\n%s", c.A.Model, c.B.Model, raw)
	}
	bOnly, aOnly := promptfooDiscordant(t, output)
	if pass.McNemar.CandidateOnly != bOnly || pass.McNemar.BaselineOnly != aOnly {
		t.Errorf("rig counted short only %d, long only %d; output.json says %d and %d", pass.McNemar.CandidateOnly, pass.McNemar.BaselineOnly, bOnly, aOnly)
	}
	if want := binomialTwoSided(bOnly, aOnly); math.Abs(pass.McNemar.P-want) > 1e-12 {
		t.Errorf("McNemar p %g, exact binomial %g", pass.McNemar.P, want)
	}
	t.Logf("rig compare --from promptfoo:\n%s", text)
}

// comparedPair is a pair row of `rig compare --out`'s analysis.
type comparedPair struct {
	JobKind string `json:"job_kind"`
	Tasks   int    `json:"tasks"`
	McNemar *struct {
		CandidateOnly int     `json:"candidate_only"`
		BaselineOnly  int     `json:"baseline_only"`
		P             float64 `json:"p"`
	} `json:"mcnemar"`
}

// promptfooDiscordant counts, from promptfoo's output file, the tests only
// the "short" provider passed and those only "long" passed.
func promptfooDiscordant(t *testing.T, path string) (shortOnly, longOnly int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Results struct {
			Results []struct {
				Provider struct {
					Label string `json:"label"`
				} `json:"provider"`
				TestIdx int  `json:"testIdx"`
				Success bool `json:"success"`
			} `json:"results"`
		} `json:"results"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	pass := map[string]map[int]bool{"long": {}, "short": {}}
	for _, r := range o.Results.Results {
		pass[r.Provider.Label][r.TestIdx] = r.Success
	}
	if len(pass["long"]) != 10 || len(pass["short"]) != 10 {
		t.Fatalf("output.json: %d and %d results, want 10 per provider", len(pass["long"]), len(pass["short"]))
	}
	for i := range 10 {
		switch {
		case pass["short"][i] && !pass["long"][i]:
			shortOnly++
		case pass["long"][i] && !pass["short"][i]:
			longOnly++
		}
	}
	return shortOnly, longOnly
}
