package main

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
)

// The daemon serves the CLI over a unix socket (mode 0600) with one small
// JSON-over-HTTP protocol: POST /METHOD with the request as the body; the
// answer is {"result": ..., "text": "..."} or {"error": "..."}.

type daemonReply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Text   string          `json:"text,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// handler is one daemon method: it reads its request, may write text for the
// user, and returns a result to encode.
type handler func(ctx context.Context, req json.RawMessage, text io.Writer) (any, error)

func serveDaemon(ctx context.Context, socket string, methods map[string]handler) error {
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
	mux := http.NewServeMux()
	for name, h := range methods {
		h := h
		mux.HandleFunc("/"+name, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var text bytes.Buffer
			res, err := h(r.Context(), body, &text)
			rep := daemonReply{Text: text.String()}
			if err != nil {
				rep.Error = err.Error()
			} else if res != nil {
				rep.Result, _ = json.Marshal(res)
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(rep)
		})
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
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

// ErrNoDaemon means nothing answers on the daemon's socket.
var ErrNoDaemon = errors.New("no rig daemon is running")

// callDaemon sends one request and decodes the result into out. Text the
// daemon produced for the user is written to text.
func callDaemon(ctx context.Context, socket, method string, req, out any, text io.Writer) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	hreq, err := http.NewRequestWithContext(ctx, "POST", "http://rig/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(hreq)
	if err != nil {
		var ne *net.OpError
		if errors.As(err, &ne) {
			return fmt.Errorf("%w at %s (start it with: rig daemon &)", ErrNoDaemon, socket)
		}
		return err
	}
	defer resp.Body.Close()
	var rep daemonReply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return fmt.Errorf("daemon answered %s: %w", resp.Status, err)
	}
	if rep.Text != "" && text != nil {
		io.WriteString(text, rep.Text)
	}
	if rep.Error != "" {
		return errors.New(rep.Error)
	}
	if out != nil && len(rep.Result) > 0 {
		return json.Unmarshal(rep.Result, out)
	}
	return nil
}
