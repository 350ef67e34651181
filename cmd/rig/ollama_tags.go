package main

import (
	"os"
	"path/filepath"

	"rig/api"
	"rig/internal/ollamalib"
	"rig/internal/provision"
	"rig/studies"
)

// resolveOllamaTags resolves the design's model.ollama_tag fields in the
// caller's own Ollama library, here, with the caller's rights and
// environment (see studies/ollamatag.go for why not in the daemon). A design
// that does not parse is left to the daemon, which says why in its own
// words.
func resolveOllamaTags(path string, design []byte) (map[string]api.OllamaBlob, error) {
	d, err := studies.ParseDesign(path, design)
	if err != nil {
		return nil, nil
	}
	lib, err := ollamalib.Find(os.Getenv)
	if err != nil {
		return nil, err
	}
	if lib.Dir, err = filepath.Abs(lib.Dir); err != nil {
		return nil, err
	}
	lookup, err := provision.Lookup()
	if err != nil {
		return nil, err
	}
	models, err := studies.ResolveOllamaTags(path, d, lib, studies.ResolveOptions{Lookup: lookup, BaseDir: filepath.Dir(path)})
	if err != nil || len(models) == 0 {
		return nil, err
	}
	out := make(map[string]api.OllamaBlob, len(models))
	for tag, m := range models {
		out[tag] = api.OllamaBlob{File: m.Blob, SHA256: m.SHA256}
	}
	return out, nil
}
