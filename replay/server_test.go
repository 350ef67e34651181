package replay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/runtimes"
)

func lp(v float64) *float64 { return &v }

// fakeEcho is what llama-cpp-python's /v1/completions answers to echo with
// logprobs for "Say:" + " hi there" on a model that adds a start-of-text
// token (dropped from the echo), written by hand: three prompt-and-output
// tokens after "Say", then the one generated token.
func fakeEcho() runtimes.EchoLogprobs {
	return runtimes.EchoLogprobs{
		Tokens:        []string{"Say", ":", " hi", " there", "!"},
		TextOffset:    []int{0, 3, 4, 7, 13},
		TokenLogprobs: []*float64{nil, lp(-1), lp(-0.5), lp(-0.25), lp(-2)},
		TopLogprobs: []map[string]float64{nil, {":": -1}, {" hi": -0.5, " yo": -1.5},
			{" there": -0.25, " you": -2.5, " all": -3}, {"!": -2}},
		PromptTokens: 5, CompletionTokens: 1, // BOS + Say + : + hi + there
	}
}

func keptSteps(texts ...string) []genrecord.Step {
	out := make([]genrecord.Step, len(texts))
	for i, t := range texts {
		out[i] = genrecord.Step{Text: t, Bytes: []byte(t), Logprob: lp(-0.1)}
	}
	return out
}

func TestEchoOutputReadsTheKeptSteps(t *testing.T) {
	steps, err := echoOutput(fakeEcho(), "Say:", " hi there", keptSteps(" hi", " there"), 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Text != " hi" || *steps[0].Logprob != -0.5 || steps[1].Text != " there" || *steps[1].Logprob != -0.25 {
		t.Fatalf("steps %+v", steps)
	}
	if got := steps[1].Top; len(got) != 3 || got[0].Text != " there" || got[2].Text != " all" {
		t.Errorf("top-K not ordered by log-prob: %+v", got)
	}
}

// TestEchoOutputRefusesWhatDoesNotLineUp: each way the server's reading
// can differ from the kept tokens sends the row to regeneration (notAligned),
// never to a verdict on log-probs that belong to other tokens.
func TestEchoOutputRefusesWhatDoesNotLineUp(t *testing.T) {
	// No start-of-text token: llama-cpp-python pairs the scores one token
	// off, and cuts the generated token.
	oneOff := fakeEcho()
	oneOff.Tokens, oneOff.TextOffset, oneOff.TokenLogprobs, oneOff.TopLogprobs = oneOff.Tokens[:4], oneOff.TextOffset[:4], oneOff.TokenLogprobs[:4], oneOff.TopLogprobs[:4]
	oneOff.PromptTokens = 4
	for _, c := range []struct {
		name         string
		echo         runtimes.EchoLogprobs
		prompt, text string
		kept         []genrecord.Step
		want         string
	}{
		{"no start-of-text token", oneOff, "Say:", " hi there", keptSteps(" hi", " there"), "one token off"},
		{"a token across the prompt's end", fakeEcho(), "Say: h", "i there", keptSteps("i", " there"), "across the end of the prompt"},
		{"another split", fakeEcho(), "Say:", " hi there", keptSteps(" hi", " the", "re"), "into 2 tokens, the record kept 3"},
		{"other tokens", fakeEcho(), "Say:", " hi there", keptSteps(" hi", " thera"), `" there" where the record kept " thera"`},
	} {
		_, err := echoOutput(c.echo, c.prompt, c.text, c.kept, 5)
		var na notAligned
		if !errors.As(err, &na) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want notAligned saying %q", c.name, err, c.want)
		}
	}
}

func TestKeptMessagesTellsChatRowsFromPlainPrompts(t *testing.T) {
	if m := keptMessages(`[{"role":"user","content":"Name a river."}]`); len(m) != 1 || m[0].Content != "Name a river." {
		t.Errorf("a chat row's messages: %+v", m)
	}
	for _, plain := range []string{"Name a river.", "[1, 2, 3] is a list.", `[{"content":"no role"}]`, "[]"} {
		if m := keptMessages(plain); m != nil {
			t.Errorf("%q read as messages %+v", plain, m)
		}
	}
}

