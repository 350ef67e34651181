package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"rig/api"
)

// fakeClock runs refusalLog's timers when the test says.
type fakeClock struct {
	mu      sync.Mutex
	pending []func()
}

func (c *fakeClock) schedule(_ time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, f)
}

// tick runs the timers due now, as the interval's end would.
func (c *fakeClock) tick() {
	c.mu.Lock()
	due := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

func logLines(l *logBuffer) []string {
	s := strings.TrimSpace(l.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestRefusalLogBoundsItsLines: a flood of refusals from one uid writes its
// first refusal in full and one line per interval with the count of the
// rest; another uid and another kind have their own line; an interval with
// no refusal closes the window, and the next refusal is written in full.
func TestRefusalLogBoundsItsLines(t *testing.T) {
	logs := &logBuffer{}
	clock := &fakeClock{}
	r := newRefusalLog(slog.New(slog.NewTextHandler(logs, nil)), 10*time.Second)
	r.after = clock.schedule

	for range 1532 {
		r.refused(998, refusedConnections, "connection refused", "uid", 998)
	}
	for range 3 {
		r.refused(1001, refusedConnections, "connection refused", "uid", 1001)
	}
	r.refused(998, refusedRequests, "request refused", "uid", 998)
	if got := logLines(logs); len(got) != 3 {
		t.Fatalf("1536 refusals from two uids, two kinds: %d lines, want 3 (one each):\n%s", len(got), logs)
	}

	clock.tick() // the interval ends
	lines := logLines(logs)
	if len(lines) != 5 {
		t.Fatalf("after the interval: %d lines, want 5:\n%s", len(lines), logs)
	}
	for _, want := range []string{"refused 1531 more connections from uid 998 in the last 10s", "refused 2 more connections from uid 1001 in the last 10s"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no line %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs.String(), "more requests") {
		t.Errorf("a summary for a kind with nothing suppressed:\n%s", logs)
	}

	// The flood goes on from uid 998: counted, summed at the next tick.
	for range 40 {
		r.refused(998, refusedConnections, "connection refused", "uid", 998)
	}
	clock.tick()
	if !strings.Contains(logs.String(), "refused 40 more connections from uid 998") || len(logLines(logs)) != 6 {
		t.Fatalf("the second interval:\n%s", logs)
	}
	// Then it stops: one quiet interval closes every window without a line.
	clock.tick()
	if n := len(logLines(logs)); n != 6 {
		t.Fatalf("a quiet interval wrote %d lines, want none:\n%s", n-6, logs)
	}
	if len(clock.pending) != 0 || len(r.counted) != 0 {
		t.Fatalf("windows still open after a quiet interval: %v (%d timers)", r.counted, len(clock.pending))
	}
	r.refused(998, refusedConnections, "connection refused again", "uid", 998)
	if lines := logLines(logs); !strings.Contains(lines[len(lines)-1], "connection refused again") {
		t.Fatalf("a refusal after a quiet interval is not written in full:\n%s", logs)
	}
}

// acceptAll accepts from l until it closes, handing each connection over.
func acceptAll(l net.Listener) <-chan net.Conn {
	ch := make(chan net.Conn, 100)
	go func() {
		defer close(ch)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ch <- c
		}
	}()
	return ch
}

// TestCapListenerRefusesPastTheCap: an account holding its cap of
// connections has the next one answered with the fixed refusal and closed,
// without anything read; closing one of its connections makes room again.
func TestCapListenerRefusesPastTheCap(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "rig.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	const limit = 3
	l := capConnections(inner, func(int) int { return limit }, newRefusalLog(slog.New(slog.NewTextHandler(logs, nil)), time.Hour))
	defer l.Close()
	accepted := acceptAll(l)
	me := os.Geteuid()

	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var held []net.Conn
	for range limit {
		dial()
		select {
		case c := <-accepted:
			held = append(held, c)
		case <-time.After(5 * time.Second):
			t.Fatalf("connection %d of %d (under the cap) was not accepted", len(held)+1, limit)
		}
	}
	if n := l.openBy(me); n != limit {
		t.Fatalf("uid %d holds %d connections by the listener's count, want %d", me, n, limit)
	}
	for i := range 2 {
		over := dial()
		_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
		reply, err := io.ReadAll(over)
		if err != nil {
			t.Fatalf("connection over the cap: %v (want the refusal, then end of file)", err)
		}
		if !strings.HasPrefix(string(reply), "HTTP/1.1 503 ") || !strings.Contains(string(reply), fmt.Sprintf("already holds %d connections", limit)) {
			t.Fatalf("connection over the cap %d answered %q", i+1, reply)
		}
	}
	select {
	case c := <-accepted:
		t.Fatalf("a connection over the cap reached the server: %v", c.LocalAddr())
	default:
	}
	if n := len(logLines(logs)); n != 1 || !strings.Contains(logs.String(), fmt.Sprintf("uid=%d cap=%d", me, limit)) {
		t.Errorf("two refusals wrote %d lines, want 1 naming uid and cap:\n%s", n, logs)
	}

	held[0].Close()
	held[0].Close() // the server may close twice; the place is given back once
	if n := l.openBy(me); n != limit-1 {
		t.Fatalf("after a close uid %d holds %d by the count, want %d", me, n, limit-1)
	}
	dial()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a connection under the cap again was not accepted")
	}
}

// emfileListener fails its first n accepts as a process out of descriptors
// does.
type emfileListener struct {
	net.Listener
	mu sync.Mutex
	n  int
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.n > 0
	l.n--
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestSocketServerOutlivesAcceptErrorsAndKeepsNoConnection: the socket's
// server, behind the cap, goes on after accepts fail with EMFILE (it backs
// off; it neither spins nor stops), and a caller making many calls in a
// row never meets its cap: each connection serves one request and closes.
func TestSocketServerOutlivesAcceptErrorsAndKeepsNoConnection(t *testing.T) {
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	logs := &logBuffer{}
	svc.Log = slog.New(slog.NewTextHandler(logs, nil))
	sock := filepath.Join(t.TempDir(), "rig.sock")
	inner, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	const limit = 4
	refusals := newRefusalLog(svc.Log, time.Hour)
	l := capConnections(&emfileListener{Listener: inner, n: 5}, func(int) int { return limit }, refusals)
	srv := svc.socketServer(svc.methods(), refusals)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer srv.Close()

	c := api.Client{Socket: sock}
	for i := range 5 * limit {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.List(ctx)
		cancel()
		if err != nil {
			t.Fatalf("call %d of %d (cap %d): %v\nlog:\n%s", i+1, 5*limit, limit, err, logs)
		}
	}
	select {
	case err := <-served:
		t.Fatalf("the server stopped: %v", err)
	default:
	}
	if n := strings.Count(logs.String(), "too many open files"); n != 5 {
		t.Errorf("%d accept errors logged, want the 5 injected:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), "refused") {
		t.Errorf("calls one after another met the cap:\n%s", logs)
	}
	// Each reply closed its connection: none is left counted.
	for deadline := time.Now().Add(5 * time.Second); l.openBy(os.Geteuid()) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open after every call returned", l.openBy(os.Geteuid()))
		}
	}
}

// TestALongMethodOutlivesTheSocketTimeouts: a method that runs longer than
// every read timeout of the socket's server (shortened here to 300 ms)
// still answers, its context not cancelled, and its reply is written: the
// read deadline is lifted once the request is read, and the write deadline
// starts when the reply is ready (there is no server WriteTimeout, which
// would count from the request's arrival).
func TestALongMethodOutlivesTheSocketTimeouts(t *testing.T) {
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	const runs = 1500 * time.Millisecond
	m := svc.methods()
	m["slow"] = method(func(ctx context.Context, _ struct{ Pad string }, w io.Writer) (any, error) {
		select {
		case <-time.After(runs):
			io.WriteString(w, strings.Repeat("progress\n", 10_000))
			return "finished", nil
		case <-ctx.Done():
			return nil, fmt.Errorf("cancelled after the socket's timeouts: %w", ctx.Err())
		}
	})
	srv := svc.httpServer(m)
	if srv.WriteTimeout != 0 {
		t.Fatalf("the socket's server has a WriteTimeout (%s): it counts from a request's arrival and would cut off validate and preflight", srv.WriteTimeout)
	}
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	sock := filepath.Join(t.TempDir(), "rig.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	var out string
	text := &logBuffer{}
	if err := (api.Client{Socket: sock}).Call(context.Background(), "slow", struct{ Pad string }{"body"}, &out, text); err != nil || out != "finished" {
		t.Fatalf("a method running %s under 300 ms read timeouts: %q, %v", runs, out, err)
	}
	if n := strings.Count(text.String(), "progress\n"); n != 10_000 {
		t.Errorf("the reply's text came back with %d of 10000 lines", n)
	}
}
