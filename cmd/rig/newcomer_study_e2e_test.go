package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rig/report"
)

// newcomerBanks are a newcomer's own short-answer banks: one job kind graded
// by a regular expression, one by the normalized answer (issue 46's case).
var newcomerBanks = map[string]struct {
	grader string
	tasks  [][3]string // id, prompt, answer
}{
	"capital": {grader: "regex", tasks: [][3]string{
		{"cap-france", "What is the capital city of France?", "Paris"},
		{"cap-italy", "Name the capital of Italy.", "Rome"},
		{"cap-japan", "Which city is the capital of Japan?", "Tokyo"},
		{"cap-spain", "Spain's capital city is which city?", "Madrid"},
		{"cap-germany", "Tell me the German capital.", "Berlin"},
		{"cap-egypt", "In which city does Egypt have its capital?", "Cairo"},
		{"cap-russia", "What city is Russia governed from?", "Moscow"},
		{"cap-england", "London or Leeds: which is the capital of England?", "London"},
	}},
	"colour": {grader: "normalized", tasks: [][3]string{
		{"col-sky", "What colour is a clear daytime sky?", "blue"},
		{"col-grass", "Fresh grass in spring is what colour?", "green"},
		{"col-snow", "Snow that has just fallen has which colour?", "white"},
		{"col-coal", "A lump of coal is what colour?", "black"},
		{"col-banana", "Ripe bananas are usually which colour?", "yellow"},
		{"col-blood", "What colour is human blood?", "red"},
		{"col-orange", "The fruit named orange is what colour?", "orange"},
		{"col-night", "The sky at midnight without a moon looks what colour?", "black"},
	}},
}

