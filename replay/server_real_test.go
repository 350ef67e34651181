package replay

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/runtimes"
)

// realServers are the two OpenAI-compatible servers that are not rig's own
// code which the tests run: llama-server's /v1 driven through the generic
// path, and llama-cpp-python's server (scripts/setup-test-tools.sh), each
// speaking both APIs as docs/runtimes.md's snippets start them.
func realServers(t *testing.T, in provision.Installed) map[string]runtimes.ServerSpec {
	t.Helper()
	py, err := provision.TestTool("LLAMA_CPP_PYTHON_BIN")
	testenv.NeedsSetup(t, "llama-cpp-python (scripts/setup-test-tools.sh)", err)
	venv, err := provision.TestTool("LLAMA_CPP_PYTHON_VENV")
	testenv.NeedsSetup(t, "llama-cpp-python (scripts/setup-test-tools.sh)", err)
	both := []string{runtimes.APIChat, runtimes.APICompletions}
	lcp := []string{py, "-m", "llama_cpp.server", "--model", "{model}", "--host", "127.0.0.1", "--port", "{port}",
		"--n_ctx", "{context}", "--logits_all", "true", "--model_alias", "m"}
	return map[string]runtimes.ServerSpec{
		"llama-server-v1": {Command: []string{in.LlamaServer, "--model", "{model}", "--host", "127.0.0.1", "--port", "{port}",
			"--ctx-size", "{context}", "--jinja", "--no-webui", "--offline"}, Ready: "/health", API: both,
			// As docs/runtimes.md's snippet: each prompt evaluated afresh,
			// so that a row regenerates as it was made.
			Request: map[string]any{"cache_prompt": false}},
		"llama-cpp-python": {Command: lcp, PythonEnv: venv, ServedModel: "m", API: both},
		// Gemma 3's one-token chat answer on llama-cpp-python carries no
		// log-probabilities, which the start refuses (ErrNoLogprobs), so
		// its arm speaks completions only.
		"llama-cpp-python-completions": {Command: lcp, PythonEnv: venv, ServedModel: "m", API: []string{runtimes.APICompletions}},
	}
}

