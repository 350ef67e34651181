package metrics

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// /healthz is served beside /metrics on the one listener, and answers from
// the worker's readiness at each request: 503 with the reasons, then 200
// once it polls again.
func TestHealthzBesideMetrics(t *testing.T) {
	var why atomic.Value
	why.Store("worker w takes no trials: model: sha256 abc is not on this worker")
	ready := func(context.Context) error {
		if s := why.Load().(string); s != "" {
			return errors.New(s)
		}
		return nil
	}
	s := New(Worker, Known{})
	s.Handle("GET /healthz", HealthHandler(ready))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := s.Start(ctx, "127.0.0.1:0", false, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "sha256 abc") {
		t.Errorf("/healthz of a worker failing a check: %d %q", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "rig_trials_in_flight") {
		t.Errorf("/metrics on the same listener: %d, %d bytes", code, len(body))
	}
	why.Store("")
	if code, body := get("/healthz"); code != http.StatusOK || !strings.Contains(body, "polling") {
		t.Errorf("/healthz of a polling worker: %d %q", code, body)
	}
}