// writeNewcomerStudy writes, in one folder, the newcomer's two banks, a
// licence registry for them and a design: three arms across llama-server and
// Ollama on both job kinds, and an early-stopping rule.
func writeNewcomerStudy(t *testing.T, e *rigEnv, name string) string {
	t.Helper()
	dir := t.TempDir()
	var entries []any
	var kinds []any
	var items []any
	for kind, b := range newcomerBanks {
		lines := []string{fmt.Sprintf(`{"schema_version":1,"job_kind":%q,"bank_version":"1","description":"a newcomer's short-answer questions"}`, kind)}
		for i, tk := range b.tasks {
			key := map[string]any{"answer": strings.ToLower(tk[2])}
			prompt := tk[1] + " Answer with one word."
			if b.grader == "regex" {
				key = map[string]any{"pattern": `(?i)\b` + tk[2] + `\b`, "example": tk[2]}
			}
			task := map[string]any{"id": tk[0], "job_kind": kind, "template_id": tk[0], "difficulty": []string{"easy", "medium"}[i%2],
				"input": map[string]any{"prompt": prompt}, "key": key, "grader": map[string]any{"name": b.grader, "version": 1}, "holdout": false, "source": "private"}
			line, _ := json.Marshal(task)
			lines = append(lines, string(line))
		}
		bank := filepath.Join(dir, kind+".jsonl")
		if err := os.WriteFile(bank, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.rig(true, "tasks", "audit", bank)
		id := "newcomer-" + kind
		entries = append(entries, map[string]any{"id": id, "item": kind + ".jsonl, the newcomer's own questions", "kind": "dataset",
			"licence": "studio-internal", "source_page": kind + ".jsonl", "clause": "written by staff", "date_read": "2026-12-01",
			"verdicts": map[string]any{"evaluation": map[string]any{"verdict": "allowed", "reading": "written by the studio for evaluation"}}})
		items = append(items, map[string]any{"role": "dataset", "name": kind + " questions", "registry_id": id, "use": "evaluation"})
		kinds = append(kinds, map[string]any{"name": kind, "decision": "which local model answers " + kind + " questions",
			"task_bank": kind + ".jsonl", "ranking_measure": map[string]any{"name": "pass_rate", "direction": "higher"},
			"grader": map[string]any{"name": b.grader, "version": 1}})
	}
	reg, _ := json.MarshalIndent(map[string]any{"schema_version": 1, "entries": entries}, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "licences.json"), reg, 0o644); err != nil {
		t.Fatal(err)
	}
	d := readDesignMap(t, "../../examples/demo-study/design.json")
	d["name"] = name
	d["repeats"] = 1
	d["licence_registry"] = "licences.json"
	d["job_kinds"] = kinds
	var arms []any
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		if rt := am["runtime"].(string); rt == "llama-server" || rt == "ollama" {
			am["job_kinds"] = []any{"capital", "colour"}
			pins := am["pins"].(map[string]any)
			pins["stop_cap"] = 32
			arms = append(arms, am)
		}
	}
	d["arms"] = arms
	keepItems(d, func(id string) bool { return !strings.HasPrefix(id, "rig-bank-") && id != "aider-chat" })
	d["items"] = append(d["items"].([]any), items...)
	d["stopping"] = map[string]any{"method": "group_sequential", "spending": "pocock", "futility": map[string]any{}}
	d["power"] = map[string]any{"smallest_detectable_difference": 0.5, "pilot_discordance": 0.5, "task_count": 8, "power": 0.8}
	raw, _ := json.MarshalIndent(d, "", " ")
	path := filepath.Join(dir, "design.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNewcomerStudyReportReadsAlike is the newcomer: their own
// short-answer banks (a regex-graded and a normalized job kind), three arms
// across llama-server and Ollama and an early-stopping rule, from register
// to a recorded decision on the real runtimes. The report it ends with must
// read alike in report.json, report.md and the CLI's summary
// (checkReportReadsAlike), and say of the smallest detectable difference
// which number the design states and which rig computed.
func TestNewcomerStudyReportReadsAlike(t *testing.T) {
	e := newRigEnv(t)
	e.ensureGovernorPass()
	e.startDaemon()
	name := "newcomer"
	design := writeNewcomerStudy(t, e, name)
	e.prepare(design, name)
	e.rig(true, "study", "dry-run", name)
	out := e.rig(true, "study", "run", name)
	if !regexp.MustCompile(`done: \d+/\d+ trials`).MatchString(out) {
		t.Fatalf("the run did not end:\n%s", out)
	}
	summary := e.rig(true, "study", "report", name)
	jsonPath := regexp.MustCompile(`(?m)^\s+(\S+report\.json)$`).FindStringSubmatch(summary)
	if jsonPath == nil {
		t.Fatalf("the report's files are not printed:\n%s", summary)
	}
	raw, err := os.ReadFile(jsonPath[1])
	if err != nil {
		t.Fatal(err)
	}
	var data report.Data
	if err := json.Unmarshal(raw, &data); err != nil {
		t.Fatal(err)
	}
	if len(data.Kinds) != 2 {
		t.Fatalf("report.json has %d job kinds, want capital and colour", len(data.Kinds))
	}
	for _, k := range data.Kinds {
		if len(k.Arms) != 3 || len(k.Pairs) == 0 {
			t.Errorf("job kind %s: %d arms and %d pairs, want 3 arms and its named pairs", k.Name, len(k.Arms), len(k.Pairs))
		}
	}
	md, err := os.ReadFile(strings.TrimSuffix(jsonPath[1], ".json") + ".md")
	if err != nil {
		t.Fatal(err)
	}
	checkReportReadsAlike(t, data, string(md), summary)
	if l := lineHolding(string(md), "smallest detectable difference stated by the design: ±0.500 at 80% power; computed by rig: "); l == "" || strings.Contains(l, "no pilot discordance") {
		t.Errorf("report.md does not say the stated and the computed detectable difference side by side (the design gives a pilot): %q", l)
	}
	if data.Stop == nil {
		t.Error("report.json has no early-stopping section for a study with a stopping rule")
	}
	hash := regexp.MustCompile(`comparison ([0-9a-f]{12})`).FindStringSubmatch(summary)
	if hash == nil {
		t.Fatalf("the summary shows no comparison hash:\n%s", summary)
	}
	e.rig(true, "study", "decide", name, "--comparison", hash[1], "--rationale", "the newcomer's study, as the rule reads it", "--yes")
}
