package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// dyingDaemon listens on a unix socket, reads each request whole and then
// does what die says instead of answering.
func dyingDaemon(t *testing.T, die func(net.Conn)) Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "rig.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			req, err := http.ReadRequest(bufio.NewReader(conn))
			if err == nil {
				io.Copy(io.Discard, req.Body)
			}
			die(conn)
			conn.Close()
		}
	}()
	return Client{Socket: sock}
}

// A daemon that dies mid-request is reported as stopped, with the method, the
// socket and where its log is, not as `Post "http://rig/…": EOF`.
func TestCallDaemonStoppedMidRequest(t *testing.T) {
	for name, die := range map[string]func(net.Conn){
		"closed before answering": func(net.Conn) {},
		"closed inside the answer": func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"result\":")
		},
		"closed inside the headers": func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\n") },
	} {
		t.Run(name, func(t *testing.T) {
			c := dyingDaemon(t, die)
			err := c.Call(context.Background(), "study-run", struct{}{}, nil, nil)
			if !errors.Is(err, ErrDaemonStopped) || errors.Is(err, ErrNoDaemon) {
				t.Fatalf("err = %v, want ErrDaemonStopped", err)
			}
			for _, want := range []string{"study-run", c.Socket, "journalctl -u rig-daemon", "rig daemon &"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), `Post "http://rig/`) {
				t.Errorf("%q is the transport's message", err)
			}
		})
	}
}

// Nothing listening is ErrNoDaemon, not a daemon that stopped: no socket
// file, and a socket file left behind by a daemon that is gone.
func TestCallNoDaemon(t *testing.T) {
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	for _, sock := range []string{filepath.Join(t.TempDir(), "none.sock"), stale} {
		err := Client{Socket: sock}.Call(context.Background(), "status", struct{}{}, nil, nil)
		if !errors.Is(err, ErrNoDaemon) || errors.Is(err, ErrDaemonStopped) {
			t.Errorf("%s: err = %v, want ErrNoDaemon", sock, err)
		}
	}
}

// connCounter serves a fixed answer on a unix socket and counts the
// connections open on the server's side, and the most at once.
type connCounter struct {
	mu         sync.Mutex
	open, peak int
	total      int
}

func (cc *connCounter) state(_ net.Conn, s http.ConnState) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	switch s {
	case http.StateNew:
		cc.open++
		cc.total++
		cc.peak = max(cc.peak, cc.open)
	case http.StateClosed, http.StateHijacked:
		cc.open--
	}
}

func (cc *connCounter) counts() (open, peak, total int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.open, cc.peak, cc.total
}

func countingDaemon(t *testing.T, keepAlives bool) (string, *connCounter) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "rig.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	cc := &connCounter{}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, `{"result":{"name":"s","state":"frozen"}}`)
		}),
		ConnState: cc.state,
	}
	srv.SetKeepAlivesEnabled(keepAlives)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock, cc
}

// One Client polled as `rig study run` follows an execution (a status call
// every 2 s, for hours) holds no connection between calls: each is closed
// once its answer is read, against the daemon, which closes it too, and
// against a server that would keep it alive. Left open, they would count
// against the daemon's per-uid cap on open connections.
func TestClientKeepsNoConnection(t *testing.T) {
	const calls = 200
	for _, keepAlives := range []bool{false, true} {
		t.Run(fmt.Sprintf("server keep-alives %v", keepAlives), func(t *testing.T) {
			sock, cc := countingDaemon(t, keepAlives)
			c := NewClient(sock)
			for i := range calls {
				info, err := c.Status(context.Background(), NameRequest{Name: "s"})
				if err != nil || info.State != Frozen {
					t.Fatalf("call %d: %+v, %v", i, info, err)
				}
			}
			// The server sees a close a moment after the client makes it.
			deadline := time.Now().Add(5 * time.Second)
			open, peak, total := cc.counts()
			for open > 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
				open, peak, total = cc.counts()
			}
			if open != 0 {
				t.Errorf("%d connections still open after %d calls", open, calls)
			}
			if peak > 4 {
				t.Errorf("%d connections open at once for calls made one after another", peak)
			}
			if total != calls {
				t.Errorf("%d connections for %d calls", total, calls)
			}
		})
	}
}

// A Client written as a literal makes a transport per call and leaves no
// connection behind either.
func TestLiteralClientKeepsNoConnection(t *testing.T) {
	sock, cc := countingDaemon(t, true)
	c := Client{Socket: sock}
	for i := range 50 {
		if _, err := c.Status(context.Background(), NameRequest{Name: "s"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	open, _, _ := cc.counts()
	for open > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		open, _, _ = cc.counts()
	}
	if open != 0 {
		t.Errorf("%d connections still open after 50 calls", open)
	}
}
