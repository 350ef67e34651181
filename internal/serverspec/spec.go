// Package serverspec is the description of a generic OpenAI-compatible
// server that a design gives for an "openai-server" arm (vLLM, SGLang,
// llama-cpp-python, llama-server's own /v1, LM Studio's engine, TGI): its
// command with placeholders, environment, readiness check, served model
// name and API, and the digest of a Python server's installed
// distributions. The design reader checks it and runtimes starts it; it
// starts nothing itself and talks to no server.
package serverspec

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Kind is the runtime name of a generic OpenAI-compatible server.
const Kind = "openai-server"

// APIs a Spec may speak.
const (
	APIChat        = "chat"        // POST /v1/chat/completions
	APICompletions = "completions" // POST /v1/completions
)

// Placeholders rig fills in the command.
var Placeholders = []string{"{port}", "{model}", "{context}", "{context_total}", "{slots}", "{threads}"}

// Spec describes an OpenAI-compatible server rig starts in its sandbox.
type Spec struct {
	// Command is the executable and its arguments. {port} is the port rig
	// chose inside the sandbox, {model} the pinned model file, {context}
	// the pinned context (of one request), {slots} how many requests the
	// server serves at once (pins.slots), {context_total} the context of
	// all of them (context × slots, for a server such as llama-server that
	// divides its --ctx-size among its slots), {threads} the thread count.
	// The executable is an absolute path or a reference such as
	// "${LLAMA_SERVER_BIN}".
	Command []string `json:"command"`
	// Env is added to the sandbox's minimal environment.
	Env map[string]string `json:"env,omitempty"`
	// Ready is the path polled until it answers 200 (default /v1/models).
	Ready string `json:"ready,omitempty"`
	// ReadyWithin is how long loading may take, a duration (default 3m).
	ReadyWithin string `json:"ready_within,omitempty"`
	// ServedModel is the model name sent with each request; empty takes the
	// first id /v1/models lists.
	ServedModel string `json:"served_model,omitempty"`
	// API lists what the server speaks: "chat", "completions" or both
	// (default chat). A plain-completion arm is sent to completions when
	// the server speaks it.
	API []string `json:"api,omitempty"`
	// PythonEnv is the server's Python environment (a venv, or its
	// site-packages folder): its installed distributions and versions are
	// digested into the pins, so an upgraded package is a stale asset.
	// Empty for a native server.
	PythonEnv string `json:"python_env,omitempty"`
	// ReadOnly lists more host paths the server must read (its install
	// tree beyond the executable's folder, a tokenizer folder).
	ReadOnly []string `json:"read_only,omitempty"`
	// Request is added to the body of every request rig sends the server
	// (each generation, the start's probe, replay's echo): settings outside
	// the OpenAI API that the server reads, such as llama-server's
	// {"cache_prompt": false}, without which it evaluates a prompt on top
	// of the previous request's cache and a row does not regenerate bit
	// for bit at replay (docs/generations.md). It cannot set what rig sends
	// for the pins, nor change sampling (ReservedRequestFields).
	Request map[string]any `json:"request,omitempty"`
}

// ReservedRequestFields are the body fields a spec's Request may not set,
// with why: rig sends them for the arm's pins (each with the servers'
// aliases that would override it: llama-server reads n_predict before
// max_tokens), or they change how tokens are chosen, which the pins hold
// equal across arms, or they change the answer's shape.
var ReservedRequestFields = map[string]string{
	"model": "pin", "stream": "pin", "stream_options": "pin", "max_tokens": "pin", "max_completion_tokens": "pin", "n_predict": "pin",
	"temperature": "pin", "top_p": "pin", "top_k": "pin", "min_p": "pin", "seed": "pin", "stop": "pin",
	"prompt": "pin", "messages": "pin", "logprobs": "pin", "top_logprobs": "pin", "n_probs": "pin", "echo": "pin", "prompt_logprobs": "pin",
	"presence_penalty": "sampling", "frequency_penalty": "sampling", "repeat_penalty": "sampling", "repetition_penalty": "sampling",
	"typical_p": "sampling", "dynatemp_range": "sampling", "mirostat": "sampling", "samplers": "sampling", "top_n_sigma": "sampling",
	"xtc_probability": "sampling", "dry_multiplier": "sampling", "logit_bias": "sampling", "ignore_eos": "sampling", "min_tokens": "sampling",
	"grammar": "sampling", "json_schema": "sampling", "response_format": "sampling", "guided_json": "sampling", "guided_regex": "sampling",
	"n": "shape", "best_of": "shape", "use_beam_search": "shape", "tools": "shape", "tool_choice": "shape",
}

