// Package ollamalib reads a user's own Ollama library (the models folder
// that `ollama pull` and `ollama create` write: manifests/ and blobs/) to find
// the GGUF file an Ollama tag names, without any Ollama server running. It is
// for naming a model by its tag in a design and for listing what a design can
// name. It is not an Ollama client: it never pulls, pushes or talks to a
// server, and it reads no Modelfile parameters or templates (an arm's pins
// replace them; only the weights are used).
package ollamalib

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/ollama/ollama/types/model"

	"rig/internal/sizecap"
)

// Media types in an Ollama manifest, as Ollama writes them.
const (
	MediaModel  = "application/vnd.ollama.image.model"
	MediaTensor = "application/vnd.ollama.image.tensor"
)

// ErrNotLocal is a tag whose weights are not a GGUF on this machine (a cloud
// model, a reference whose blob is missing, weights in another format):
// running it would leave the machine, or load nothing rig can pin.
var ErrNotLocal = errors.New("not a local GGUF")

// ErrNotFound is a tag that is not in the library at all. rig never pulls.
var ErrNotFound = errors.New("not in the Ollama library")

// manifestCap bounds a manifest or config blob read: both are a few hundred
// bytes; a larger file is not one Ollama wrote.
var manifestCap = sizecap.Cap{What: "Ollama manifest", Limit: 1 << 20, Fix: "a manifest is a few hundred bytes: check that OLLAMA_MODELS names an Ollama models folder"}

var digestRE = regexp.MustCompile(`^sha256[:-]([0-9a-f]{64})$`)

// Library is an Ollama models folder.
type Library struct {
	Dir string
}

// Find is the caller's library: $OLLAMA_MODELS, else ~/.ollama/models (as
// Ollama itself chooses it). getenv is os.Getenv in the command line.
func Find(getenv func(string) string) (Library, error) {
	if d := getenv("OLLAMA_MODELS"); d != "" {
		return Library{Dir: d}, nil
	}
	home := getenv("HOME")
	if home == "" {
		var err error
		if home, err = os.UserHomeDir(); err != nil {
			return Library{}, fmt.Errorf("ollama library: no $OLLAMA_MODELS and no home folder: %w", err)
		}
	}
	return Library{Dir: filepath.Join(home, ".ollama", "models")}, nil
}

