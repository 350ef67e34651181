package ui

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"rig/api"
	"rig/internal/layout"
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
	// TrySource is the tries view's (tries.go).
	TrySource
}

// Progress is one study's executions with what ExecInfo does not count.
type Progress struct {
	Study      string         `json:"study"`
	Executions []api.ExecInfo `json:"executions"`
	// Capped counts, per execution id, the receipts that hit a cap.
	Capped map[string]int `json:"capped"`
	// Governor is the governor's state: "ready", "held: WHY", or why there
	// is none.
	Governor string `json:"governor"`
}

// Server is a running workspace.
//
// A URL's token opens the workspace once: the first request that carries
// it gets a session cookie (HttpOnly, SameSite=Strict, Path=/) and a
// redirect to the same path without the token, and the token is spent.
// A URL read later from xdg-open's argv or the browser's history opens
// nothing. Every later request is authenticated by the cookie alone.
type Server struct {
	// URL is the first URL to open: http://127.0.0.1:PORT/?token=TOKEN.
	URL  string
	Addr string
	srv  *http.Server
	// cookie is the session cookie's name, per port: cookies are scoped by
	// host, not port, so two workspaces on one host keep theirs apart.
	cookie string

	mu sync.Mutex
	// pending are URL tokens not used yet, with when each was issued;
	// sessions the cookie values that redeemed one.
	pending  map[string]time.Time
	sessions []string
	now      func() time.Time
}

// TokenTTL is how long a URL's token stays usable when nobody opens it.
const TokenTTL = 10 * time.Minute

// Start listens on 127.0.0.1 at a port the kernel picks and serves src
// until ctx ends or Close is called. URL carries the first single-use
// token (32 random bytes); NewURL makes another.
func Start(ctx context.Context, src Source) (*Server, error) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ui: listen on loopback: %w", err)
	}
	s := &Server{Addr: l.Addr().String(), pending: map[string]time.Time{}, now: time.Now}
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cookie = "rig_workspace_" + port
	if s.URL, err = s.NewURL(); err != nil {
		l.Close()
		return nil, err
	}
	s.srv = &http.Server{Handler: s.handler(src), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(l)
	go func() {
		<-ctx.Done()
		s.Close()
	}()
	return s, nil
}

// NewURL is a URL with a fresh single-use token: `rig ui` asked again (the
// first URL spent, or opened in another browser) gets one of these.
func (s *Server) NewURL() (string, error) {
	tok, err := randomHex()
	if err != nil {
		return "", fmt.Errorf("ui: a token: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, at := range s.pending {
		if s.now().Sub(at) > TokenTTL {
			delete(s.pending, t)
		}
	}
	s.pending[tok] = s.now()
	return "http://" + s.Addr + "/?token=" + tok, nil
}

func randomHex() (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(raw[:]), nil
}

// redeem spends a URL token: true, with a new session's cookie value, only
// for a pending token issued less than TokenTTL ago. A token is never
// accepted twice.
func (s *Server) redeem(token string) (session string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, at := range s.pending {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) != 1 {
			continue
		}
		delete(s.pending, t)
		if s.now().Sub(at) > TokenTTL {
			return "", false
		}
		v, err := randomHex()
		if err != nil {
			return "", false
		}
		s.sessions = append(s.sessions, v)
		return v, true
	}
	return "", false
}

