package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"rig/api"
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
	return []map[string]handler{s.Studies().methods(), s.Executions().methods(), s.Reports().methods(), s.Proposals().methods(), s.Budget().methods(), s.Tries().methods()}
}

// Serve answers the command line on socket until ctx ends. A socket another
// daemon answers on is refused; a stale one is replaced. Each account may
// hold a bounded number of connections (capListener), and refusals reach
// the log at a bounded rate (refusalLog).
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
	refusals := newRefusalLog(s.Log, refusalLogEvery)
	srv := s.socketServer(s.methods(), refusals)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	err = srv.Serve(capConnections(l, connCapFor, refusals))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// The socket's limits. Issue 43: a member of the socket group who held no
// role kept 19,990 idle connections open (the server had no idle timeout
// and no cap), the daemon's descriptor limit; the governor could not write
// its heartbeat, a staff caller's list timed out, and every refused request
// wrote a log line.
const (
	// socketHeaderTimeout is how long a connection may take, from accept or
	// from the end of its last reply, to send a request's headers. The
	// command line writes them at once.
	socketHeaderTimeout = 10 * time.Second
	// socketReadTimeout bounds reading a whole request, body included: 16
	// MiB at most (maxRequestBytes), which a local socket moves in well under
	// a second; the rest is room for a loaded machine. net/http lifts this
	// read deadline once the body is read, so it never cuts off a method
	// that runs long.
	socketReadTimeout = 30 * time.Second
	// socketIdleTimeout bounds a connection kept open between requests.
	// Keep-alives are off (socketServer), so no connection waits there
	// today; the bound stays so that turning them on cannot bring back an
	// idle connection held for ever.
	socketIdleTimeout = 5 * time.Second
	// replyWriteTimeout bounds writing one reply, counted from when the
	// method has returned. It is not the server's WriteTimeout: that counts
	// from the request's arrival, and a reply is written only once its
	// method returns (text included), which for validate, preflight, grade
	// or engine-replay is minutes of trials later.
	replyWriteTimeout = 30 * time.Second

	// connCap is how many connections one account (peer uid) may hold open
	// at once. One command line call holds one; 64 covers a person's
	// parallel commands and scripts with room, and 64 per member keeps a
	// studio group of a few hundred accounts inside a 20,000 descriptor
	// limit (each connection costs the daemon one descriptor).
	connCap = 64
	// connCapOwner is the cap of root and of the daemon's own account. They
	// are not the threat (they can stop or read the daemon anyway:
	// docs/security.md, What the socket does not protect against), and in
	// single-user mode every call is theirs, so the cap is larger; it is
	// still a cap, so that a runaway script of theirs cannot take the
	// descriptors the governor and the stores need.
	connCapOwner = 1024
	// refusalLogEvery is the interval at which refusals from one account
	// are summed into one log line.
	refusalLogEvery = 10 * time.Second
)

// connCapFor is the connection cap of uid.
func connCapFor(uid int) int {
	if uid == 0 || uid == os.Geteuid() {
		return connCapOwner
	}
	return connCap
}

// httpServer serves methods, each request knowing its caller: whoever the
// kernel says is at the other end of the connection. It is socketServer
// with a refusal log of its own, for tests that serve on a listener of
// their own.
func (s *Service) httpServer(methods map[string]handler) *http.Server {
	return s.socketServer(methods, newRefusalLog(s.Log, refusalLogEvery))
}

// socketServer serves methods on the socket with its timeouts; refusals go
// to refusals.
func (s *Service) socketServer(methods map[string]handler, refusals *refusalLog) *http.Server {
	srv := &http.Server{Handler: s.handler(methods, refusals),
		ReadHeaderTimeout: socketHeaderTimeout, ReadTimeout: socketReadTimeout, IdleTimeout: socketIdleTimeout,
		// No WriteTimeout: see replyWriteTimeout, set by the handler.
		// net/http's own complaints (an accept failing with EMFILE, which it
		// retries after 5 ms doubling to 1 s) go to the daemon's log.
		ErrorLog: slog.NewLogLogger(s.Log.Handler(), slog.LevelWarn),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			caller, err := connCaller(c)
			if err != nil {
				refusals.refused(unknownUID, refusedConnections, "reading a caller's credentials", "err", err)
				return ctx
			}
			return withCaller(ctx, caller)
		}}
	// One request per connection: the command line's client makes a new
	// connection for every call and never reuses one, so a kept-alive
	// connection would only sit idle (one descriptor each, counted against
	// the caller's cap) until the client process exits; a `rig study
	// status --follow` polling every 2 s would reach the cap in two minutes.
	srv.SetKeepAlivesEnabled(false)
	return srv
}

