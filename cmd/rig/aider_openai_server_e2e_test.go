package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/runtimes"
)

// TestAiderOverOpenAIServerStudy runs Aider over a generic OpenAI-compatible
// server ("runtime": "aider+openai-server": llama-server's own /v1 endpoint
// driven through the generic path) on both Aider arms of the demo (SmolLM2
// at Q4_1 and Q8_0), one fix-test task each, through validation and a
// counted run. Aider's calls reach the server only through rig's recording
// proxy: each arm's record holds them as Aider rows with their top-K
// log-probabilities under the server's pins (runtime openai-server, the
// executable's digest), and its receipts name Aider as the harness and the
// server's pins. Both arms are generic so that one validation run covers
// the harness and the test stays short; the native Aider arms are tested
// by TestAiderStudyTrialsOnRealRuntimes.
func TestAiderOverOpenAIServerStudy(t *testing.T) {
	testenv.Long(t, "registers, freezes, validates and runs a study through the real Aider and llama-server")
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned llama-server and Aider", err)
	e := newRigEnv(t)
	name := "e2e-aider-openai-server"
	d, kind := demoDesignFor(t, name, "fix-test", 1)
	kind["harness_caps"] = map[string]any{"turns": 1, "tokens": 64, "wall": "5m"}
	var arms []any
	generic := map[string]bool{}
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		if !strings.HasPrefix(am["runtime"].(string), "aider+") {
			continue
		}
		// The arm's model, at the same pins, on a generic server.
		model, _, _ := strings.Cut(am["name"].(string), "-aider-")
		am["name"] = model + "-aider-generic"
		am["runtime"] = "aider+openai-server"
		am["server"] = map[string]any{
			"command": []any{"${LLAMA_SERVER_BIN}", "--model", "{model}", "--host", "127.0.0.1", "--port", "{port}",
				"--ctx-size", "{context}", "--threads", "{threads}", "--jinja", "--no-webui", "--offline"},
			"ready": "/health",
		}
		pins := am["pins"].(map[string]any)
		pins["runtime_build"] = "aider-chat 0.86.2 + llama-server's /v1 as openai-server"
		pins["stop_cap"] = 64 // equal across the job kind's arms
		generic[am["name"].(string)] = true
		arms = append(arms, am)
	}
	if len(arms) != 2 {
		t.Fatalf("the demo design has %d Aider arms, want the incumbent and the candidate", len(arms))
	}
	d["arms"] = arms
	keepItems(d, func(id string) bool { return id != "rig-bank-extract-json" && id != "ollama" })

	e.ensureGovernorPass()
	e.startDaemon()
	e.prepare(writeDesignMap(t, d), name)
	out := e.rig(true, "study", "run", name)
	if m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(out); m == nil || m[1] != m[2] || m[2] != "2" {
		t.Fatalf("run did not finish the 2 planned Aider trials:\n%s", out)
	}
	serverSum, err := runtimes.FileSHA256(in.LlamaServer)
	if err != nil {
		t.Fatal(err)
	}
	counted := map[string]int{}
	for _, r := range e.exportReceipts(name) {
		t.Logf("%s on %s under %s: %s, %d output tokens; %s", r.Arm, r.Runtime, r.Harness, r.Outcome, r.OutputTokens, r.Detail)
		if !generic[r.Arm] {
			t.Errorf("a receipt of arm %q, not one of the design's", r.Arm)
			continue
		}
		if r.Outcome.Counted() {
			counted[r.Arm]++
		}
		if r.Runtime != "openai-server" || r.Harness != "aider" || !strings.Contains(r.HarnessVersion, "0.86.2") {
			t.Errorf("%s: receipt names runtime %q, harness %q %q; want openai-server under Aider 0.86.2", r.Arm, r.Runtime, r.Harness, r.HarnessVersion)
		}
		if r.Pins["binary_sha256"] != serverSum || r.Pins["harness_caps"] != "turns 1, output tokens 64, wall 5m0s" {
			t.Errorf("%s: receipt pins binary_sha256 %q, harness_caps %q; want the server's executable %s and the design's caps", r.Arm, r.Pins["binary_sha256"], r.Pins["harness_caps"], serverSum)
		}
		if r.OutputTokens == 0 || !strings.Contains(r.Detail, "aider: exit") {
			t.Errorf("%s: the trial kept no Aider call: outcome %s, %d output tokens, detail %q", r.Arm, r.Outcome, r.OutputTokens, r.Detail)
		}
	}
	for arm := range generic {
		if counted[arm] != 1 {
			t.Errorf("%s: %d counted receipts, want its one trial's", arm, counted[arm])
		}
		head, rows, err := genrecord.ReadAll(filepath.Join(e.home, "studies", name, "executions", "exec-1", "generations-"+arm+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if head.Pins.Runtime != "openai-server" || head.Pins.BinarySHA256 != serverSum {
			t.Errorf("%s: record pins runtime %q, binary %q; want openai-server and %s", arm, head.Pins.Runtime, head.Pins.BinarySHA256, serverSum)
		}
		if len(rows) == 0 {
			t.Fatalf("%s: the record holds no row: Aider's call did not go through the proxy", arm)
		}
		for _, row := range rows {
			if row.Role != genrecord.RoleAider || len(row.Output) == 0 {
				t.Errorf("%s row %s: role %q, %d steps; want an Aider call with its tokens", arm, row.RowID, row.Role, len(row.Output))
				continue
			}
			for i, s := range row.Output {
				if !s.Scored() || len(s.Top) == 0 {
					t.Errorf("%s row %s step %d (%q) has no log-probability or top-K", arm, row.RowID, i, s.Text)
					break
				}
			}
		}
	}
}