// TestOpenAIServerRowsReplay generates rows on each real server through the
// runtime code a study's trials use (half chat, half plain text sent to
// /v1/completions), keeps them as a record, and replays it with
// ReplayRecord, which starts the server again from its spec: the genuine
// rows reproduce, each row says how it was re-scored, one-token edits of
// the kept text are caught, and a record made under another Python
// environment is a stale asset, not replayed. llama-server's /v1 refuses
// echo and llama-cpp-python's echo is one token off for SmolLM2 (no
// start-of-text token), so their rows regenerate; Gemma 3 on
// llama-cpp-python scores its plain-text rows by the server's prompt
// log-probabilities.
func TestOpenAIServerRowsReplay(t *testing.T) {
	in := replayProvisioned(t)
	servers := realServers(t, in)
	for _, c := range []struct {
		name, server, model string
		rows                int
		// plain is how the plain-text rows are re-scored.
		plain string
		// exact: the genuine rows reproduce bit for bit. Otherwise the
		// server's own state changes the last bits (llama-cpp-python reuses
		// the previous request's prompt prefix, so a replayed prompt is
		// evaluated in other batches than at generation, through repacked
		// Q4_K weights for Gemma): the same tokens must come back, and the
		// drift is what rig replay calibrate measures for the server.
		exact bool
	}{
		{"llama-server-v1", "llama-server-v1", goalModel, 4, "regenerated (the server's answer to echo holds no log-probabilities", true},
		{"llama-cpp-python smollm2", "llama-cpp-python", goalModel, 4, "regenerated (the server's echo holds", false},
		// Two rows: llama-cpp-python's echo sorts Gemma's whole 262,144-entry
		// vocabulary in Python at every token, minutes a row here.
		{"llama-cpp-python gemma", "llama-cpp-python-completions", goalControl, 2, MethodPromptLogprobs + "|regenerated (the server's prompt log-probabilities disputed it)", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			work := t.TempDir()
			spec := servers[c.server]
			st, err := startStackOf(ctx, in, runtimes.OpenAIServerKind, in.Models[c.model], ReplayCalibrationRequest{Server: &spec}, filepath.Join(work, "gen"), 1)
			if err != nil {
				t.Fatal(err)
			}
			live, err := st.generateRows(ctx, "r", c.rows, 12, "")
			if err != nil {
				st.stop()
				t.Fatal(err)
			}
			pins, rows := st.header.Pins, rowsOf(live)
			set := replaySet{work: work}
			rec, err := set.record("generations-generic.jsonl", pins, rows)
			if err != nil {
				st.stop()
				t.Fatal(err)
			}
			// The first pass alone, tolerance-free, as calibration measures
			// it: how far the server's prompt log-probabilities (where it
			// gives them) fall from the decode steps that made the rows.
			first, err := genrecord.Replay(ctx, rec, st.rs(), genrecord.ReplayOptions{})
			st.stop()
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range first.Results {
				t.Logf("first pass, row %s (%s): %s, max |Δ| %.3g nats, row mean %.3g", r.RowID, st.server.methods.get(r.RowID), r.Status, r.Comparison.MaxAbsDiff, r.Comparison.Distance("").Row)
			}
			replay := func(file string, opts genrecord.ReplayOptions) genrecord.Summary {
				t.Helper()
				sum, err := ReplayRecord(ctx, ReplayRequest{File: file, Server: &spec, WorkDir: filepath.Join(work, "replay-"+filepath.Base(file)), Options: opts})
				if err != nil {
					t.Fatal(err)
				}
				return sum
			}
			sum := replay(rec, genrecord.ReplayOptions{Tolerance: serverTestTolerance})
			if c.exact && (sum.Status != genrecord.StatusReproduced || sum.Reproduced != len(rows)) {
				t.Errorf("genuine rows: %s, %d of %d reproduced: %+v", sum.Status, sum.Reproduced, len(rows), sum.Results)
			}
			for _, r := range sum.Results {
				if cmp := r.Comparison; r.Status == genrecord.StatusError || cmp.TokenChanged || cmp.Short || cmp.FieldChanged || cmp.Checked == 0 {
					t.Errorf("genuine row %s: %s %s, tokens changed %v, short %v, field changed %v, %d steps checked", r.RowID, r.Status, r.Error, cmp.TokenChanged, cmp.Short, cmp.FieldChanged, cmp.Checked)
				}
			}
			for i, r := range sum.Results {
				want := "regenerated (a chat row"
				if keptMessages(rows[i].RenderedPrompt) == nil {
					want = c.plain
				}
				if !hasPrefixOf(r.Method, want) {
					t.Errorf("row %s: method %q, want %q…", r.RowID, r.Method, want)
				}
			}
			t.Logf("genuine: max |Δ| %.3g nats; %s", sum.MaxAbsDiff, strings.Join(sum.Warnings, "; "))

			edited, n, err := set.edits("edited.jsonl", pins, rows, editOneToken)
			if err != nil || n == 0 {
				t.Fatalf("no row could be edited (%d): %v", n, err)
			}
			sum = replay(edited, genrecord.ReplayOptions{Tolerance: serverTestTolerance})
			if sum.Mismatched != n || sum.Status != genrecord.StatusMismatch {
				t.Errorf("one-token edits: %d of %d caught (%s): %+v", sum.Mismatched, n, sum.Status, sum.Results)
			}

			if pins.EnvSHA256 != "" {
				stale := pins
				stale.EnvSHA256 = strings.Repeat("0", 64)
				other, err := set.record("stale.jsonl", stale, rows)
				if err != nil {
					t.Fatal(err)
				}
				_, err = ReplayRecord(ctx, ReplayRequest{File: other, Server: &spec, WorkDir: filepath.Join(work, "replay-stale")})
				if err == nil || !strings.Contains(err.Error(), "stale_asset") || !strings.Contains(err.Error(), "Python environment") {
					t.Errorf("a record made under another environment: %v, want stale_asset", err)
				}
			}
		})
	}
}

