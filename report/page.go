package report

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
)

// reportJS is the page's one script: the gate slider, the rows matrix and
// its detail panel. It reads the embedded JSON and writes with textContent
// only, so no model output ever becomes markup.
//
//go:embed report.js
var reportJS string

// ScriptHash is the Content-Security-Policy source that allows the page's
// inline script and nothing else: 'sha256-' and the base64 of its digest.
func ScriptHash() string {
	sum := sha256.Sum256([]byte(reportJS))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// csp forbids every load; styles are inline and the one script is allowed
// by its hash, so a script that slipped into the page would not run.
func csp() string {
	return "default-src 'none'; style-src 'unsafe-inline'; script-src " + ScriptHash() + "; base-uri 'none'; form-action 'none'"
}

// pageData is what the script reads: per job kind, the values, pairs and
// rows the report's Data already holds, under the ids the page uses.
type pageData struct {
	Kinds []pageKind `json:"kinds"`
}

type pageKind struct {
	ID     string     `json:"id"`
	Name   string     `json:"name"`
	Gate   float64    `json:"gate"`
	Scores *Scores    `json:"scores"`
	Pairs  []pagePair `json:"pairs"`
	Rows   []Row      `json:"rows"`
}

type pagePair struct {
	Challenger string `json:"challenger"`
	Baseline   string `json:"baseline"`
}

// pageJSON encodes the script's data for a <script type="application/json">
// block. encoding/json escapes <, > and & (and U+2028, U+2029) inside
// strings, so no output can close the block or open a tag.
func pageJSON(kinds []kindView) (template.JS, error) {
	var pd pageData
	for _, k := range kinds {
		if k.Scores == nil {
			continue
		}
		pk := pageKind{ID: k.ID, Name: k.Name, Gate: k.Gate, Scores: k.Scores, Rows: k.Rows}
		for _, p := range k.Pairs {
			pk.Pairs = append(pk.Pairs, pagePair{p.Challenger, p.Baseline})
		}
		if pk.Rows == nil {
			pk.Rows = []Row{}
		}
		pd.Kinds = append(pd.Kinds, pk)
	}
	if pd.Kinds == nil {
		pd.Kinds = []pageKind{}
	}
	b, err := json.Marshal(pd)
	if err != nil {
		return "", fmt.Errorf("report: encode the page's data: %w", err)
	}
	if strings.Contains(string(b), "</") {
		// json.Marshal escapes '<'; this cannot happen, and the page must
		// not be written if it did.
		return "", fmt.Errorf("report: the page's data holds \"</\"")
	}
	return template.JS(b), nil
}

// armPass is the analysis's pass rate of arm at the design's gate.
func armPass(k Kind, arm string) float64 {
	for _, a := range k.Arms {
		if a.Arm == arm {
			return a.PassRate
		}
	}
	return 0
}

func armTasks(k Kind, arm string) int {
	for _, a := range k.Arms {
		if a.Arm == arm {
			return a.Tasks
		}
	}
	return 0
}

// flips counts pair j's newly fixed and newly failing tasks at the design's
// gate, as the analysis listed them.
func flips(k Kind, j int) [2]int {
	var n [2]int
	p := k.Pairs[j]
	for _, r := range k.Paired {
		if r.Challenger != p.Challenger || r.Baseline != p.Baseline {
			continue
		}
		if r.Change == NewlyFixed {
			n[0]++
		} else {
			n[1]++
		}
	}
	return n
}

type filterCount struct {
	Filter string
	N      int
}

// classCounts counts the rows under each filter at the design's gate: what
// the page says when its script does not run, and what Markdown prints.
func classCounts(k Kind) []filterCount {
	var out []filterCount
	for _, f := range Filters[1:] {
		n := 0
		for _, r := range k.Rows {
			if k.Shows(r, f, "", k.Gate) {
				n++
			}
		}
		out = append(out, filterCount{filterName(f), n})
	}
	return out
}

func filterName(f Filter) string { return strings.ReplaceAll(string(f), "_", " ") }
