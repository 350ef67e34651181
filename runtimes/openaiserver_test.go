package runtimes

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rig/internal/provision"
	"rig/internal/testenv"
)

// llamaServerGenericSpec is the provisioned llama-server described as any
// OpenAI-compatible server is: its own /v1 endpoint, driven through the
// generic path.
func llamaServerGenericSpec(bin string) ServerSpec {
	return ServerSpec{
		Command: []string{bin, "--model", "{model}", "--host", "127.0.0.1", "--port", "{port}",
			"--ctx-size", "{context}", "--threads", "{threads}", "--jinja", "--no-webui", "--offline"},
		Ready: "/health", API: []string{APIChat, APICompletions},
		// As docs/runtimes.md's snippet: each prompt evaluated afresh.
		Request: map[string]any{"cache_prompt": false},
	}
}

// TestOpenAIServerDrivesLlamaServerV1 starts the real llama-server as a
// generic OpenAI-compatible server in rig's sandbox and checks what the
// generic path records: every token with its top-K, usage counts, time to
// the first token, the executable's digest and the version the server
// reports; then the same greedy request on rig's native llama-server arm
// gives the same text.
func TestOpenAIServerDrivesLlamaServerV1(t *testing.T) {
	in := provisioned(t)
	m := in.Models["smollm2-135m-instruct"]
	spec := llamaServerGenericSpec(in.LlamaServer)
	ctx := context.Background()
	cfg := Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()}
	// Pins unlike llama-server's defaults (top_k 40, top_p 0.95, min_p 0.05,
	// a random seed), so that a held pin is the request's, not a default.
	pins := RequestPins{Sampling: Sampling{Temperature: 0.5, TopK: 7, TopP: 0.8, MinP: 0, Seed: 1234}, StopCap: 300}
	srv, err := StartOpenAIServer(ctx, spec, cfg, ServerAssets{}, pins)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(ctx)
	// llama-server reports what it used: every pin is checked, none is
	// left "not reported".
	caps := srv.Pins().ServerCaps
	t.Logf("server caps: %s", caps)
	for _, want := range []string{"context 1024 held (/props)", "slots 1 held (/props)", "temperature 0.5 held (/slots)", "top_k 7 held (/slots)",
		"top_p 0.8 held (/slots)", "min_p 0 held (/slots)", "seed 1234 held (/slots)", "stop_cap 300 held (/slots)"} {
		if !strings.Contains(caps, want) {
			t.Errorf("server caps %q lack %q", caps, want)
		}
	}
	req := Request{CallID: "g", Messages: []Message{{Role: "user", Content: "Name three rivers."}},
		Sampling: Sampling{Temperature: 0, Seed: 7}, MaxTokens: 24, TopK: 5}
	res, err := srv.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text == "" || len(res.Steps) == 0 || res.LogprobsMissing != 0 || len(res.Steps) != res.OutputTokens {
		t.Fatalf("text %q, %d steps for %d output tokens, %d without log-probabilities", res.Text, len(res.Steps), res.OutputTokens, res.LogprobsMissing)
	}
	for i, st := range res.Steps {
		if len(st.Top) != 5 || st.Logprob > 0 {
			t.Fatalf("step %d: %d alternatives, logprob %v", i, len(st.Top), st.Logprob)
		}
	}
	if res.PromptTokens == 0 || res.Timings.PromptDuration <= 0 || res.Timings.OutputPerSecond <= 0 {
		t.Errorf("usage and timings not recorded: %+v", res.Timings)
	}
	p := srv.Pins()
	if p.Runtime != OpenAIServerKind || p.RuntimeVersion == "" || p.ServedModel == "" || !p.Sandboxed || len(p.Libraries) == 0 {
		t.Errorf("pins: runtime %q version %q served %q sandboxed %v, %d libraries", p.Runtime, p.RuntimeVersion, p.ServedModel, p.Sandboxed, len(p.Libraries))
	}
	if p.ServerRequest != `{"cache_prompt":false}` {
		t.Errorf("pins: server request %q, the spec's request block was {\"cache_prompt\": false}", p.ServerRequest)
	}
	if sum, _ := FileSHA256(in.LlamaServer); p.BinarySHA256 != sum {
		t.Errorf("executable digest %s, the file's %s", p.BinarySHA256, sum)
	}

	native, err := Launch(ctx, in, "llama-server", Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer native.Stop(ctx)
	want, err := native.Generate(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != want.Text {
		t.Errorf("greedy text differs: generic %q, native %q", res.Text, want.Text)
	}

	// A changed executable is stale before anything starts.
	frozen, err := ReadServerAssets(spec)
	if err != nil {
		t.Fatal(err)
	}
	frozen.ExecutableSHA256 = strings.Repeat("0", 64)
	if _, err := StartOpenAIServer(ctx, spec, Config{Model: m.Path, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()}, frozen, RequestPins{}); !errors.Is(err, ErrStaleServer) {
		t.Errorf("a changed executable started: %v", err)
	}
}

// fakeServerPy is a fake OpenAI-compatible server that answers without
// log-probabilities, as some servers do unless asked at start-up.
const fakeServerPy = `import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def reply(self, obj, ctype="application/json"):
        b = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
        self.send_response(200); self.send_header("Content-Type", ctype); self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def do_GET(self):
        self.reply({"data": [{"id": "fake"}]})
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        c = {"choices": [{"delta": {"content": "yes"}, "finish_reason": "stop"}]}
        self.reply("data: " + json.dumps(c) + "\n\ndata: [DONE]\n\n", "text/event-stream")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
`

// TestOpenAIServerWithoutLogprobsIsRefused starts a fake server (a Python
// script in the sandbox) that answers without log-probabilities: the start
// is refused with that reason.
func TestOpenAIServerWithoutLogprobsIsRefused(t *testing.T) {
	in := provisioned(t)
	// The interpreter itself, not a shim that execs it from a folder the
	// sandbox does not show.
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	testenv.NeedsSetup(t, "python3 (the fake server is written in it)", err)
	py := strings.TrimSpace(string(out))
	dir := t.TempDir()
	script := filepath.Join(dir, "server.py")
	if err := os.WriteFile(script, []byte(fakeServerPy), 0o644); err != nil {
		t.Fatal(err)
	}
	m := in.Models["smollm2-135m-instruct"]
	spec := ServerSpec{Command: []string{py, script, "{port}"}, ReadOnly: []string{dir}}
	_, err = StartOpenAIServer(context.Background(), spec, Config{Model: m.Path, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()}, ServerAssets{}, RequestPins{})
	if !errors.Is(err, ErrNoLogprobs) || !strings.Contains(err.Error(), "requires the top-K") {
		t.Fatalf("a server without log-probabilities was not refused: %v", err)
	}
}

func TestServerSpecCheck(t *testing.T) {
	for _, c := range []struct {
		spec ServerSpec
		want string
	}{
		{ServerSpec{}, "command: empty"},
		{ServerSpec{Command: []string{"vllm", "serve", "{model}"}}, "not an absolute path"},
		{ServerSpec{Command: []string{"/bin/vllm", "serve", "{model}"}}, "no {port}"},
		{ServerSpec{Command: []string{"/x", "{port}"}, API: []string{"embeddings"}}, "not chat or completions"},
		{ServerSpec{Command: []string{"/x", "{port}"}, Env: map[string]string{"HF_TOKEN": "x"}}, "credential"},
		{ServerSpec{Command: []string{"/x", "{port}"}, ReadyWithin: "soon"}, "not a duration"},
		{ServerSpec{Command: []string{"/x", "{port}"}, Ready: "health"}, "not a path"},
	} {
		if err := c.spec.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spec, err, c.want)
		}
	}
	ok := ServerSpec{Command: []string{"/x", "--port", "{port}", "-m", "{model}", "-c", "{context}"}}
	if err := ok.Check(); err != nil {
		t.Error(err)
	}
	if got := strings.Join(serverArgv(ok, "/bin/x", Config{Model: "/m.gguf", Context: 2048}, 8080), " "); got != "/bin/x --port 8080 -m /m.gguf -c 2048" {
		t.Errorf("argv %s", got)
	}
	par := ServerSpec{Command: []string{"/x", "--port", "{port}", "--parallel", "{slots}", "-c", "{context_total}", "--slot-ctx", "{context}"}}
	if got := strings.Join(serverArgv(par, "/bin/x", Config{Context: 2048, Slots: 3}, 8080), " "); got != "/bin/x --port 8080 --parallel 3 -c 6144 --slot-ctx 2048" {
		t.Errorf("argv with slots %s", got)
	}
}

