package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"rig/internal/ollamalib"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/runtimes"
)

// makeOllamaTag creates a tag in a test library (a temporary OLLAMA_MODELS)
// from a provisioned GGUF with the real provisioned Ollama, contained in
// rig's sandbox as every runtime is: rig's Ollama driver imports the file
// into the library it is given (Config.ModelStore) through `ollama serve`'s
// create API, the same call `ollama create` makes. It returns the library and
// the tag.
func makeOllamaTag(t *testing.T, m provision.Model) (string, string) {
	t.Helper()
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned Ollama", err)
	lib := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rt, err := runtimes.Launch(ctx, in, "ollama", runtimes.Config{Model: m.Path, ModelName: "tagtest", ModelSHA256: m.SHA256, Context: 2048, WorkDir: t.TempDir(), ModelStore: lib, ReadyWithin: 2 * time.Minute})
	if err != nil {
		t.Fatalf("creating a tag with the real Ollama: %v", err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	return lib, "rig-tagtest:pinned"
}

// writeCloudTag writes, by hand, the manifest Ollama keeps for a cloud
// model (a config naming the host that serves it, and no weights): pulling a
// real one would leave the machine, which is what rig refuses.
func writeCloudTag(t *testing.T, lib string) string {
	t.Helper()
	cfg := []byte(`{"model_format":"","remote_host":"https://cloud.invalid:443","remote_model":"big:120b"}`)
	sum := sha256.Sum256(cfg)
	digest := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(lib, "blobs", "sha256-"+digest), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "config": map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + digest, "size": len(cfg)}, "layers": []any{}})
	dir := filepath.Join(lib, "manifests", "registry.ollama.ai", "library", "big")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "120b-cloud"), man, 0o644); err != nil {
		t.Fatal(err)
	}
	return "big:120b-cloud"
}

// TestOllamaTagStudy: a study whose Ollama arm names its model by a tag in
// the caller's library registers with the tag's blob and digest, freezes,
// validates and runs; a cloud tag and a tag written as a file are refused
// with the reason and the field to use.
func TestOllamaTagStudy(t *testing.T) {
	testenv.Long(t, "registers, freezes and runs a study on the real runtimes")
	e := newRigEnv(t)
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned models", err)
	q8, ok := in.OtherQuants["smollm2-135m-instruct"]
	if !ok || q8.Path == "" {
		testenv.NeedsSetup(t, "the Q8_0 requantization of SmolLM2", os.ErrNotExist)
	}
	lib, tag := makeOllamaTag(t, q8)
	resolved, err := ollamalib.Library{Dir: lib}.Resolve(tag)
	if err != nil {
		t.Fatalf("the tag the real Ollama created does not resolve: %v", err)
	}
	if resolved.SHA256 != q8.SHA256 {
		t.Fatalf("the tag's blob is %s, the GGUF it was created from %s", resolved.SHA256, q8.SHA256)
	}
	cloud := writeCloudTag(t, lib)
	t.Setenv("OLLAMA_MODELS", lib)

	name := "e2e-ollama-tag"
	d, _ := demoDesignFor(t, name, "extract-json", 4)
	var arms []any
	for _, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		switch am["name"] {
		case "smollm2-llama-server":
		case "smollm2-q8-ollama":
			am["model"] = map[string]any{"registry_name": "SmolLM2-135M-Instruct-Q8_0", "ollama_tag": tag}
		default:
			continue
		}
		am["pins"].(map[string]any)["stop_cap"] = 64
		arms = append(arms, am)
	}
	d["arms"] = arms
	keepItems(d, func(id string) bool { return id != "aider-chat" && id != "rig-bank-fix-test" })
	design := writeDesignMap(t, d)

	// Refusals first: they are made by the command line, before the daemon.
	setModel := func(model map[string]any) string {
		d["arms"].([]any)[1].(map[string]any)["model"] = model
		return writeDesignMap(t, d)
	}
	out := e.rig(false, "study", "register", setModel(map[string]any{"registry_name": "x", "ollama_tag": cloud}))
	for _, want := range []string{"arms[1].model.ollama_tag", "cloud model", "leave the machine"} {
		if !strings.Contains(out, want) {
			t.Errorf("a cloud tag was refused without %q:\n%s", want, out)
		}
	}
	out = e.rig(false, "study", "register", setModel(map[string]any{"registry_name": "x", "file": "smollm2:135m"}))
	if !strings.Contains(out, `looks like an Ollama tag: name it as "model": {"ollama_tag": "smollm2:135m"}`) {
		t.Errorf("a tag written as a file was not refused with the field to use:\n%s", out)
	}

	e.ensureGovernorPass()
	e.startDaemon()
	e.prepare(design, name)
	var reg struct {
		Design struct {
			Arms []struct {
				Name  string
				Model struct {
					File      string `json:"file"`
					SHA256    string `json:"sha256"`
					OllamaTag string `json:"ollama_tag"`
				}
			}
		}
	}
	raw, err := os.ReadFile(filepath.Join(e.home, "studies", name, "registration.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &reg); err != nil {
		t.Fatal(err)
	}
	for _, a := range reg.Design.Arms {
		if m := a.Model; a.Name == "smollm2-q8-ollama" && (m.OllamaTag != tag || m.File != resolved.Blob || m.SHA256 != resolved.SHA256) {
			t.Errorf("the registered arm holds %+v, want the tag %s with its blob %s and digest %s", m, tag, resolved.Blob, resolved.SHA256)
		}
	}
	out = e.rig(true, "study", "run", name)
	if m := regexp.MustCompile(`done: (\d+)/(\d+) trials`).FindStringSubmatch(out); m == nil || m[1] != m[2] {
		t.Fatalf("run did not finish every planned trial:\n%s", out)
	}
	n := 0
	for _, r := range e.exportReceipts(name) {
		if r.Arm == "smollm2-q8-ollama" {
			n++
			if !strings.Contains(r.ModelDigest, resolved.SHA256) {
				t.Errorf("receipt %s: model digest %q, want the tag's blob %s", r.TaskID, r.ModelDigest, resolved.SHA256)
			}
		}
	}
	if n == 0 {
		t.Error("no receipt of the tagged arm")
	}
}
