package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeReportingServer is a fake OpenAI-compatible server on a unix socket
// (the socket rig reaches a sandboxed server through): its streamed answer
// is one token with its log-probability, and when reports is set it
// answers /props and /slots as llama-server does, saying it used the
// request's sampling except for min_p, which it replaces with ignoredMinP
// when that is not negative (a server that ignores the pin).
func fakeReportingServer(t *testing.T, reports bool, ignoredMinP float64) *OpenAIServer {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var last map[string]any
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		json.NewDecoder(r.Body).Decode(&last)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"delta":{"content":"yes"},"logprobs":{"content":[{"token":"yes","logprob":-0.1,"top_logprobs":[{"token":"yes","logprob":-0.1}]}]}}]}`+"\n\ndata: [DONE]\n\n")
	})
	if reports {
		mux.HandleFunc("GET /props", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"total_slots":1,"default_generation_settings":{"n_ctx":1024}}`)
		})
		mux.HandleFunc("GET /slots", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			p := map[string]any{"temperature": last["temperature"], "top_k": last["top_k"], "top_p": last["top_p"],
				"min_p": last["min_p"], "seed": last["seed"], "n_predict": last["max_tokens"], "max_tokens": last["max_tokens"]}
			if ignoredMinP >= 0 {
				p["min_p"] = ignoredMinP
			}
			// An idle slot that ran an earlier task, and the one that ran the probe.
			json.NewEncoder(w).Encode([]any{
				map[string]any{"id": 0, "n_ctx": 1024, "id_task": 1, "params": map[string]any{"min_p": 0.5}},
				map[string]any{"id": 1, "n_ctx": 1024, "id_task": 7, "params": p},
			})
		})
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &OpenAIServer{spec: ServerSpec{Command: []string{"/fake/server", "{port}"}}, cfg: Config{Context: 1024},
		http: socketClient(sock), model: "fake"}
}

var capsWant = RequestPins{Sampling: Sampling{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0, Seed: 42}, StopCap: 256}

func TestCapsHeldWhereTheServerReportsThem(t *testing.T) {
	s := fakeReportingServer(t, true, -1)
	checks, err := s.checkCaps(context.Background(), capsWant)
	if err != nil {
		t.Fatal(err)
	}
	got := CapsSummary(checks)
	for _, want := range []string{"context 1024 held (/props)", "slots 1 held (/props)", "temperature 0.7 held (/slots)",
		"top_k 40 held (/slots)", "top_p 0.9 held (/slots)", "min_p 0 held (/slots)", "seed 42 held (/slots)", "stop_cap 256 held (/slots)"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
}

func TestCapsIgnoredPinIsRefusedNamingIt(t *testing.T) {
	s := fakeReportingServer(t, true, 0.05)
	_, err := s.checkCaps(context.Background(), capsWant)
	if !errors.Is(err, ErrPinNotHeld) || !strings.Contains(err.Error(), "pin min_p is 0, and the server reports 0.05 (/slots)") {
		t.Fatalf("a server that ignores min_p: %v", err)
	}
}

func TestCapsNotReportedAreRecordedNotRefused(t *testing.T) {
	s := fakeReportingServer(t, false, -1)
	checks, err := s.checkCaps(context.Background(), capsWant)
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 8 {
		t.Fatalf("%d checks: %v", len(checks), checks)
	}
	for _, c := range checks {
		if c.Reported != "" || !strings.HasSuffix(c.String(), " not reported") {
			t.Errorf("%s: a server that reports nothing reported %q", c.Pin, c.String())
		}
	}
}

// TestCapChecksContextAndSlots holds a slot's context and the slot count
// as rig's own llama-server is held: at least the pin, the context capped
// at the model's trained length.
func TestCapChecksContextAndSlots(t *testing.T) {
	for _, c := range []struct {
		name               string
		ctx, slots         int
		trained            int
		slotCtx, reportedN int
		held               bool
		pin                string
	}{
		{"exact", 4096, 2, 0, 4096, 2, true, ""},
		{"divided among slots", 4096, 2, 0, 2048, 2, false, "context"},
		{"capped at trained", 8192, 1, 2048, 2048, 1, true, ""},
		{"fewer slots", 1024, 4, 0, 1024, 1, false, "slots"},
		{"more slots than pinned", 1024, 1, 0, 1024, 4, true, ""},
	} {
		checks := capChecks(Config{Context: c.ctx, Slots: c.slots}, c.trained, RequestPins{}, serverReport{
			slotContext: c.slotCtx, slotContextFrom: "/props", slots: c.reportedN, slotsFrom: "/props"})
		var broken string
		for _, k := range checks[:2] {
			if !k.Held() {
				broken = k.Pin
			}
		}
		if (broken == "") != c.held || broken != c.pin {
			t.Errorf("%s: broken pin %q, want held=%v %q (%s)", c.name, broken, c.held, c.pin, CapsSummary(checks[:2]))
		}
	}
}

// TestCapHeldAtTheServersPrecision: a sampling value the server keeps as
// float32 is the value sent; a seed is compared whole, to the last digit.
func TestCapHeldAtTheServersPrecision(t *testing.T) {
	for _, c := range []struct {
		sent, reported float64
		held           bool
	}{
		{0.8, float64(float32(0.8)), true},
		{0.8, 0.81, false},
		{4294967294, 4294967294, true},
		{4294967294, 4294967295, false},
	} {
		k := CapCheck{Pin: "p", Sent: formatCap(c.sent), Reported: formatCap(c.reported)}
		if k.Held() != c.held {
			t.Errorf("sent %v, reported %v: held %v, want %v (%s)", c.sent, c.reported, k.Held(), c.held, k)
		}
	}
}
