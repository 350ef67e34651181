package tasks

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"rig/internal/sizecap"
)

// Leakage thresholds, stated in every report. A task part leaks into a
// place when (a) its normalized words appear verbatim in the place and it
// has at least leakMinWords words (shorter keys such as "42" occur
// everywhere), or (b) at least half of its word 8-grams occur in the place
// (containment, which catches a task pasted into a long document), or (c)
// the MinHash estimate of word 5-gram Jaccard is at least 0.5 (a reworded
// near-copy of similar length).
const (
	leakMinWords    = 6
	leakGram        = 8
	leakContainment = 0.5
	leakMinHashGram = 5
	leakMinHash     = 0.5
)

// Place kinds a design declares.
const (
	PlacePrompt       = "prompt"
	PlaceSystemPrompt = "system_prompt"
	PlaceToolSpec     = "tool_spec"
	PlaceRetrieval    = "retrieval"
	PlaceTraining     = "training_dataset"
)

// Place is a text a candidate sees or will be trained on.
type Place struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Text string `json:"-"`
}

// placeCap bounds one place's text, held whole and shingled: the check is
// sized for a prompt file or a fine-tuning set of some thousands of
// examples, not a pre-training corpus.
var placeCap = sizecap.Cap{What: "leakage place", Limit: 64 << 20, Fix: "split the text into several places, each under the cap"}

// LoadPlace reads a place's text from a file.
func LoadPlace(kind, file string) (Place, error) {
	b, err := placeCap.ReadFile(file)
	if err != nil {
		return Place{}, fmt.Errorf("leakage place %s: %w", file, err)
	}
	return Place{Name: file, Kind: kind, Text: string(b)}, nil
}

// LeakHit names both places: the bank task (and whether its input or key
// leaked) and the place it was found in.
type LeakHit struct {
	Bank      string  `json:"bank"`
	TaskID    string  `json:"task_id"`
	Part      string  `json:"part"` // input or key
	Place     string  `json:"place"`
	PlaceKind string  `json:"place_kind"`
	Method    string  `json:"method"`
	Score     float64 `json:"score"`
}

func (h LeakHit) String() string {
	return fmt.Sprintf("%s:%s (%s) ↔ %s %s: %s %.2f", h.Bank, h.TaskID, h.Part, h.PlaceKind, h.Place, h.Method, h.Score)
}

// LeakageReport lists every hit and the thresholds used.
type LeakageReport struct {
	Method string    `json:"method"`
	Tasks  int       `json:"tasks"`
	Places int       `json:"places"`
	Hits   []LeakHit `json:"hits,omitempty"`
}

// Err returns a *LeakError wrapping ErrLeak when there are hits; the freeze
// refuses on it.
func (r LeakageReport) Err() error {
	if len(r.Hits) == 0 {
		return nil
	}
	return &LeakError{Hits: r.Hits}
}

