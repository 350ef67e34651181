package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
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
