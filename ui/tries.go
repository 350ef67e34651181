package ui

// The tries view (rig try): the kept tries and, per try, a matrix of tasks
// by arms whose cells are each arm's answer, grade, tokens and latency,
// with the pilot figures beneath. Model output is hostile input: every
// string reaches the page through html/template's escaping, the page runs
// no script (its CSP is default-src 'none'), and a running try's page
// reloads itself by a meta refresh until the try ends.

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strings"

	"rig/api"
	"rig/internal/wording"
)

// TrySource is what the tries view reads; the daemon implements it as part
// of Source.
type TrySource interface {
	// Tries lists the try running now (if any) and the kept tries, newest
	// first.
	Tries() ([]api.TrySummary, error)
	// Try is one try: the running one as far as it got, or a kept one. An
	// id that breaks layout.TryIDRule is an error wrapping
	// layout.ErrInvalidName.
	Try(ctx context.Context, id string) (api.TryRecord, error)
}

// TryRefresh is how often a running try's page reloads, in seconds.
const TryRefresh = 2

// clipRunes is how much of an output or prompt a cell shows before it is
// expanded.
const clipRunes = 160

// tryRoutes adds the tries view to mux.
func (s *Server) tryRoutes(mux *http.ServeMux, src TrySource) {
	mux.HandleFunc("GET /tries", func(w http.ResponseWriter, r *http.Request) {
		list, err := src.Tries()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		s.page(w, triesTmpl, map[string]any{"Tries": list})
	})
	mux.HandleFunc("GET /try/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec, err := src.Try(r.Context(), r.PathValue("id"))
		if err != nil {
			notFound(w, "no try: ", err)
			return
		}
		s.page(w, tryTmpl, newTryMatrix(rec))
	})
	mux.HandleFunc("GET /api/try/{id}", func(w http.ResponseWriter, r *http.Request) {
		rec, err := src.Try(r.Context(), r.PathValue("id"))
		if err != nil {
			notFound(w, "", err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rec)
	})
}

// tryMatrix is one try as its page draws it.
type tryMatrix struct {
	Rec     api.TryRecord
	Running bool
	Arms    []string
	Rows    []tryRow
	Done    int
	Planned int
}

// tryRow is one task: its prompt and a cell per arm, in Arms' order.
type tryRow struct {
	JobKind, Task, Prompt string
	Cells                 []tryCell
}

// tryCell is one arm's answer to one task; Trial is nil until it ends.
type tryCell struct {
	Arm   string
	Trial *api.TryTrial
}

// newTryMatrix lays the try out as tasks by arms: every planned task is a
// row from the start, so cells fill in as trials end.
func newTryMatrix(rec api.TryRecord) tryMatrix {
	m := tryMatrix{Rec: rec, Running: rec.Status == api.TryRunning, Arms: slices.Clone(rec.Arms)}
	byKey := map[string]*api.TryTrial{}
	for i, t := range rec.Trials {
		if !slices.Contains(m.Arms, t.Arm) {
			m.Arms = append(m.Arms, t.Arm) // a record kept before tries named their arms
		}
		byKey[t.JobKind+"\x00"+t.Task+"\x00"+t.Arm] = &rec.Trials[i]
	}
	kinds := make([]string, 0, len(rec.Tasks))
	for jk := range rec.Tasks {
		kinds = append(kinds, jk)
	}
	sort.Strings(kinds)
	prompts := map[string]string{}
	for _, t := range rec.Trials {
		prompts[t.JobKind+"\x00"+t.Task] = t.Prompt
	}
	for _, jk := range kinds {
		for _, id := range rec.Tasks[jk] {
			row := tryRow{JobKind: jk, Task: id, Prompt: prompts[jk+"\x00"+id]}
			for _, a := range m.Arms {
				row.Cells = append(row.Cells, tryCell{Arm: a, Trial: byKey[jk+"\x00"+id+"\x00"+a]})
			}
			m.Rows = append(m.Rows, row)
		}
	}
	m.Done, m.Planned = len(rec.Trials), len(m.Rows)*len(m.Arms)
	return m
}

// clip is s on one line, cut at clipRunes; whole is true when nothing was
// cut.
func clip(s string) (short string, whole bool) {
	one := strings.Join(strings.Fields(s), " ")
	r := []rune(one)
	if len(r) <= clipRunes {
		return one, one == strings.TrimSpace(s)
	}
	return string(r[:clipRunes]) + "…", false
}

// gradeOf is a trial's grade as a cell shows it.
func gradeOf(t api.TryTrial) string {
	if !t.Graded {
		return t.Outcome
	}
	if t.Pass {
		return fmt.Sprintf("pass %.2f", t.Score)
	}
	return fmt.Sprintf("fail %.2f", t.Score)
}

var tryFuncs = template.FuncMap{
	"path":  funcs["path"],
	"grade": gradeOf,
	"short": func(s string) string { c, _ := clip(s); return c },
	"whole": func(s string) bool { _, w := clip(s); return w },
	"secs":  func(ms int64) string { return fmt.Sprintf("%.2f s", float64(ms)/1000) },
	"share": func(n, of int) string {
		if of == 0 {
			return "—"
		}
		return wording.Percent(float64(n) / float64(of))
	},
	"interval": wording.Interval,
	"value":    wording.Value,
	"when":     func(r api.TrySummary) string { return r.At.Local().Format("2006-01-02 15:04:05") },
	"short12":  func(h string) string { h = strings.TrimPrefix(h, "sha256:"); return h[:min(12, len(h))] },
}

const tryStyle = `<style>.matrix td{vertical-align:top}.matrix pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font-size:12.5px}.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}.other{color:#9a6700;font-weight:600}.pending{color:#59636e;font-style:italic}summary{cursor:pointer}</style>`

