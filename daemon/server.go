package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"rig/studies"
)

// NameRequest names a study, with who asks and why where a method records it.
type NameRequest struct {
	Name   string `json:"name"`
	Actor  string `json:"actor,omitempty"`
	Why    string `json:"why,omitempty"`
	Format string `json:"format,omitempty"`
}

// DryRunRequest is `rig study dry-run`.
type DryRunRequest struct {
	Name   string `json:"name"`
	Speeds string `json:"speeds,omitempty"`
}

// ReportRequest is `rig study report`.
type ReportRequest struct {
	Name string `json:"name"`
	ReportOptions
}

// ReviewRequest is `rig study review`.
type ReviewRequest struct {
	Name   string         `json:"name"`
	Review studies.Review `json:"review"`
	Why    string         `json:"why"`
}

// handler is one daemon method: it reads its request, may write text for the
// user, and returns a result to encode.
type handler func(ctx context.Context, req json.RawMessage, text io.Writer) (any, error)

// method adapts a typed daemon method to a handler: the request is decoded
// into Req first.
func method[Req any](fn func(ctx context.Context, req Req, text io.Writer) (any, error)) handler {
	return func(ctx context.Context, raw json.RawMessage, text io.Writer) (any, error) {
		var req Req
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &req); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
			}
		}
		return fn(ctx, req, text)
	}
}

// methods is what the daemon serves, by name.
func (s *Service) methods() map[string]handler {
	return map[string]handler{
		"register": method(func(ctx context.Context, r RegisterRequest, _ io.Writer) (any, error) {
			return s.Register(ctx, r)
		}),
		"review": method(func(ctx context.Context, r ReviewRequest, _ io.Writer) (any, error) {
			return s.Review(ctx, r.Name, r.Review, r.Why)
		}),
		"approve": method(func(ctx context.Context, r NameRequest, _ io.Writer) (any, error) {
			return s.Approve(ctx, r.Name, r.Actor, r.Why)
		}),
		"freeze": method(func(ctx context.Context, r NameRequest, _ io.Writer) (any, error) {
			return s.Freeze(ctx, r.Name, r.Actor)
		}),
		"preflight": method(func(ctx context.Context, r NameRequest, w io.Writer) (any, error) { return s.Preflight(ctx, r.Name, w) }),
		"validate":  method(func(ctx context.Context, r NameRequest, w io.Writer) (any, error) { return s.Validate(ctx, r.Name, w) }),
		"dry-run": method(func(ctx context.Context, r DryRunRequest, w io.Writer) (any, error) {
			return s.DryRun(ctx, r.Name, r.Speeds, w)
		}),
		"run":    method(func(ctx context.Context, r RunRequest, _ io.Writer) (any, error) { return s.Run(ctx, r) }),
		"cancel": method(func(ctx context.Context, r NameRequest, _ io.Writer) (any, error) { return s.Cancel(ctx, r.Name) }),
		"status": method(func(ctx context.Context, r NameRequest, _ io.Writer) (any, error) { return s.Status(ctx, r.Name) }),
		"grade":  method(func(ctx context.Context, r RegradeRequest, _ io.Writer) (any, error) { return s.Regrade(ctx, r) }),
		"report": method(func(ctx context.Context, r ReportRequest, _ io.Writer) (any, error) {
			return s.Report(ctx, r.Name, r.ReportOptions)
		}),
		"decide": method(func(ctx context.Context, r DecideRequest, _ io.Writer) (any, error) {
			return s.Decide(ctx, r)
		}),
		"check": method(func(ctx context.Context, r NameRequest, _ io.Writer) (any, error) { return s.CheckStore(ctx, r.Name) }),
		"export": method(func(ctx context.Context, r NameRequest, w io.Writer) (any, error) {
			format := r.Format
			if format == "" {
				format = "jsonl"
			}
			return nil, s.Export(ctx, r.Name, format, w)
		}),
		"list": method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) { return s.List() }),
	}
}

// Serve answers the command line on socket until ctx ends. A socket another
// daemon answers on is refused; a stale one is replaced.
func (s *Service) Serve(ctx context.Context, socket string) error {
	if c, err := net.DialTimeout("unix", socket, 300*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("%s: a rig daemon is already running (one per machine; it owns the card)", socket)
	}
	os.Remove(socket)
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		l.Close()
		return err
	}
	srv := &http.Server{Handler: s.handler(s.methods()), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err = srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// maxRequestBytes caps a request body: no method needs more, and a caller
// cannot make the daemon hold more.
const maxRequestBytes = 16 << 20

// handler serves methods; a method it does not know is an ErrNoMethod reply.
func (s *Service) handler(methods map[string]handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[1:]
		h, ok := methods[name]
		if !ok {
			h = func(context.Context, json.RawMessage, io.Writer) (any, error) {
				return nil, fmt.Errorf("%w: %q (the daemon and the command line come from different builds: restart the daemon from this build)", ErrNoMethod, name)
			}
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
		if err == nil && len(body) > maxRequestBytes {
			err = fmt.Errorf("%w: the request body is over %d MiB (a request names files; it never carries them)", ErrBadRequest, maxRequestBytes>>20)
		}
		var text bytes.Buffer
		var res any
		if err == nil {
			res, err = h(r.Context(), body, &text)
		}
		rep := reply{Text: text.String()}
		if err != nil {
			rep.Error, rep.Code = err.Error(), codeOf(err)
		} else if res != nil {
			if rep.Result, err = json.Marshal(res); err != nil {
				rep.Error = "encoding the result: " + err.Error()
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rep)
	})
}