// serverTestTolerance is what the rows are held to in
// TestOpenAIServerRowsReplay: rig's default prefill tolerance, as the
// server's prompt log-probabilities are a batched pass like prefill's (a
// row they dispute is regenerated, and that decides).
var serverTestTolerance = DefaultPrefillTolerance

// TestOpenAIServerCalibration runs `rig replay calibrate` on llama-server's
// /v1 driven as a generic server, at a small size: SmolLM2's and Gemma 3's
// rows, half chat and half plain text, genuine and edited, re-scored by the
// other model and the other quant on the same server command. The server
// block sends {"cache_prompt": false} with every request, as
// docs/runtimes.md's snippet does: each prompt is evaluated afresh, so the
// genuine rows regenerated on the warm server come back bit for bit and
// the calibration separates them from every control (without it they
// drifted up to 0.28 nats and it did not: docs/generations.md). The entry
// is the server's (its pins, the request fields among them), every control
// that changes a token or a kept field is caught, and replay takes the
// entry for a record of that server.
// (llama-cpp-python's echo on Gemma costs minutes a row here:
// TestOpenAIServerRowsReplay measures it on two.)
func TestOpenAIServerCalibration(t *testing.T) {
	in := replayProvisioned(t)
	spec := realServers(t, in)["llama-server-v1"]
	ctx := context.Background()
	work := t.TempDir()
	cal, err := CalibrateReplay(ctx, ReplayCalibrationRequest{Runtimes: []string{runtimes.OpenAIServerKind}, Model: goalModel, Control: goalControl,
		Rows: 8, ControlRows: 4, MaxTokens: 12, WorkDir: work, Server: &spec})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := cal.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log(text.String())
	if len(cal.Runtimes) != 1 {
		t.Fatalf("%d runtime entries", len(cal.Runtimes))
	}
	rc := cal.Runtimes[0]
	if rc.Runtime != runtimes.OpenAIServerKind || rc.Pins.BinarySHA256 == "" || rc.Pins.Runtime != runtimes.OpenAIServerKind || rc.Pins.ServerRequest != `{"cache_prompt":false}` {
		t.Errorf("entry: runtime %s, server %q, request %q", rc.Runtime, rc.Pins.BinarySHA256, rc.Pins.ServerRequest)
	}
	if !rc.Separable() || rc.Calibration.FalseAccepts != 0 || rc.Calibration.FalseRejects != 0 {
		t.Errorf("with cache_prompt false the genuine rows must regenerate as made and be told from every control: separable %v, false accepts %d, false rejects %d", rc.Separable(), rc.Calibration.FalseAccepts, rc.Calibration.FalseRejects)
	}
	for _, g := range rc.Groups {
		if g.Side == SideControl && g.Changed > g.Caught {
			t.Errorf("%s: %d rows changed a token or field, %d caught", g.Name, g.Changed, g.Caught)
		}
	}
	path := filepath.Join(work, "cal.json")
	if err := cal.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	tol, err := LoadReplayTolerance(path, runtimes.OpenAIServerKind, rc.Pins, "")
	if err != nil || tol.Tolerance != rc.Calibration.Tolerance {
		t.Errorf("the record's own server's tolerance: %+v, %v", tol, err)
	}
	// The same server without the request block is not the one measured.
	other := rc.Pins
	other.ServerRequest = ""
	if _, err := LoadReplayTolerance(path, runtimes.OpenAIServerKind, other, ""); err == nil {
		t.Error("a record of the server without cache_prompt false took this calibration's tolerance")
	}
	t.Logf("separable: %v; false accepts %d, false rejects %d", rc.Separable(), rc.Calibration.FalseAccepts, rc.Calibration.FalseRejects)
}

// hasPrefixOf says whether s begins with one of the "|"-separated prefixes.
func hasPrefixOf(s, prefixes string) bool {
	for _, p := range strings.Split(prefixes, "|") {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