var triesTmpl = template.Must(template.New("tries").Funcs(tryFuncs).Parse(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>rig workspace · tries</title>` + style + `</head><body>
<p><a href="/">all studies</a></p>
<h1>Tries</h1><p class="dim">Each rig try, kept until rig try prune; nothing in a try is counted.</p>
{{if .Tries}}<table id="tries"><thead><tr><th>Try</th><th>When</th><th>Design</th><th>Status</th><th>Passed</th></tr></thead><tbody>
{{range .Tries}}<tr><td><a href="/try/{{path .ID}}">{{.ID}}</a></td><td>{{when .}}</td><td>{{.Study}} <span class="dim">{{short12 .DesignHash}}</span></td><td>{{.Status}}</td><td>{{.Passed}} of {{.Trials}}</td></tr>{{end}}
</tbody></table>{{else}}<p>No try is kept (rig try DESIGN makes one).</p>{{end}}
</body></html>`))

var tryTmpl = template.Must(template.New("try").Funcs(tryFuncs).Parse(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{{if .Running}}<meta http-equiv="refresh" content="` + fmt.Sprint(TryRefresh) + `">{{end}}<title>{{.Rec.ID}} · try</title>` + style + tryStyle + `</head><body>
<p><a href="/tries">all tries</a></p>
<h1>{{.Rec.Study}} <span class="dim">{{.Rec.ID}}</span></h1>
<p id="status" data-status="{{.Rec.Status}}">{{if .Running}}Running: {{.Done}} of {{.Planned}} trials so far; this page reloads every ` + fmt.Sprint(TryRefresh) + ` s until the try ends.{{else if eq .Rec.Status "failed"}}Failed after {{.Done}} of {{.Planned}} trials: {{.Rec.Error}}{{else}}Done: {{.Done}} trials in {{secs .Rec.ElapsedMS}}. Nothing here is counted.{{end}}
<span class="dim">Design {{.Rec.DesignFile}} ({{short12 .Rec.DesignHash}}).</span></p>
<table class="matrix" id="matrix"><thead><tr><th>Task</th>{{range .Arms}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr data-task="{{.Task}}"><td><b>{{.Task}}</b> <span class="dim">{{.JobKind}}</span>{{if .Prompt}}<details><summary class="dim">prompt</summary><pre>{{.Prompt}}</pre></details>{{end}}</td>
{{range .Cells}}{{if .Trial}}{{with .Trial}}<td class="cell" data-arm="{{.Arm}}" data-outcome="{{.Outcome}}"><span class="grade {{if not .Graded}}other{{else if .Pass}}pass{{else}}fail{{end}}">{{grade .}}</span> <span class="dim">{{if .Grader}}by {{.Grader}} · {{end}}{{.InputTokens}}→{{.OutputTokens}} tok · {{secs .WallMS}}{{if .Capped}} · capped{{end}}{{if .OffTask}} · off task ({{.OffTask}}){{end}}</span>
{{if whole .Output}}<pre class="output">{{.Output}}</pre>{{else}}<details><summary class="output-short">{{short .Output}}</summary><pre class="output">{{.Output}}</pre></details>{{end}}{{if and .Detail (or (not .Graded) (and (ne .Outcome "scored") (ne .Outcome "capped")))}}<div class="dim">{{.Detail}}</div>{{end}}</td>{{end}}{{else}}<td class="cell pending" data-arm="{{.Arm}}">{{if $.Running}}waiting{{else}}—{{end}}</td>{{end}}{{end}}</tr>
{{end}}</tbody></table>
<h2>Pilot</h2><p class="dim">A try's few tasks: figures to size the study with, not results.</p>
<table id="pilot-arms"><thead><tr><th>Arm</th><th>Passed</th><th>Capped</th><th>Off task</th></tr></thead><tbody>
{{range .Rec.Pilot.Arms}}<tr><td>{{.Arm}}</td><td>{{.Passed}} of {{.Trials}}</td><td>{{share .Capped .Trials}}</td><td>{{share .OffTask .Trials}}</td></tr>{{end}}
</tbody></table>
{{if .Rec.Pilot.Pairs}}<table id="pilot-pairs"><thead><tr><th>Pair</th><th>Job kind</th><th>Discordance</th><th>Smallest lead the planned tasks detect</th></tr></thead><tbody>
{{range .Rec.Pilot.Pairs}}<tr><td>{{.Candidate}} vs {{.Baseline}}</td><td>{{.JobKind}}</td><td>{{interval .Discordance .Lo .Hi}} over {{.Tasks}} tasks ({{.Discordant}} split)</td><td>{{if .Detectable}}{{value .MinDetectable}} with {{.PlannedTasks}} tasks at power {{printf "%.2f" .Power}}{{else}}—{{end}}</td></tr>{{end}}
</tbody></table>{{end}}
{{range .Rec.Pilot.Notes}}<p class="note">Note: {{.}}</p>{{end}}
{{if .Rec.Runtimes}}<h2>Runtimes</h2><table id="runtimes"><thead><tr><th>Arm</th><th>Runtime</th><th>Pid</th><th>Ready</th></tr></thead><tbody>
{{range .Rec.Runtimes}}<tr><td>{{.Arm}}</td><td>{{.Runtime}}</td><td>{{.PID}}</td><td>{{if .Reused}}warm, kept from an earlier try{{else}}started in {{secs .ReadyMS}}{{end}}</td></tr>{{end}}
</tbody></table>{{end}}
{{if eq .Rec.Status "done"}}<p class="dim">Register exactly this: rig study register {{.Rec.DesignFile}} --from-try {{.Rec.ID}}</p>{{end}}
</body></html>`))