// Model is what a tag resolves to.
type Model struct {
	// Tag is the name as Ollama shows it (host and namespace left out when
	// they are Ollama's defaults).
	Tag      string `json:"tag"`
	Manifest string `json:"manifest"`
	// Blob is the model layer's file, blobs/sha256-<hex>; SHA256 its digest,
	// which Ollama names the file by (freeze hashes the file and checks it).
	Blob   string `json:"blob"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	Format string `json:"format,omitempty"` // the config's model_format, e.g. "gguf"
	Family string `json:"family,omitempty"`
	Quant  string `json:"quant,omitempty"` // the config's file_type, e.g. "Q4_K_M"
}

// ParseTag checks a tag's form and returns its full name.
func ParseTag(tag string) (model.Name, error) {
	n := model.ParseName(strings.TrimSpace(tag))
	if !n.IsFullyQualified() {
		return n, fmt.Errorf("%q is not an Ollama tag (write it as `ollama list` shows it, e.g. \"qwen2.5:7b-instruct\")", tag)
	}
	return n, nil
}

// Resolve finds the GGUF a tag names, or says why it cannot be run here.
func (l Library) Resolve(tag string) (Model, error) {
	n, err := ParseTag(tag)
	if err != nil {
		return Model{}, err
	}
	path := filepath.Join(l.Dir, "manifests", n.Filepath())
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		// Ollama writes names as given but matches them without case.
		if lower := filepath.Join(l.Dir, "manifests", strings.ToLower(n.Filepath())); lower != path {
			if _, err := os.Stat(lower); err == nil {
				path = lower
			}
		}
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return Model{}, fmt.Errorf("%w: %q has no manifest in %s (rig never pulls a model, which would leave the machine: run `ollama pull %s` yourself, or set OLLAMA_MODELS to the library that holds it)", ErrNotFound, tag, l.Dir, tag)
	}
	return l.read(display(n), path)
}

// display is the name as `ollama list` shows it.
func display(n model.Name) string {
	return n.DisplayShortest()
}

type layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

type manifest struct {
	Config layer   `json:"config"`
	Layers []layer `json:"layers"`
}

// config is the part of Ollama's model config rig reads. A cloud model's
// config names the host that serves it.
type config struct {
	ModelFormat string `json:"model_format"`
	ModelFamily string `json:"model_family"`
	FileType    string `json:"file_type"`
	RemoteHost  string `json:"remote_host"`
	RemoteModel string `json:"remote_model"`
}

// read resolves one manifest file.
func (l Library) read(tag, path string) (Model, error) {
	var m manifest
	if err := l.readJSON(path, &m); err != nil {
		return Model{}, fmt.Errorf("%s: %q: %w", path, tag, err)
	}
	var cfg config
	if m.Config.Digest != "" {
		blob, err := l.blobPath(m.Config.Digest)
		if err != nil {
			return Model{}, fmt.Errorf("%s: config: %w", path, err)
		}
		if err := l.readJSON(blob, &cfg); err != nil && !errors.Is(err, os.ErrNotExist) {
			return Model{}, fmt.Errorf("%s: %q: config: %w", path, tag, err)
		}
	}
	if cfg.RemoteHost != "" || cfg.RemoteModel != "" {
		return Model{}, fmt.Errorf("%w: %q is a cloud model (served by %s as %q): running it would leave the machine; name a model whose weights you have pulled", ErrNotLocal, tag, orUnknown(cfg.RemoteHost), cfg.RemoteModel)
	}
	weights, err := modelLayer(tag, m.Layers)
	if err != nil {
		return Model{}, err
	}
	blob, err := l.blobPath(weights.Digest)
	if err != nil {
		return Model{}, fmt.Errorf("%s: %q: model layer: %w", path, tag, err)
	}
	st, err := os.Stat(blob)
	if err != nil {
		return Model{}, fmt.Errorf("%w: %q: its weights %s are not on this machine (%v): a partial pull, or a reference to a remote model; run `ollama pull %s` yourself", ErrNotLocal, tag, blob, err, tag)
	}
	if weights.Size > 0 && st.Size() != weights.Size {
		return Model{}, fmt.Errorf("%w: %q: %s holds %d bytes, its manifest says %d (an unfinished pull? run `ollama pull %s` again)", ErrNotLocal, tag, blob, st.Size(), weights.Size, tag)
	}
	if err := isGGUF(blob); err != nil {
		return Model{}, fmt.Errorf("%w: %q: %v", ErrNotLocal, tag, err)
	}
	sum := digestRE.FindStringSubmatch(weights.Digest)[1]
	return Model{Tag: tag, Manifest: path, Blob: blob, SHA256: sum, Size: st.Size(), Format: cfg.ModelFormat, Family: cfg.ModelFamily, Quant: cfg.FileType}, nil
}

// modelLayer is the manifest's one GGUF weights layer.
func modelLayer(tag string, layers []layer) (layer, error) {
	var found []layer
	tensors := 0
	for _, ly := range layers {
		switch ly.MediaType {
		case MediaModel:
			found = append(found, ly)
		case MediaTensor:
			tensors++
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		return layer{}, fmt.Errorf("%q has %d model layers; rig pins one GGUF per arm (name a tag with one)", tag, len(found))
	case tensors > 0:
		return layer{}, fmt.Errorf("%w: %q holds its weights as %d tensor layers, not a GGUF, which rig's runtimes load (name a GGUF tag)", ErrNotLocal, tag, tensors)
	}
	return layer{}, fmt.Errorf("%w: %q has no model weights on this machine (a cloud or remote reference): running it would leave the machine", ErrNotLocal, tag)
}

// blobPath is where Ollama keeps a blob of the given digest.
func (l Library) blobPath(digest string) (string, error) {
	m := digestRE.FindStringSubmatch(digest)
	if m == nil {
		return "", fmt.Errorf("digest %q is not sha256:<64 hex digits>", digest)
	}
	return filepath.Join(l.Dir, "blobs", "sha256-"+m[1]), nil
}

func (l Library) readJSON(path string, v any) error {
	data, err := manifestCap.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("not an Ollama manifest: %w", err)
	}
	return nil
}

// isGGUF checks the file's magic, the one thing rig's runtimes load.
func isGGUF(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	magic := make([]byte, 4)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "GGUF" {
		return fmt.Errorf("%s is not a GGUF file (rig's runtimes load a GGUF)", path)
	}
	return nil
}

func orUnknown(s string) string {
	if s == "" {
		return "a remote host"
	}
	return s
}
