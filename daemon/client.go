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
)

// ErrNoDaemon means nothing answers on the daemon's socket.
var ErrNoDaemon = errors.New("no rig daemon is running")

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
		var ne *net.OpError
		if errors.As(err, &ne) {
			return fmt.Errorf("%w at %s (start it with: rig daemon &)", ErrNoDaemon, c.Socket)
		}
		return err
	}
	defer resp.Body.Close()
	var rep reply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
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