// session reports whether r carries a session cookie this server set.
func (s *Server) session(r *http.Request) bool {
	c, err := r.Cookie(s.cookie)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := false
	for _, v := range s.sessions {
		ok = subtle.ConstantTimeCompare([]byte(v), []byte(c.Value)) == 1 || ok
	}
	return ok
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// notFound answers a Source's error: a name that is not a study name
// (layout.ErrInvalidName: "..", an encoded slash) is a bad request, naming
// the rule; anything else is not found.
func notFound(w http.ResponseWriter, prefix string, err error) {
	code := http.StatusNotFound
	if errors.Is(err, layout.ErrInvalidName) {
		code = http.StatusBadRequest
	}
	http.Error(w, prefix+err.Error(), code)
}

// handler refuses, in order: a Host that is not this listener (a page on
// another site resolving its name to 127.0.0.1), any method but GET and
// HEAD, a URL token that is not pending (spent, expired or wrong), and a
// request with neither a token nor this server's session cookie. A pending
// token is traded for the cookie and a redirect to the same path without it.
func (s *Server) handler(src Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { s.index(w, r, src) })
	mux.HandleFunc("GET /study/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := src.Report(r.Context(), r.PathValue("name"), w); err != nil {
			notFound(w, "no report: ", err)
		}
	})
	mux.HandleFunc("GET /api/progress/{name}", func(w http.ResponseWriter, r *http.Request) {
		p, err := src.Progress(r.Context(), r.PathValue("name"))
		if err != nil {
			notFound(w, "", err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p)
	})
	mux.HandleFunc("GET /progress/{name}", func(w http.ResponseWriter, r *http.Request) {
		p, err := src.Progress(r.Context(), r.PathValue("name"))
		if err != nil {
			notFound(w, "", err)
			return
		}
		s.page(w, progressTmpl, map[string]any{"P": p})
	})
	s.tryRoutes(mux, src)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Cache-Control", "no-store")
		q := r.URL.Query()
		switch {
		case r.Host != s.Addr:
			http.Error(w, "forbidden: this workspace answers only to "+s.Addr, http.StatusForbidden)
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			http.Error(w, "the workspace is read-only", http.StatusMethodNotAllowed)
		case q.Has("token"):
			session, ok := s.redeem(q.Get("token"))
			if !ok {
				http.Error(w, "forbidden: this URL's token was used already, has expired or is not this workspace's (each URL rig ui prints opens the workspace once; run rig ui for a new one)", http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			// One leading slash: "//host/..." would send the browser to
			// another site.
			to := "/" + strings.TrimLeft(r.URL.EscapedPath(), "/")
			if len(q) > 0 {
				to += "?" + q.Encode()
			}
			http.Redirect(w, r, to, http.StatusSeeOther)
		case !s.session(r):
			http.Error(w, "forbidden: open a URL rig ui printed (it carries a single-use token; this browser has no session of this workspace)", http.StatusForbidden)
		default:
			w.Header().Set("X-Content-Type-Options", "nosniff")
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
	s.page(w, indexTmpl, map[string]any{"Studies": names})
}

func (s *Server) page(w http.ResponseWriter, t *template.Template, v any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
	t.Execute(w, v)
}

var funcs = template.FuncMap{
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
<h1>rig workspace</h1><p class="dim">Every study on this machine, read-only. This page is served on loopback only, to this browser's session.</p>
<p><a href="/tries">Tries</a> <span class="dim">(rig try: a draft's arms side by side, as a matrix)</span></p>
{{if .Studies}}<table><thead><tr><th>Study</th><th>Report</th><th>Progress</th></tr></thead><tbody>
{{range .Studies}}<tr><td>{{.}}</td><td><a href="/study/{{path .}}">report</a></td><td><a href="/progress/{{path .}}">progress</a></td></tr>{{end}}
</tbody></table>{{else}}<p>No study is registered yet (rig study register DESIGN).</p>{{end}}
</body></html>`))

var progressTmpl = template.Must(template.New("progress").Funcs(funcs).Parse(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5"><title>{{.P.Study}} · progress</title>` + style + `</head><body>
<p><a href="/">all studies</a></p>
<h1>{{.P.Study}}</h1><p class="dim">Refreshes every 5 s. Governor: <b id="governor">{{.P.Governor}}</b>. <a href="/study/{{path .P.Study}}">report</a></p>
<table id="executions"><thead><tr><th>Execution</th><th>Status</th><th>Trials done</th><th>Rate</th><th>ETA</th><th>Current arm</th><th>Preempted</th><th>Capped</th><th>Failed</th></tr></thead><tbody>
{{range .P.Executions}}<tr data-id="{{.ID}}"><td>{{.ID}}{{if .Parent}} <span class="dim">(rerun of {{.Parent}})</span>{{end}}</td><td>{{.Status}}</td><td>{{.Done}} of {{.Planned}} ({{pct .Done .Planned}})</td><td>{{printf "%.1f" .RatePerMin}}/min</td><td>{{or .ETA "—"}}</td><td>{{or .Current "—"}}</td><td>{{.Preempted}}</td><td>{{index $.P.Capped .ID}}</td><td>{{.Failed}}</td></tr>{{end}}
</tbody></table>
</body></html>`))
