package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"rig/api"
	"rig/internal/textcheck"
	"rig/run"
	"rig/studies"
)

// serveOn serves methods as the daemon does on a fresh unix socket and
// returns a client for it.
func serveOn(t *testing.T, svc *Service, methods map[string]handler) api.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "rig.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := svc.httpServer(methods)
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return api.Client{Socket: sock}
}

// Errors keep their class across the socket: the client side matches each
// with errors.Is against the sentinel the daemon's error wrapped (or, for a
// sentinel of a package the client does not link, such as run.ErrGate or
// studies.ErrStaleAsset, the api package's sentinel of the same code), and
// keeps the daemon's message.
func TestErrorsKeepTheirClassAcrossTheSocket(t *testing.T) {
	svc, err := NewService(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	methods := svc.methods()
	// The stale asset and the refused gate are the errors Freeze and Run
	// return, made here without a provisioned model behind them.
	methods["stale"] = method(func(context.Context, struct{}, io.Writer) (any, error) {
		return nil, fmt.Errorf("freezing: %w", &studies.StaleAssetError{Asset: "model:/m.gguf", Want: "aaaa", Got: "bbbb"})
	})
	methods["gate"] = method(func(context.Context, struct{}, io.Writer) (any, error) {
		return nil, fmt.Errorf("%w: no preflight verdict for arm a (run: rig study preflight s)", run.ErrGate)
	})
	methods["utf8"] = method(func(context.Context, struct{}, io.Writer) (any, error) {
		return nil, fmt.Errorf("loading the bank: %w", textcheck.UTF8("bank.jsonl", []byte("{}\n\xff\n")))
	})
	c := serveOn(t, svc, methods)
	ctx := context.Background()

	tests := []struct {
		method string
		req    any
		want   error
		text   string
	}{
		{"status", NameRequest{Name: "nosuch"}, ErrNoStudy, `study "nosuch"`},
		{"stale", struct{}{}, api.ErrStaleAsset, "model:/m.gguf"},
		{"gate", struct{}{}, api.ErrGate, "rig study preflight s"},
		{"no-such-method", struct{}{}, ErrNoMethod, "restart the daemon"},
		{"utf8", struct{}{}, textcheck.ErrInvalidUTF8, "bank.jsonl:2"},
	}
	for _, tt := range tests {
		err := c.Call(ctx, tt.method, tt.req, nil, nil)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: errors.Is(%v, %v) is false on the client side", tt.method, err, tt.want)
		}
		if err == nil || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: message %q lost %q", tt.method, err, tt.text)
		}
		for _, other := range []error{ErrNoStudy, api.ErrStaleAsset, api.ErrGate} {
			if other != tt.want && errors.Is(err, other) {
				t.Errorf("%s: %v also matches %v", tt.method, err, other)
			}
		}
	}
	// A body over the cap is refused as a bad request, not truncated and decoded.
	big := json.RawMessage(`"` + strings.Repeat("x", maxRequestBytes) + `"`)
	if err := c.Call(ctx, "status", big, nil, nil); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "MiB") {
		t.Errorf("oversized body: %v, want ErrBadRequest naming the cap", err)
	}
	// A malformed body is a bad request, not a crash.
	err = c.Call(ctx, "status", json.RawMessage(`{"name": 7}`), nil, nil)
	if !errors.Is(err, ErrBadRequest) {
		t.Errorf("malformed body: %v, want ErrBadRequest", err)
	}
}

// Every code names one sentinel: a code used twice would make the client
// match the wrong error.
func TestErrorCodesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range errorCodes {
		if seen[c.code] || c.code == "" || c.err == nil {
			t.Errorf("code %q is empty, repeated or has no sentinel", c.code)
		}
		seen[c.code] = true
	}
}