// connCaller is who is at the other end of c: the credentials capListener
// read at accept, or read now for a connection from another listener.
func connCaller(c net.Conn) (Caller, error) {
	if cc, ok := c.(*cappedConn); ok {
		if cc.credErr != nil {
			return Caller{}, cc.credErr
		}
		return resolveCaller(cc.uid, cc.gid), nil
	}
	return peerCaller(c)
}

// maxRequestBytes caps a request body: no method needs more, and a caller
// cannot make the daemon hold more.
const maxRequestBytes = 16 << 20

// handler serves methods; a method it does not know is an ErrNoMethod reply.
// A request refused before its method runs goes to refusals.
func (s *Service) handler(methods map[string]handler, refusals *refusalLog) http.Handler {
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
			refusals.refused(caller.UID, refusedRequests, "request refused", "method", name, "caller", caller.String(), "err", err)
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
		// The reply's write deadline starts now that it is ready (see
		// replyWriteTimeout): a caller that stops reading lets go of its
		// connection after it, however long the method ran.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(replyWriteTimeout))
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

// capListener accepts the socket's connections and holds each account
// (peer uid, read at accept) to its cap of open connections: one past it is
// answered with a fixed refusal and closed at once, before anything is read
// from it, so a refused connection costs the daemon one accept, one small
// write and one close. Refusals go to refusals.
type capListener struct {
	net.Listener
	limit    func(uid int) int
	refusals *refusalLog
	// reply is the fixed refusal: an HTTP reply in the daemon's envelope
	// (api.Reply), so the command line shows its error rather than "the
	// daemon stopped" when it reads it before the close.
	reply func(uid int) []byte

	mu   sync.Mutex
	open map[int]int // open connections per uid
}

// capConnections caps the connections each uid may hold on l at limit(uid).
func capConnections(l net.Listener, limit func(uid int) int, refusals *refusalLog) *capListener {
	return &capListener{Listener: l, limit: limit, refusals: refusals, open: map[int]int{}, reply: refusalReply(limit)}
}

// unknownUID counts the connections whose credentials could not be read,
// as one account: they are refused at every request (handler), and share
// one cap.
const unknownUID = -1

// Kinds of refusal, as refusalLog sums them.
const (
	refusedConnections = "connections"
	refusedRequests    = "requests"
)

// Accept returns the next connection whose account is under its cap.
// Connections over it are refused here, in a loop, and never reach the
// server. An error from the listener (EMFILE when the process is out of
// descriptors) goes back to http.Server.Serve, which retries after 5 ms
// doubling to 1 s on a temporary one (EMFILE, ENFILE, ECONNABORTED): no
// spin, and the server does not stop; a closed listener ends Serve.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			// Not from listenSocket: nothing to read who is calling from.
			c.Close()
			l.refusals.refused(unknownUID, refusedConnections, "connection refused: not a unix socket connection", "type", fmt.Sprintf("%T", c))
			continue
		}
		cc := &cappedConn{UnixConn: uc, uid: unknownUID, gid: -1, l: l}
		cc.uid, cc.gid, cc.credErr = peerIDs(uc)
		if cc.credErr != nil {
			cc.uid = unknownUID
		}
		if !l.take(cc.uid) {
			l.refuse(uc, cc.uid)
			continue
		}
		return cc, nil
	}
}

// take counts one more connection of uid, unless uid is at its cap.
func (l *capListener) take(uid int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[uid] >= l.limit(uid) {
		return false
	}
	l.open[uid]++
	return true
}

// release counts one connection of uid closed.
func (l *capListener) release(uid int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[uid]--; l.open[uid] <= 0 {
		delete(l.open, uid)
	}
}

// openBy is how many connections uid holds (for tests).
func (l *capListener) openBy(uid int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[uid]
}