// WriteText prints the report for a person.
func (r LeakageReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "leakage: %d tasks against %d places\nmethod: %s\nhits: %d\n", r.Tasks, r.Places, r.Method, len(r.Hits))
	for _, h := range r.Hits {
		b.WriteString("  " + h.String() + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// LeakError carries the hits that block a freeze.
type LeakError struct{ Hits []LeakHit }

func (e *LeakError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d task leak(s) into what candidates see or train on (remove the text from the place, or drop the task and bump bank_version):", len(e.Hits))
	for _, h := range e.Hits {
		b.WriteString("\n  " + h.String())
	}
	return b.String()
}

func (e *LeakError) Unwrap() error { return ErrLeak }

type leakText struct {
	norm  string
	ws    []string
	n     int
	grams map[uint64]struct{}
	sig   signature
	// windows holds the hash of every leakMinWords-word window of a place
	// (nil for a task's part): the index the exact step looks a part up in
	// before it scans the place's text.
	windows map[uint64]struct{}
}

func newLeakText(s string) leakText {
	ws := words(s)
	return leakText{
		norm:  " " + strings.Join(ws, " ") + " ",
		ws:    ws,
		n:     len(ws),
		grams: shingles(ws, leakGram),
		sig:   minHash(shingles(ws, leakMinHashGram)),
	}
}

// newPlaceText is newLeakText with the exact step's window index.
func newPlaceText(s string) leakText {
	t := newLeakText(s)
	t.windows = make(map[uint64]struct{}, max(0, t.n-leakMinWords+1))
	for i := 0; i+leakMinWords <= t.n; i++ {
		t.windows[hashWords(t.ws[i:i+leakMinWords])] = struct{}{}
	}
	return t
}

// exactIn reports whether part's words appear, in order and contiguous, in
// place: whether part.norm is a substring of place.norm (both are the words
// joined by single spaces, with a space at each end). Scanning the place for
// every part of every task costs tasks × place size; instead every
// leakMinWords-word window of the part must be in the place's window index
// first, which almost every part fails at its first window. A part that
// passes is verified by the scan, so a hash collision costs time, never a
// wrong answer. part.n >= leakMinWords.
func exactIn(part, place leakText) bool {
	for i := 0; i+leakMinWords <= part.n; i++ {
		if _, ok := place.windows[hashWords(part.ws[i:i+leakMinWords])]; !ok {
			return false
		}
	}
	return strings.Contains(place.norm, part.norm)
}

// CheckLeakage compares every task's input and key with every place.
func CheckLeakage(ctx context.Context, banks []*Bank, places []Place) (LeakageReport, error) {
	r := LeakageReport{
		Method: fmt.Sprintf("exact normalized substring (parts of >= %d words); word %d-gram containment >= %.2f; MinHash (%d hashes) word %d-gram Jaccard >= %.2f",
			leakMinWords, leakGram, leakContainment, minHashSize, leakMinHashGram, leakMinHash),
		Places: len(places),
	}
	pts := make([]leakText, len(places))
	for i, p := range places {
		pts[i] = newPlaceText(p.Text)
	}
	for _, b := range banks {
		for _, t := range b.Tasks {
			if err := ctx.Err(); err != nil {
				return r, err
			}
			r.Tasks++
			for _, part := range leakParts(t) {
				tt := newLeakText(part.text)
				if tt.n == 0 {
					continue
				}
				for i, p := range places {
					if method, score, hit := leaks(tt, pts[i]); hit {
						r.Hits = append(r.Hits, LeakHit{Bank: b.File, TaskID: t.ID, Part: part.name, Place: p.Name, PlaceKind: p.Kind, Method: method, Score: score})
					}
				}
			}
		}
	}
	return r, nil
}

func leaks(t, p leakText) (string, float64, bool) {
	if t.n >= leakMinWords && exactIn(t, p) {
		return "exact", 1, true
	}
	if t.n >= leakGram {
		if c := containment(t.grams, p.grams); c >= leakContainment {
			return fmt.Sprintf("word %d-gram containment", leakGram), c, true
		}
	}
	if t.n >= leakMinHashGram && p.n >= leakMinHashGram {
		if j := t.sig.jaccard(p.sig); j >= leakMinHash {
			return "minhash jaccard", j, true
		}
	}
	return "", 0, false
}

type leakPart struct{ name, text string }

// leakParts splits a task into the texts checked on their own: the whole
// input, each prompt paragraph and file (so the material of a task pasted
// without its instructions is still found), the key's values, and each key
// file. Identical texts are checked once.
func leakParts(t Task) []leakPart {
	parts := []leakPart{{"input", taskText(t)}}
	paras := strings.Split(t.Input.Prompt, "\n\n")
	if len(paras) > 1 {
		for i, p := range paras {
			parts = append(parts, leakPart{fmt.Sprintf("input.prompt#%d", i+1), p})
		}
	}
	for _, p := range sortedKeys(t.Input.Files) {
		parts = append(parts, leakPart{"input.files[" + p + "]", t.Input.Files[p]})
	}
	parts = append(parts, leakPart{"key", keyText(t)})
	var k struct {
		Files map[string]string `json:"files"`
	}
	if jsonUnmarshal(t.Key, &k) == nil {
		for _, p := range sortedKeys(k.Files) {
			parts = append(parts, leakPart{"key.files[" + p + "]", k.Files[p]})
		}
	}
	seen := map[string]bool{}
	out := parts[:0]
	for _, p := range parts {
		if norm := strings.Join(words(p.text), " "); !seen[norm] {
			seen[norm] = true
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// keyText is the key's values in a stable order (field names are shared by
// every task of a template and would only add noise).
func keyText(t Task) string {
	var k any
	if canon, err := canonicalJSON(t.Key); err == nil {
		_ = jsonUnmarshal(canon, &k)
	}
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			names := make([]string, 0, len(x))
			for name := range x {
				// A schema is structure, not content.
				if name != "schema" {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			for _, name := range names {
				walk(x[name])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case nil:
		default:
			fmt.Fprintf(&b, "%v ", x)
		}
	}
	walk(k)
	return b.String()
}
