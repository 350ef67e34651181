package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"rig/studies/run"
)

// Source is what the workspace shows; the daemon implements it.
type Source interface {
	// Studies names every registered study.
	Studies() ([]string, error)
	// Progress is a study's executions as the daemon sees them now.
	Progress(ctx context.Context, name string) (Progress, error)
	// Report writes the study's report page for its latest finished
	// execution.
	Report(ctx context.Context, name string, w io.Writer) error
}

// Progress is one study's executions with what ExecInfo does not count.
type Progress struct {
	Study      string         `json:"study"`
	Executions []run.ExecInfo `json:"executions"`
	// Capped counts, per execution id, the receipts that hit a cap.
	Capped map[string]int `json:"capped"`
	// Governor is the governor's state: "ready", "held: WHY", or why there
	// is none.
	Governor string `json:"governor"`
}

// Server is a running workspace.
type Server struct {
	// URL is what to open: http://127.0.0.1:PORT/?token=TOKEN.
	URL   string
	Addr  string
	token string
	srv   *http.Server
}

// Start listens on 127.0.0.1 at a port the kernel picks and serves src
// until ctx ends or Close is called. The token is 32 random bytes; it is in
// URL and nowhere else.
func Start(ctx context.Context, src Source) (*Server, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, fmt.Errorf("ui: a token: %w", err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ui: listen on loopback: %w", err)
	}
	s := &Server{Addr: l.Addr().String(), token: hex.EncodeToString(raw[:])}
	s.URL = "http://" + s.Addr + "/?token=" + s.token
	s.srv = &http.Server{Handler: s.handler(src), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(l)
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// handler refuses, in order: a Host that is not this listener (a page on
// another site resolving its name to 127.0.0.1), a missing or wrong token,
// and any method but GET and HEAD.
func (s *Server) handler(src Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { s.index(w, r, src) })
	mux.HandleFunc("GET /study/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := src.Report(r.Context(), r.PathValue("name"), w); err != nil {
			http.Error(w, "no report: "+err.Error(), http.StatusNotFound)
		}
	})
	mux.HandleFunc("GET /api/progress/{name}", func(w http.ResponseWriter, r *http.Request) {
		p, err := src.Progress(r.Context(), r.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p)
	})
	mux.HandleFunc("GET /progress/{name}", func(w http.ResponseWriter, r *http.Request) {
		p, err := src.Progress(r.Context(), r.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		s.page(w, progressTmpl, map[string]any{"P": p, "Token": s.token})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Host != s.Addr:
			http.Error(w, "forbidden: this workspace answers only to "+s.Addr, http.StatusForbidden)
		case subtle.ConstantTimeCompare([]byte(r.URL.Query().Get("token")), []byte(s.token)) != 1:
			http.Error(w, "forbidden: open the URL rig ui printed (it carries the session's token)", http.StatusForbidden)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			http.Error(w, "the workspace is read-only", http.StatusMethodNotAllowed)
		default:
			w.Header().Set("Referrer-Policy", "no-referrer")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Cache-Control", "no-store")
			mux.ServeHTTP(w, r)
		}
	})
}

func (s *Server) index(w http.ResponseWriter, r *http.Request, src Source) {
	names, err := src.Studies()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.page(w, indexTmpl, map[string]any{"Studies": names, "Token": s.token})
}

func (s *Server) page(w http.ResponseWriter, t *template.Template, v any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
	t.Execute(w, v)
}

var funcs = template.FuncMap{
	"q":    func(token string) string { return "?token=" + url.QueryEscape(token) },
	"path": func(name string) string { return url.PathEscape(name) },
	"pct": func(done, planned int) string {
		if planned == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f%%", 100*float64(done)/float64(planned))
	},
}

const style = `<style>body{font:15px/1.5 system-ui,sans-serif;max-width:1000px;margin:32px auto;padding:0 20px;color:#1f2328}a{color:#0b5cad}table{border-collapse:collapse;width:100%;font-size:13.5px}th,td{text-align:left;padding:5px 8px;border-bottom:1px solid #d8dee4}.dim{color:#59636e}</style>`

var indexTmpl = template.Must(template.New("index").Funcs(funcs).Parse(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>rig workspace</title>` + style + `</head><body>
<h1>rig workspace</h1><p class="dim">Every study on this machine, read-only. This page is served on loopback only; its links carry this session's token.</p>
{{if .Studies}}<table><thead><tr><th>Study</th><th>Report</th><th>Progress</th></tr></thead><tbody>
{{range .Studies}}<tr><td>{{.}}</td><td><a href="/study/{{path .}}{{q $.Token}}">report</a></td><td><a href="/progress/{{path .}}{{q $.Token}}">progress</a></td></tr>{{end}}
</tbody></table>{{else}}<p>No study is registered yet (rig study register DESIGN).</p>{{end}}
</body></html>`))

var progressTmpl = template.Must(template.New("progress").Funcs(funcs).Parse(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5"><title>{{.P.Study}} · progress</title>` + style + `</head><body>
<p><a href="/{{q .Token}}">all studies</a></p>
<h1>{{.P.Study}}</h1><p class="dim">Refreshes every 5 s. Governor: <b id="governor">{{.P.Governor}}</b>. <a href="/study/{{path .P.Study}}{{q .Token}}">report</a></p>
<table id="executions"><thead><tr><th>Execution</th><th>Status</th><th>Trials done</th><th>Rate</th><th>ETA</th><th>Current arm</th><th>Preempted</th><th>Capped</th><th>Failed</th></tr></thead><tbody>
{{range .P.Executions}}<tr data-id="{{.ID}}"><td>{{.ID}}{{if .Parent}} <span class="dim">(rerun of {{.Parent}})</span>{{end}}</td><td>{{.Status}}</td><td>{{.Done}} of {{.Planned}} ({{pct .Done .Planned}})</td><td>{{printf "%.1f" .RatePerMin}}/min</td><td>{{or .ETA "—"}}</td><td>{{or .Current "—"}}</td><td>{{.Preempted}}</td><td>{{index $.P.Capped .ID}}</td><td>{{.Failed}}</td></tr>{{end}}
</tbody></table>
</body></html>`))