// refuse answers c with the fixed refusal and closes it. The write cannot
// block the accept loop: a fresh connection's buffer takes the few hundred
// bytes whole, and the deadline covers the impossible case.
func (l *capListener) refuse(c *net.UnixConn, uid int) {
	_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
	_, _ = c.Write(l.reply(uid))
	c.Close()
	l.refusals.refused(uid, refusedConnections, "connection refused: the account holds as many connections as it may",
		"uid", uid, "cap", l.limit(uid))
}

// refusalReply is the fixed reply to a connection over its account's cap,
// built once per cap value.
func refusalReply(limit func(uid int) int) func(uid int) []byte {
	var mu sync.Mutex
	built := map[int][]byte{}
	return func(uid int) []byte {
		n := limit(uid)
		mu.Lock()
		defer mu.Unlock()
		if b, ok := built[n]; ok {
			return b
		}
		body, _ := json.Marshal(api.Reply{Error: fmt.Sprintf("the daemon refused this connection: your account already holds %d connections to it, "+
			"the most one account may hold (so that no account can take the daemon's descriptors from the others); "+
			"close some (a rig command or script of yours may be stuck) and try again", n)})
		b := fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		built[n] = b
		return b
	}
}

// cappedConn is an accepted connection counted against its account's cap
// until it closes, with the credentials read at accept.
type cappedConn struct {
	*net.UnixConn
	uid, gid int
	credErr  error
	l        *capListener
	once     sync.Once
}

// Close releases the connection's place under its account's cap, once
// however often the server closes it.
func (c *cappedConn) Close() error {
	c.once.Do(func() { c.l.release(c.uid) })
	return c.UnixConn.Close()
}

// peerIDs reads the uid and gid of the connection's peer (SO_PEERCRED,
// which the kernel fills in and the peer cannot forge).
func peerIDs(uc *net.UnixConn) (uid, gid int, err error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if credErr != nil {
		return 0, 0, fmt.Errorf("reading the peer's credentials: %w", credErr)
	}
	return int(cred.Uid), int(cred.Gid), nil
}

// refusalLog writes refusals (connections over an account's cap, requests
// refused before their method runs) to the daemon's log at a bounded rate.
// The first refusal of a kind from a uid is written in full, with its
// reason; the ones after it within refusalLogEvery are counted, and at the
// end of the interval one line gives their number ("refused 1532 more
// connections from uid 998 in the last 10s"), for as long as they go on.
// One line per refusal let any member of the socket group write the log as
// fast as they could connect.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration
	// after runs f after d: time.AfterFunc, or a test's clock.
	after func(d time.Duration, f func())

	mu sync.Mutex
	// counted holds, for each uid and kind with a window open, the
	// refusals not written since the window opened.
	counted map[refusalKey]int
}

type refusalKey struct {
	uid  int
	kind string // refusedConnections, refusedRequests
}

func newRefusalLog(log *slog.Logger, every time.Duration) *refusalLog {
	return &refusalLog{log: log, every: every, counted: map[refusalKey]int{},
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// refused records one refusal of kind from uid. With no window open for
// them it writes msg and args as a warning and opens one; else it counts.
func (r *refusalLog) refused(uid int, kind, msg string, args ...any) {
	k := refusalKey{uid, kind}
	r.mu.Lock()
	if _, open := r.counted[k]; open {
		r.counted[k]++
		r.mu.Unlock()
		return
	}
	r.counted[k] = 0
	r.mu.Unlock()
	r.log.Warn(msg, args...)
	r.after(r.every, func() { r.closeWindow(k) })
}

// closeWindow ends k's window. The refusals it counted are written in one
// line and a new window opens for the next interval; a window that counted
// none closes, so that the next refusal is written in full again.
func (r *refusalLog) closeWindow(k refusalKey) {
	r.mu.Lock()
	n := r.counted[k]
	if n == 0 {
		delete(r.counted, k)
		r.mu.Unlock()
		return
	}
	r.counted[k] = 0
	r.mu.Unlock()
	from := fmt.Sprintf("uid %d", k.uid)
	if k.uid == unknownUID {
		from = "callers whose credentials could not be read"
	}
	r.log.Warn(fmt.Sprintf("refused %d more %s from %s in the last %s", n, k.kind, from, r.every),
		"uid", k.uid, "refused", n)
	r.after(r.every, func() { r.closeWindow(k) })
}
