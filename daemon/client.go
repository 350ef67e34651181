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
	"syscall"
)

// ErrNoDaemon means nothing answers on the daemon's socket.
var ErrNoDaemon = errors.New("no rig daemon is running")

// ErrDaemonStopped means the daemon took the request and then went away
// without answering: it died, was killed or was stopped mid-request. It is
// the client's own verdict, so it never crosses the socket (no wire code).
var ErrDaemonStopped = errors.New("the rig daemon stopped")

// Client calls a daemon over its unix socket.
type Client struct {
	Socket string
}

// Call sends one request and decodes the result into out. Text the daemon
// produced for the user is written to text (nil drops it). An error the
// daemon returned keeps its class: errors.Is matches it against the same
// sentinel the daemon saw (see RemoteError).
func (c Client) Call(ctx context.Context, method string, req, out any, text io.Writer) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", c.Socket)
	}}}
	hreq, err := http.NewRequestWithContext(ctx, "POST", "http://rig/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		var ne *net.OpError
		if errors.As(err, &ne) && ne.Op == "dial" {
			if errors.Is(err, syscall.EACCES) {
				return fmt.Errorf("cannot connect to the daemon at %s: permission denied (its socket is open only to the daemon's user, or to the studio group its policy names: ask to be added, see docs/security.md)", c.Socket)
			}
			return fmt.Errorf("%w at %s (start it with: rig daemon &)", ErrNoDaemon, c.Socket)
		}
		if droppedConn(err) {
			return c.stopped(method, err)
		}
		return err
	}
	defer resp.Body.Close()
	var rep reply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		if ctx.Err() == nil && droppedConn(err) {
			return c.stopped(method, err)
		}
		return fmt.Errorf("daemon answered %s: %w", resp.Status, err)
	}
	if rep.Text != "" && text != nil {
		io.WriteString(text, rep.Text)
	}
	if rep.Error != "" {
		return remoteError(rep.Error, rep.Code)
	}
	if out != nil && len(rep.Result) > 0 {
		return json.Unmarshal(rep.Result, out)
	}
	return nil
}

// droppedConn tells a connection the daemon closed or lost mid-request from
// other failures: the request reached it (the dial worked) and no whole
// answer came back.
func droppedConn(err error) bool {
	var ne *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) && (ne.Op == "read" || ne.Op == "write")
}

// stopped says that the daemon went away while it handled method, where its
// log is, and how to start it again, instead of the transport's
// `Post "http://rig/…": EOF`. The transport error stays in the chain.
func (c Client) stopped(method string, cause error) error {
	return &stoppedError{
		msg: fmt.Sprintf("%v while handling %s (socket %s); its log is wherever it was started: the terminal, or journalctl -u rig-daemon under systemd; start it again with: rig daemon &",
			ErrDaemonStopped, method, c.Socket),
		cause: cause,
	}
}

type stoppedError struct {
	msg   string
	cause error
}

func (e *stoppedError) Error() string   { return e.msg }
func (e *stoppedError) Unwrap() []error { return []error{ErrDaemonStopped, e.cause} }
