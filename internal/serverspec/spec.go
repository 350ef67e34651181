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
	_, err := s.ReadyDuration(0)
	return err
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