// TestRequestFieldsGoWithEveryRequest: the spec's request block is added to
// a chat body and a completions body beside the pins, which it cannot
// replace.
func TestRequestFieldsGoWithEveryRequest(t *testing.T) {
	s := &OpenAIServer{spec: ServerSpec{Command: []string{"/x", "{port}"}, API: []string{APIChat, APICompletions},
		Request: map[string]any{"cache_prompt": false}}, model: "m"}
	req := Request{MaxTokens: 9, Sampling: Sampling{Temperature: 0.3, Seed: 4}, TopK: 5}
	for _, prompt := range []string{"", "plain text"} {
		req.Prompt = prompt
		if prompt == "" {
			req.Messages = []Message{{Role: "user", Content: "hi"}}
		}
		path, body := s.requestBody(req)
		if body["cache_prompt"] != false || body["max_tokens"] != 9 || body["temperature"] != 0.3 || body["seed"] != 4 {
			t.Errorf("%s: body %v lacks the request field or a pin", path, body)
		}
	}
}

// TestPythonEnvDigest digests a hand-made site-packages (a fake venv): the
// digest changes when one distribution's version does, and the staleness
// error names it.
func TestPythonEnvDigest(t *testing.T) {
	venv := t.TempDir()
	site := filepath.Join(venv, "lib", "python3.12", "site-packages")
	dist := func(name, version string) {
		d := filepath.Join(site, name+"-"+version+".dist-info")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "METADATA"), []byte("Metadata-Version: 2.1\nName: "+name+"\nVersion: "+version+"\n\nName: not-this\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dist("llama_cpp_python", "0.3.16")
	dist("uvicorn", "0.30.0")
	a, lines, err := PythonEnvDigest(venv)
	if err != nil || strings.Join(lines, ",") != "llama_cpp_python==0.3.16,uvicorn==0.30.0" {
		t.Fatalf("%v %v", lines, err)
	}
	os.RemoveAll(filepath.Join(site, "uvicorn-0.30.0.dist-info"))
	dist("uvicorn", "0.31.0")
	b, lines2, _ := PythonEnvDigest(venv)
	if a == b {
		t.Fatal("an upgraded distribution left the digest unchanged")
	}
	err = ServerAssets{EnvSHA256: b, Distributions: lines2}.Stale(ServerAssets{EnvSHA256: a, Distributions: lines})
	if !errors.Is(err, ErrStaleServer) || !strings.Contains(err.Error(), "+uvicorn==0.31.0 -uvicorn==0.30.0") {
		t.Errorf("stale environment: %v", err)
	}
	if _, _, err := PythonEnvDigest(t.TempDir()); err == nil {
		t.Error("an empty folder digested")
	}
}

// TestOpenAIServerDrivesLlamaCppPython starts llama-cpp-python's
// OpenAI-compatible server (built by scripts/test-tools/llama-cpp-python.sh
// into its own venv) as a generic server in rig's sandbox: every token comes
// with its top-K, and the pins carry the environment's digest.
func TestOpenAIServerDrivesLlamaCppPython(t *testing.T) {
	t.Setenv("STUDIO_API_KEY", "sk-test-must-not-leak")
	in := provisioned(t)
	py, err := provision.TestTool("LLAMA_CPP_PYTHON_BIN")
	testenv.NeedsSetup(t, "llama-cpp-python (scripts/setup-test-tools.sh)", err)
	venv, err := provision.TestTool("LLAMA_CPP_PYTHON_VENV")
	testenv.NeedsSetup(t, "llama-cpp-python (scripts/setup-test-tools.sh)", err)
	m := in.Models["smollm2-135m-instruct"]
	spec := ServerSpec{
		Command: []string{py, "-m", "llama_cpp.server", "--model", "{model}", "--host", "127.0.0.1", "--port", "{port}",
			"--n_ctx", "{context}", "--n_threads", "{threads}", "--logits_all", "true"},
		PythonEnv: venv, API: []string{APIChat, APICompletions}, ServedModel: "smollm2",
	}
	spec.Command = append(spec.Command, "--model_alias", "smollm2")
	ctx := context.Background()
	srv, err := StartOpenAIServer(ctx, spec, Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 1024, WorkDir: t.TempDir()}, ServerAssets{}, RequestPins{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(ctx)
	res, err := srv.Generate(ctx, Request{Messages: []Message{{Role: "user", Content: "Name three rivers."}},
		Sampling: Sampling{Temperature: 0, Seed: 7}, MaxTokens: 16, TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text == "" || len(res.Steps) == 0 || len(res.Steps[0].Top) == 0 {
		t.Fatalf("text %q, %d steps", res.Text, len(res.Steps))
	}
	p := srv.Pins()
	// llama-cpp-python reports neither its context nor what a request used:
	// each pin is sent, recorded as not reported, and not refused.
	t.Logf("server caps: %s", p.ServerCaps)
	if caps := p.ServerCaps; !strings.Contains(caps, "temperature 0 not reported") || !strings.Contains(caps, "seed 0 not reported") || strings.Contains(caps, "held") {
		t.Errorf("server caps %q: want every pin not reported", caps)
	}
	if !strings.HasPrefix(p.RuntimeVersion, "not reported; python environment sha256:") {
		t.Errorf("llama-cpp-python reports no version; the pins say %q", p.RuntimeVersion)
	}
	if want, _, _ := PythonEnvDigest(venv); p.EnvSHA256 == "" || p.EnvSHA256 != want || !p.Sandboxed {
		t.Errorf("pins: environment %q (want %q), sandboxed %v", p.EnvSHA256, want, p.Sandboxed)
	}
	// A server that is not rig's own code is held as rig's runtimes are,
	// read from outside while it runs.
	seesLoopbackOnlyAndNoCredentials(t, srv, "STUDIO_API_KEY", "sk-test-must-not-leak")
}

// TestOpenAIServerSlotsOnLlamaServerV1 starts llama-server's /v1 through
// the generic path at pins.slots 2 ({slots} and {context_total} in its
// command): it reports two slots of the whole pinned context each, and two
// requests sent together are in flight at the same moment by the server's
// own slot report. The same server given the pinned context as its whole
// --ctx-size divides it between the slots and is refused, naming the pin.
func TestOpenAIServerSlotsOnLlamaServerV1(t *testing.T) {
	const pinned = 1024
	in := provisioned(t)
	m := in.Models["smollm2-135m-instruct"]
	spec := llamaServerGenericSpec(in.LlamaServer)
	spec.Command = append(slices.Clone(spec.Command), "--parallel", "{slots}")
	spec.Command[slices.Index(spec.Command, "{context}")] = "{context_total}"
	ctx := context.Background()
	cfg := Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: pinned, Slots: 2, Threads: 2, WorkDir: t.TempDir()}
	srv, err := StartOpenAIServer(ctx, spec, cfg, ServerAssets{}, RequestPins{StopCap: 48})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop(ctx)
	if p := srv.Pins(); p.Slots != 2 || !strings.Contains(p.ServerCaps, "slots 2 held (/props)") || !strings.Contains(p.ServerCaps, "context 1024 held (/props)") {
		t.Errorf("pins: %d slots, caps %q", p.Slots, p.ServerCaps)
	}
	// A short prompt that asks for a long answer: llama-server takes a new
	// request between decoding steps (not inside one prompt's batch), so
	// the two overlap while both generate up to the stop cap.
	prompt := "Count from one to one hundred in words, separated by commas."
	results, errs, most := twoAtOnce(func() (Result, error) {
		return srv.Generate(ctx, Request{Messages: []Message{{Role: "user", Content: prompt}},
			Sampling: Sampling{Temperature: 0, Seed: 1}, MaxTokens: 48, TopK: 5})
	}, func() []SlotState {
		var slots []SlotState
		if err := srv.call(ctx, "GET", "/slots", nil, &slots); err != nil {
			t.Fatal(err)
		}
		return slots
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if r := results[i]; r.PromptTokens == 0 || r.OutputTokens < 10 || len(r.Steps) != r.OutputTokens {
			t.Errorf("request %d read %d prompt tokens and made %d (%d with log-probabilities)", i, r.PromptTokens, r.OutputTokens, len(r.Steps))
		}
	}
	if most != 2 {
		t.Errorf("at most %d requests were in flight at once by the server's own report, want 2", most)
		t.Logf("the server's log ends:\n%s", srv.sb.LogTail(40))
	}

	// --ctx-size {context} at two slots: each slot gets half the pin.
	halved := llamaServerGenericSpec(in.LlamaServer)
	halved.Command = append(slices.Clone(halved.Command), "--parallel", "{slots}")
	cfg.WorkDir = t.TempDir()
	_, err = StartOpenAIServer(ctx, halved, cfg, ServerAssets{}, RequestPins{StopCap: 48})
	if !errors.Is(err, ErrPinNotHeld) || !strings.Contains(err.Error(), "pin context is 1024, and the server reports 512 (/props)") {
		t.Errorf("a server whose slots hold half the pinned context started: %v", err)
	}
}

// TestOpenAIServerSlotsNeedThePlaceholder: pins.slots above 1 on a command
// with no {slots} is refused before anything starts, naming the field.
func TestOpenAIServerSlotsNeedThePlaceholder(t *testing.T) {
	spec := ServerSpec{Command: []string{"/venv/bin/python", "-m", "llama_cpp.server", "--port", "{port}"}}
	_, err := StartOpenAIServer(context.Background(), spec, Config{Model: "/nonexistent.gguf", Context: 1024, Slots: 2, WorkDir: t.TempDir()}, ServerAssets{}, RequestPins{})
	if err == nil || !strings.Contains(err.Error(), "server.command: no {slots} placeholder") {
		t.Errorf("slots 2 without {slots}: %v", err)
	}
}
