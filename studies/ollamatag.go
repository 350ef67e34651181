package studies

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"rig/internal/ollamalib"
)

// An arm may name its model by a tag in the caller's own Ollama library
// (model.ollama_tag) instead of a file. The command line resolves the tag,
// not the daemon: the library is the caller's ($OLLAMA_MODELS or
// ~/.ollama/models in their environment and home, which the daemon, often
// root with its own HOME, does not share), and its manifests are read with
// the caller's rights. The daemon is sent the blob path and digest beside
// the design, writes them into the arm (ApplyOllamaTags), and then treats the
// blob like any model file a caller names: read only if the caller could,
// hashed at registration, and checked against the digest at freeze and
// before each run. A caller who sends a wrong blob gains nothing: the file
// must be theirs to read and must hash to the digest it is pinned by.

// OllamaTagResolver is what the command line resolved a tag to, or false.
type OllamaTagResolver func(tag string) (file, sha256 string, ok bool)

// ResolveOllamaTags resolves every arm's ollama_tag in lib, and refuses a
// model.file that is an Ollama tag written where a path belongs. It returns
// what the command line sends beside the design.
func ResolveOllamaTags(file string, d *Design, lib ollamalib.Library, opts ResolveOptions) (map[string]ollamalib.Model, error) {
	out := map[string]ollamalib.Model{}
	var probs []Problem
	add := func(i int, field string, kind ProblemKind, format string, args ...any) {
		probs = append(probs, Problem{File: file, Path: fmt.Sprintf("arms[%d].model.%s", i, field), Kind: kind, Msg: fmt.Sprintf(format, args...)})
	}
	for i, a := range d.Arms {
		tag := strings.TrimSpace(a.Model.OllamaTag)
		if tag == "" {
			if looksLikeOllamaTag(a.Model.File) {
				if path, err := ModelPath(a.Model.File, opts.Lookup, opts.BaseDir); err == nil {
					if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
						add(i, "file", KindInvalid, "%q is not a file here and looks like an Ollama tag: name it as \"model\": {\"ollama_tag\": %q} (rig resolves it in your Ollama library to its GGUF blob and pins its sha256)", echo(a.Model.File), echo(a.Model.File))
					}
				}
			}
			continue
		}
		if a.Model.File != "" {
			add(i, "ollama_tag", KindInvalid, "give file or ollama_tag, not both (ollama_tag resolves to the file)")
			continue
		}
		if _, done := out[tag]; done {
			continue
		}
		m, err := lib.Resolve(tag)
		if err != nil {
			add(i, "ollama_tag", KindUnreadable, "%v", err)
			continue
		}
		out[tag] = m
	}
	if len(probs) > 0 {
		return nil, &ValidationError{Problems: probs}
	}
	return out, nil
}

// ApplyOllamaTags writes each arm's resolved tag into its model: the blob as
// File and its digest as SHA256. The daemon runs it on the design the
// command line sent, before anything reads a model file.
func ApplyOllamaTags(file string, d *Design, resolved OllamaTagResolver) error {
	var probs []Problem
	for i := range d.Arms {
		m := &d.Arms[i].Model
		tag := strings.TrimSpace(m.OllamaTag)
		if tag == "" {
			continue
		}
		path := fmt.Sprintf("arms[%d].model", i)
		blob, sum, ok := "", "", false
		if resolved != nil {
			blob, sum, ok = resolved(tag)
		}
		switch {
		case m.File != "":
			probs = append(probs, Problem{File: file, Path: path + ".ollama_tag", Kind: KindInvalid, Msg: "give file or ollama_tag, not both (ollama_tag resolves to the file)"})
		case !ok || blob == "" || !sha256RE.MatchString(sum):
			probs = append(probs, Problem{File: file, Path: path + ".ollama_tag", Kind: KindUnreadable, Msg: fmt.Sprintf("%q was not resolved: rig study register resolves a tag in your own Ollama library and sends its blob; register with rig's command line", echo(tag))})
		case m.SHA256 != "" && m.SHA256 != sum:
			probs = append(probs, Problem{File: file, Path: path + ".sha256", Kind: KindInvalid, Msg: fmt.Sprintf("%s, but the tag %q now names weights %s (the tag was pulled or created again: drop sha256 to pin the new weights, or retag the old ones)", m.SHA256, echo(tag), sum)})
		default:
			m.File, m.SHA256 = blob, sum
		}
	}
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

// ollamaTagLike is a model name with a tag and nothing of a path: no folder,
// no .gguf, no ${REFERENCE}.
var ollamaTagLike = regexp.MustCompile(`^([a-zA-Z0-9][a-zA-Z0-9._-]*/){0,2}[a-zA-Z0-9][a-zA-Z0-9._-]*:[a-zA-Z0-9_][a-zA-Z0-9._-]*$`)

func looksLikeOllamaTag(ref string) bool {
	return ollamaTagLike.MatchString(ref) && !strings.HasSuffix(strings.ToLower(ref), ".gguf") && !strings.Contains(ref, "${")
}