func TestLoadServerSpecReadsTheArmsServer(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("RIG_TEST_SERVER_BIN", "/usr/bin/true")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	design := write("design.json", `{"arms": [
		{"name": "native", "runtime": "llama-server"},
		{"name": "generic", "runtime": "openai-server", "server": {"command": ["${RIG_TEST_SERVER_BIN}", "--port", "{port}"], "api": ["completions"]}}]}`)
	spec, err := LoadServerSpec(design, "generic")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Command[0] != "/usr/bin/true" || !spec.Speaks(runtimes.APICompletions) {
		t.Errorf("spec %+v: want the reference expanded and the api kept", spec)
	}
	if spec, err = LoadServerSpec(design, ""); err != nil || spec.Command[0] != "/usr/bin/true" {
		t.Errorf("the one arm with a server, unnamed: %+v, %v", spec, err)
	}
	if _, err := LoadServerSpec(design, "native"); err == nil || !strings.Contains(err.Error(), `no arm "native" with a server block (arms with one: generic)`) {
		t.Errorf("an arm without a server: %v", err)
	}
	block := write("server.json", `{"command": ["/usr/bin/true", "--port", "{port}"]}`)
	if spec, err = LoadServerSpec(block, "any"); err != nil || spec.Command[0] != "/usr/bin/true" {
		t.Errorf("a bare server block: %+v, %v", spec, err)
	}
	bad := write("bad.json", `{"command": ["/usr/bin/true"]}`)
	if _, err := LoadServerSpec(bad, ""); err == nil || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), "server.command: no {port}") {
		t.Errorf("a command without {port}: %v, want the file and field named", err)
	}
}

// TestOpenAIServerRecordNeedsItsServer: the record keeps the server's
// digests, not its command, so replay without --server says what to give
// before anything starts.
func TestOpenAIServerRecordNeedsItsServer(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "generations-generic.jsonl")
	pins := genrecord.Pins{Runtime: runtimes.OpenAIServerKind, RuntimeVersion: "v", BinarySHA256: "abcdef012345" + strings.Repeat("0", 52), ModelSHA256: strings.Repeat("a", 64), ModelName: "m",
		Libraries: map[string]string{}, MachineLine: "test", DesignHash: "d"}
	if err := writeRecord(rec, pins, nil); err != nil {
		t.Fatal(err)
	}
	_, err := ReplayRecord(context.Background(), ReplayRequest{File: rec})
	if !errors.Is(err, ErrNoServerSpec) || !strings.Contains(err.Error(), "--server") || !strings.Contains(err.Error(), "abcdef012345") {
		t.Errorf("%v, want ErrNoServerSpec naming --server and the server's digest", err)
	}
	_, err = ReplayRecord(context.Background(), ReplayRequest{File: rec, Mode: ModePrefill, Server: &runtimes.ServerSpec{}})
	if !errors.Is(err, ErrNoPrefill) {
		t.Errorf("prefill of an openai-server record: %v, want ErrNoPrefill", err)
	}
}

// TestServerCalibrationIsThatServers: "openai-server" names any server, so
// a tolerance is taken only from the entry measured on the record's
// executable, environment and request fields.
func TestServerCalibrationIsThatServers(t *testing.T) {
	cal := ReplayCalibration{Model: "smollm2-135m-instruct", Runtimes: []RuntimeCalibration{
		{Runtime: runtimes.OpenAIServerKind, Pins: genrecord.Pins{BinarySHA256: "py", EnvSHA256: "venv-a"}, Calibration: genrecord.Calibration{Separable: true, Tolerance: genrecord.Tolerance{Token: 0.1, Row: 0.01}}},
		{Runtime: runtimes.OpenAIServerKind, Pins: genrecord.Pins{BinarySHA256: "ls"}, Calibration: genrecord.Calibration{Separable: true, Tolerance: genrecord.Tolerance{Token: 0.2, Row: 0.02}}},
	}}
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := cal.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadReplayTolerance(path, runtimes.OpenAIServerKind, genrecord.Pins{BinarySHA256: "ls"}, "")
	if err != nil || got.Tolerance.Token != 0.2 {
		t.Errorf("llama-server's /v1: %+v, %v", got, err)
	}
	if got, err = LoadReplayTolerance(path, runtimes.OpenAIServerKind, genrecord.Pins{BinarySHA256: "py", EnvSHA256: "venv-a"}, ""); err != nil || got.Tolerance.Token != 0.1 {
		t.Errorf("the python server: %+v, %v", got, err)
	}
	_, err = LoadReplayTolerance(path, runtimes.OpenAIServerKind, genrecord.Pins{BinarySHA256: "py", EnvSHA256: "venv-b"}, "")
	if err == nil || !strings.Contains(err.Error(), "no calibration for the record's server") || !strings.Contains(err.Error(), "environment venv-b") {
		t.Errorf("the same interpreter in another venv: %v, want refused, naming the environment", err)
	} // The same llama-server without the request fields its calibration was
	// measured with (a warm prompt cache drifts where cache_prompt false
	// does not) is another server's tolerance.
	_, err = LoadReplayTolerance(path, runtimes.OpenAIServerKind, genrecord.Pins{BinarySHA256: "ls", ServerRequest: `{"cache_prompt":false}`}, "")
	if err == nil || !strings.Contains(err.Error(), `request {"cache_prompt":false}`) {
		t.Errorf("a record sent with other request fields: %v, want refused, naming them", err)
	}
}
