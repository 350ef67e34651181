package genrecord

import (
	"fmt"
	"path/filepath"
	"sort"

	"rig/internal/offload"
)

// PinDiff is one pin that differs between two stacks.
type PinDiff struct {
	Field    string `json:"field"`
	Recorded string `json:"recorded"`
	Current  string `json:"current"`
}

func (d PinDiff) String() string {
	return fmt.Sprintf("%s: recorded %q, now %q", d.Field, d.Recorded, d.Current)
}

// StackDiff compares the pins that decide which bytes compute the
// log-probs: runtime, model file, Ollama digest (when both have one),
// server binary, where the model ran (the offload pin), the fields a
// generic server's spec adds to each request, and every library.
// Machine line, design hash and ids are not compared: the same stack on
// another run must still replay.
func StackDiff(recorded, current Pins) []PinDiff {
	var out []PinDiff
	add := func(field, a, b string) {
		if a != b {
			out = append(out, PinDiff{Field: field, Recorded: a, Current: b})
		}
	}
	add("runtime", recorded.Runtime, current.Runtime)
	add("model_sha256", recorded.ModelSHA256, current.ModelSHA256)
	if recorded.OllamaDigest != "" && current.OllamaDigest != "" {
		add("ollama_digest", recorded.OllamaDigest, current.OllamaDigest)
	}
	add("binary_sha256", recorded.BinarySHA256, current.BinarySHA256)
	add("offload", offloadString(recorded.OffloadPin()), offloadString(current.OffloadPin()))
	add("server_request", recorded.ServerRequest, current.ServerRequest)
	out = append(out, libraryDiff(recorded.Libraries, current.Libraries, true)...)
	return out
}

// libraryDiff keys libraries by base name, because a sandbox may load the
// same files from another directory; it falls back to full paths when a base
// name repeats, so two different files are never merged.
func libraryDiff(recorded, current map[string]string, byBase bool) []PinDiff {
	var rk, ck map[string]string
	if byBase {
		rk, ck = libKeys(recorded), libKeys(current)
	}
	if rk == nil || ck == nil {
		rk, ck = fullKeys(recorded), fullKeys(current)
	}
	names := map[string]bool{}
	for k := range rk {
		names[k] = true
	}
	for k := range ck {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var out []PinDiff
	for _, k := range sorted {
		a, b := rk[k], ck[k]
		if a == b {
			continue
		}
		if a == "" {
			a = "(not loaded)"
		}
		if b == "" {
			b = "(not loaded)"
		}
		out = append(out, PinDiff{Field: "libraries[" + k + "]", Recorded: a, Current: b})
	}
	return out
}

func libKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for p, sum := range m {
		b := filepath.Base(p)
		if _, dup := out[b]; dup {
			return nil
		}
		out[b] = sum
	}
	return out
}

func fullKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for p, sum := range m {
		out[p] = sum
	}
	return out
}

// Diff compares every pin, for a Writer reopening a record: appending rows
// made under other pins would make the header lie about them.
func (p Pins) Diff(q Pins) []PinDiff {
	out := StackDiff(p, q)
	add := func(field, a, b string) {
		if a != b {
			out = append(out, PinDiff{Field: field, Recorded: a, Current: b})
		}
	}
	add("model_name", p.ModelName, q.ModelName)
	if !(p.OllamaDigest != "" && q.OllamaDigest != "") {
		add("ollama_digest", p.OllamaDigest, q.OllamaDigest)
	}
	add("runtime_version", p.RuntimeVersion, q.RuntimeVersion)
	add("build_flags", p.BuildFlags, q.BuildFlags)
	add("weight_repack", p.WeightRepack, q.WeightRepack)
	add("prompt_checkpoints", p.PromptCheckpoints, q.PromptCheckpoints)
	// A record begun before rig wrote the context has none; its execution
	// resumes at the same (frozen) context, so only two stated ones differ.
	if p.Context != 0 && q.Context != 0 {
		add("context", fmt.Sprint(p.Context), fmt.Sprint(q.Context))
	}
	add("machine_line", p.MachineLine, q.MachineLine)
	add("design_hash", p.DesignHash, q.DesignHash)
	add("study_id", p.StudyID, q.StudyID)
	add("execution_id", p.ExecutionID, q.ExecutionID)
	// Libraries must match by full path here: same run, same files.
	for _, d := range libraryDiff(p.Libraries, q.Libraries, false) {
		if !containsField(out, d.Field) {
			out = append(out, d)
		}
	}
	return out
}

func containsField(ds []PinDiff, field string) bool {
	for _, d := range ds {
		if d.Field == field {
			return true
		}
	}
	return false
}

// offloadString is an offload pin in the words a receipt uses for it.
func offloadString(p offload.Pin) string {
	f := p.PinFields()
	return fmt.Sprintf("backend %s, gpu_layers %s, flash_attention %s, kv_cache_on_host %s",
		f["offload_backend"], f["gpu_layers"], f["flash_attention"], f["kv_cache_on_host"])
}
