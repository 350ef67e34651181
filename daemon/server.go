package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"rig/daemon/api"
	"rig/internal/jsonerr"
)

// Request types the Service's own callers name, as the protocol defines them.
type (
	NameRequest   = api.NameRequest
	ReportRequest = api.ReportRequest
	ReviewRequest = api.ReviewRequest
)

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
				return nil, fmt.Errorf("%w: %s", ErrBadRequest, jsonerr.Message(err))
			}
		}
		return fn(ctx, req, text)
	}
}

// methods is what the daemon serves, by name (package api's Method
// constants): the union of each resource's table, in its endpoint_*.go file,
// as Nomad's endpoints are split.
func (s *Service) methods() map[string]handler {
	m := map[string]handler{}
	for _, part := range s.resources() {
		maps.Copy(m, part)
	}
	return m
}

// resources is the method table of each resource; no method is in two
// (TestEveryMethodIsServed).
func (s *Service) resources() []map[string]handler {
	return []map[string]handler{s.Studies().methods(), s.Executions().methods(), s.Reports().methods(), s.Proposals().methods(), s.Budget().methods()}
}

// Serve answers the command line on socket until ctx ends. A socket another
// daemon answers on is refused; a stale one is replaced.
func (s *Service) Serve(ctx context.Context, socket string) error {
	if c, err := net.DialTimeout("unix", socket, 300*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("%s: a rig daemon is already running (one per machine; it owns the card)", socket)
	}
	os.Remove(socket)
	l, err := listenSocket(socket, s.Access().Policy().SocketGroup)
	if err != nil {
		return err
	}
	srv := s.httpServer(s.methods())
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

// httpServer serves methods, each request knowing its caller: whoever the
// kernel says is at the other end of the connection.
func (s *Service) httpServer(methods map[string]handler) *http.Server {
	return &http.Server{Handler: s.handler(methods), ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			caller, err := peerCaller(c)
			if err != nil {
				s.Log.Warn("reading a caller's credentials", "err", err)
				return ctx
			}
			return withCaller(ctx, caller)
		}}
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
		var err error
		caller, ok := CallerFrom(r.Context())
		if !ok {
			err = fmt.Errorf("%w: the daemon could not read who is calling (peer credentials)", ErrForbidden)
		} else {
			err = s.Access().Policy().authorize(caller, name)
		}
		var body []byte
		if err == nil {
			body, err = io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
		}
		if err == nil && len(body) > maxRequestBytes {
			err = fmt.Errorf("%w: the request body is over %d MiB (a request carries a design at most; banks and models it names by path)", ErrBadRequest, maxRequestBytes>>20)
		}
		var text bytes.Buffer
		var res any
		if err == nil {
			res, err = s.guarded(r.Context(), name, h, body, &text)
		} else if ok {
			s.Log.Warn("request refused", "method", name, "caller", caller.String(), "err", err)
		}
		rep := api.Reply{Text: text.String()}
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

// guarded runs one request's handler; a panic in it becomes that request's
// ErrInternal reply, with the stack in the log, and the daemon goes on.
func (s *Service) guarded(ctx context.Context, method string, h handler, body json.RawMessage, w io.Writer) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.Log.Error("request panicked", "method", method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("%w while handling %s: %v (the daemon keeps running; its log has the stack)", ErrInternal, method, p)
		}
	}()
	return h(ctx, body, w)
}

// listenSocket makes the daemon's socket. It is created under a umask that
// leaves it 0600, so there is no moment when it is more open; then, for a
// studio group, it and its folder are handed to the group (0660 and 0750).
func listenSocket(socket, group string) (net.Listener, error) {
	dir := filepath.Dir(socket)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	old := syscall.Umask(0o177)
	l, err := net.Listen("unix", socket)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if group == "" {
		if err := os.Chmod(socket, 0o600); err != nil {
			l.Close()
			return nil, err
		}
		return l, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("%w: socket_group %q: %w", ErrPolicy, group, err)
	}
	gid, _ := strconv.Atoi(g.Gid)
	for _, step := range []func() error{
		func() error { return os.Chown(socket, -1, gid) },
		func() error { return os.Chmod(socket, 0o660) },
		func() error { return os.Chown(dir, -1, gid) },
		func() error { return os.Chmod(dir, 0o750) },
	} {
		if err := step(); err != nil {
			l.Close()
			return nil, fmt.Errorf("sharing the socket %s with group %s: %w", socket, group, err)
		}
	}
	return l, nil
}