// maxRequestBytes caps a spec's Request as JSON: a few switches, not a payload.
const maxRequestBytes = 4 << 10

// RequestPin is the Request as the pins record it: its JSON with the keys
// sorted, "" when there is none. Replay and calibration hold a record to it.
func (s Spec) RequestPin() string {
	if len(s.Request) == 0 {
		return ""
	}
	b, err := json.Marshal(s.Request)
	if err != nil {
		return fmt.Sprintf("unencodable: %v", err)
	}
	return string(b)
}

// Speaks reports whether the server speaks api.
func (s Spec) Speaks(api string) bool {
	if len(s.API) == 0 {
		return api == APIChat
	}
	for _, a := range s.API {
		if a == api {
			return true
		}
	}
	return false
}

// ReadyDuration is the spec's loading time, or def when it gives none.
func (s Spec) ReadyDuration(def time.Duration) (time.Duration, error) {
	if s.ReadyWithin == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s.ReadyWithin)
	if err != nil || d <= 0 || d > 24*time.Hour {
		return 0, fmt.Errorf("ready_within: %q is not a duration such as \"5m\" (at most 24h)", s.ReadyWithin)
	}
	return d, nil
}

// Check says what is wrong with a spec, by its field, before anything
// starts; it reads nothing but the strings.
func (s Spec) Check() error {
	if len(s.Command) == 0 || strings.TrimSpace(s.Command[0]) == "" {
		return errors.New(`command: empty (give the executable and its arguments, e.g. ["${LLAMA_SERVER_BIN}", "--port", "{port}", "-m", "{model}"])`)
	}
	if exe := s.Command[0]; !filepath.IsAbs(exe) && !strings.HasPrefix(exe, "${") {
		return fmt.Errorf("command[0]: %q is not an absolute path (the daemon's PATH is not yours: write the executable's full path, or a reference such as \"${LLAMA_SERVER_BIN}\")", exe)
	}
	if !strings.Contains(strings.Join(s.Command, " "), "{port}") {
		return errors.New("command: no {port} (rig chooses the port inside the sandbox; pass {port} where the server takes its port)")
	}
	for _, a := range s.API {
		if a != APIChat && a != APICompletions {
			return fmt.Errorf("api: %q is not chat or completions", a)
		}
	}
	if s.Ready != "" && !strings.HasPrefix(s.Ready, "/") {
		return fmt.Errorf("ready: %q is not a path such as /v1/models or /health", s.Ready)
	}
	for k := range s.Env {
		if credentialLike(k) {
			return fmt.Errorf("env: %s looks like a credential; a server rig runs reaches nothing outside its sandbox, so it needs none", k)
		}
	}
	if err := s.checkRequest(); err != nil {
		return err
	}
	_, err := s.ReadyDuration(0)
	return err
}

