package tasks

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
)

// BlindItem is an output as a judge or reviewer sees it: a random label and
// the text, with every known identity redacted.
type BlindItem struct {
	Label  string            `json:"label"`
	TaskID string            `json:"task_id"`
	Text   string            `json:"text"`
	Files  map[string]string `json:"files,omitempty"`
}

// BlindEntry joins a label back to its source after grading.
type BlindEntry struct {
	Label   string `json:"label"`
	TrialID string `json:"trial_id,omitempty"`
	TaskID  string `json:"task_id"`
	Arm     string `json:"arm,omitempty"`
	Model   string `json:"model,omitempty"`
	Control bool   `json:"control,omitempty"`
}

// BlindMap is the blinding key. It is stored apart from the items and
// joined only after grading.
type BlindMap struct {
	Seed    uint64       `json:"seed"`
	Entries []BlindEntry `json:"entries"`
}

// Lookup returns the entry for a label.
func (m BlindMap) Lookup(label string) (BlindEntry, bool) {
	for _, e := range m.Entries {
		if e.Label == label {
			return e, true
		}
	}
	return BlindEntry{}, false
}

// Identities lists the arm and model names in the map and their short forms;
// these must not reach a judge.
func (m BlindMap) Identities() []string {
	var ids []string
	for _, e := range m.Entries {
		ids = append(ids, e.Arm, e.Model, modelFamily(e.Model))
	}
	return expandIdentities(ids)
}

// Blind shuffles outputs under random labels drawn from seed, redacting
// every output's arm and model name (and the extra identities, such as
// registry ids) wherever they appear in the texts.
func Blind(outputs []Output, seed uint64, extra ...string) ([]BlindItem, BlindMap) {
	return blind(outputs, nil, seed, extra)
}

func blind(cands, controls []Output, seed uint64, extra []string) ([]BlindItem, BlindMap) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	type src struct {
		out     Output
		control bool
	}
	all := make([]src, 0, len(cands)+len(controls))
	var ids []string
	for _, o := range cands {
		all = append(all, src{out: o})
		ids = append(ids, o.Arm, o.Model, modelFamily(o.Model))
	}
	for _, o := range controls {
		all = append(all, src{out: o, control: true})
		ids = append(ids, o.Arm, o.Model, modelFamily(o.Model))
	}
	ids = expandIdentities(append(ids, extra...))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	used := map[string]bool{}
	items := make([]BlindItem, 0, len(all))
	m := BlindMap{Seed: seed}
	for _, s := range all {
		label := ""
		for label == "" || used[label] {
			label = fmt.Sprintf("item-%06x", rng.Uint32()&0xffffff)
		}
		used[label] = true
		it := BlindItem{Label: label, TaskID: s.out.TaskID, Text: Redact(s.out.Text, ids)}
		if len(s.out.Files) > 0 {
			it.Files = map[string]string{}
			for p, c := range s.out.Files {
				it.Files[p] = Redact(c, ids)
			}
		}
		items = append(items, it)
		m.Entries = append(m.Entries, BlindEntry{Label: label, TrialID: s.out.TrialID, TaskID: s.out.TaskID, Arm: s.out.Arm, Model: s.out.Model, Control: s.control})
	}
	return items, m
}

// expandIdentities adds the short forms a text may use: "smollm2:135m"
// also appears as "smollm2", "hf.co/org/gemma-3" as "gemma-3". Forms
// shorter than three characters would redact ordinary words and are dropped.
func expandIdentities(ids []string) []string {
	set := map[string]bool{}
	add := func(s string) {
		s = strings.TrimSpace(s)
		if len(s) >= 3 {
			set[strings.ToLower(s)] = true
		}
	}
	for _, id := range ids {
		add(id)
		base := id
		if i := strings.LastIndex(base, "/"); i >= 0 {
			base = base[i+1:]
			add(base)
		}
		if i := strings.Index(base, ":"); i >= 0 {
			add(base[:i])
		}
		if i := strings.Index(strings.ToLower(base), ".gguf"); i >= 0 {
			add(base[:i])
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	// Longest first, so "smollm2:135m" is redacted whole before "smollm2".
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// modelFamily is the leading letters of a model's base name ("gemma" for
// "hf.co/google/gemma-3-270m", "smollm" for "smollm2:135m"): a model that
// says "I am Gemma" names itself. Families under four letters are too
// likely to be ordinary words and are left out.
func modelFamily(model string) string {
	base := model
	if i := strings.LastIndex(base, "/"); i >= 0 {
		base = base[i+1:]
	}
	n := 0
	for n < len(base) && (base[n]|0x20) >= 'a' && (base[n]|0x20) <= 'z' {
		n++
	}
	if n < 4 {
		return ""
	}
	return base[:n]
}

// Redacted replaces an identity in blind text.
const Redacted = "[redacted]"

// Redact replaces every identity in text, ignoring case.
func Redact(text string, identities []string) string {
	for _, id := range expandIdentities(identities) {
		re := regexp.MustCompile(`(?i)` + regexp.QuoteMeta(id))
		text = re.ReplaceAllLiteralString(text, Redacted)
	}
	return text
}

// IdentityError names the identity found in a text that must be blind.
type IdentityError struct {
	Identity string
	Offset   int
}

func (e *IdentityError) Error() string {
	return fmt.Sprintf("blind text names %q at byte %d (redact outputs with Blind before building a judge prompt)", e.Identity, e.Offset)
}

func (e *IdentityError) Unwrap() error { return ErrIdentity }

// AssertNoIdentity fails when prompt contains any identity (model name,
// registry id, arm name), ignoring case.
func AssertNoIdentity(prompt string, identities []string) error {
	lp := strings.ToLower(prompt)
	for _, id := range expandIdentities(identities) {
		if i := strings.Index(lp, id); i >= 0 {
			return &IdentityError{Identity: id, Offset: i}
		}
	}
	return nil
}

// JudgePrompt builds the prompt a judge arm sees: the instructions, the task
// and the labelled outputs, nothing else. The caller runs AssertNoIdentity
// on the result before sending it.
func JudgePrompt(instructions, task string, items []BlindItem) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(instructions))
	b.WriteString("\n\n## Task\n")
	b.WriteString(strings.TrimSpace(task))
	b.WriteString("\n\n## Outputs\n")
	for _, it := range items {
		fmt.Fprintf(&b, "\n### %s\n%s\n", it.Label, strings.TrimSpace(it.Text))
		paths := make([]string, 0, len(it.Files))
		for p := range it.Files {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			fmt.Fprintf(&b, "\n--- %s\n%s\n", p, it.Files[p])
		}
	}
	b.WriteString("\nAnswer with one JSON object per label: {\"label\": ..., \"score\": 0..1}.\n")
	return b.String()
}