// checkRequest refuses a Request field rig sends itself or that changes
// sampling, naming the field.
func (s Spec) checkRequest() error {
	keys := make([]string, 0, len(s.Request))
	for k := range s.Request {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch ReservedRequestFields[strings.ToLower(k)] {
		case "pin":
			return fmt.Errorf("request.%s: rig sends %s itself, from the arm's pins, with every request; set the pin instead (or remove it from request)", k, k)
		case "sampling":
			return fmt.Errorf("request.%s: changes how tokens are chosen, which the pins hold equal across arms; remove it (request is for a server's own switches, such as llama-server's \"cache_prompt\": false)", k)
		case "shape":
			return fmt.Errorf("request.%s: changes the answer's shape (one choice, plain text), which rig's record reads; remove it", k)
		}
	}
	if b := []byte(s.RequestPin()); len(b) > maxRequestBytes {
		return fmt.Errorf("request: %d bytes of JSON, over %d (a few switches such as {\"cache_prompt\": false}, not a payload)", len(b), maxRequestBytes)
	}
	return nil
}

// ServesSlots reports whether the command says how many requests the
// server serves at once (a {slots} placeholder): only such a server is
// started for pins.slots above 1.
func (s Spec) ServesSlots() bool { return strings.Contains(strings.Join(s.Command, " "), "{slots}") }

// CheckSlots says, by its field, why the spec cannot serve slots requests at
// once: a command with no {slots} placeholder starts a server rig cannot
// tell to serve more than one (llama-cpp-python's has no parallel slots),
// and rig would send requests it queues, timed as if they ran together.
func (s Spec) CheckSlots(slots int) error {
	if slots <= 1 || s.ServesSlots() {
		return nil
	}
	return fmt.Errorf("command: no {slots} placeholder, so the server cannot be started for pins.slots %d: pass {slots} where the server takes how many requests it serves at once (llama-server: \"--parallel\", \"{slots}\", \"--ctx-size\", \"{context_total}\"), or leave pins.slots out for a server that serves one at a time (llama-cpp-python)", slots)
}

// credentialLike is an environment name that usually holds a secret.
func credentialLike(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "API_KEY", "APIKEY", "CREDENTIAL"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// PythonEnvDigest digests a Python environment's installed distributions:
// the sorted "name==version" of every *.dist-info folder's METADATA under
// its site-packages (a venv folder is searched for
// lib/python*/site-packages). It returns the digest and the lines.
func PythonEnvDigest(dir string) (string, []string, error) {
	sites := []string{dir}
	if m, _ := filepath.Glob(filepath.Join(dir, "lib", "python*", "site-packages")); len(m) > 0 {
		sites = m
	}
	var dists []string
	for _, site := range sites {
		infos, err := filepath.Glob(filepath.Join(site, "*.dist-info"))
		if err != nil {
			return "", nil, err
		}
		for _, info := range infos {
			name, version, err := distMetadata(filepath.Join(info, "METADATA"))
			if err != nil {
				return "", nil, err
			}
			dists = append(dists, strings.ToLower(name)+"=="+version)
		}
	}
	if len(dists) == 0 {
		return "", nil, fmt.Errorf("python_env: %s holds no installed distributions (*.dist-info under site-packages): name the server's venv", dir)
	}
	sort.Strings(dists)
	sum := sha256.Sum256([]byte(strings.Join(dists, "\n") + "\n"))
	return hex.EncodeToString(sum[:]), dists, nil
}

// maxMetadataLines bounds the header read of one METADATA file.
const maxMetadataLines = 200

// distMetadata reads Name and Version from a METADATA file's header.
func distMetadata(path string) (name, version string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < maxMetadataLines && (name == "" || version == ""); n++ {
		line := sc.Text()
		if line == "" {
			break // the header ends at the first empty line
		}
		if v, ok := strings.CutPrefix(line, "Name: "); ok {
			name = strings.TrimSpace(v)
		} else if v, ok := strings.CutPrefix(line, "Version: "); ok {
			version = strings.TrimSpace(v)
		}
	}
	if name == "" || version == "" {
		return "", "", fmt.Errorf("%s: no Name and Version in its header", path)
	}
	return name, version, nil
}
