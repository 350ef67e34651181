package runtimes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
)

func TestReadCappedAtAndPastTheCap(t *testing.T) {
	const limit = 1000
	for _, tc := range []struct {
		name      string
		n         int
		said      int64
		wantError bool
	}{
		{"empty", 0, -1, false},
		{"under, no length said", 999, -1, false},
		{"at the cap, no length said", 1000, -1, false},
		{"at the cap, its length said", 1000, 1000, false},
		{"one past, no length said", 1001, -1, true},
		{"one past, said smaller", 1001, 10, true},
		{"far past, said larger", 5000, 1 << 40, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// iotest-like: a reader that gives one byte at a time finds
			// every edge of the buffer's growth.
			for _, r := range []io.Reader{bytes.NewReader(bytes.Repeat([]byte("x"), tc.n)), oneByte{bytes.NewReader(bytes.Repeat([]byte("x"), tc.n))}} {
				b, err := readCapped(r, tc.said, limit, "testCap", "the fake's answer")
				if tc.wantError {
					if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "the fake's answer") || !strings.Contains(err.Error(), "testCap") || !strings.Contains(err.Error(), "1000 bytes") {
						t.Fatalf("err = %v; want ErrTooLarge naming what, the cap and its size", err)
					}
					if len(b) != limit {
						t.Errorf("past the cap it gave %d bytes; want the first %d", len(b), limit)
					}
					continue
				}
				if err != nil || len(b) != tc.n {
					t.Fatalf("read %d bytes, %v; want %d", len(b), err, tc.n)
				}
			}
		})
	}
	// An error from below that is already a cap's is named anew.
	b, err := readCapped(io.MultiReader(strings.NewReader("ab"), errReader{tooLarge("x", 1, "bytes", "other")}), -1, limit, "testCap", "the fake's answer")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "the fake's answer") || string(b) != "ab" {
		t.Errorf("%q, %v", b, err)
	}
}

type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestCheckJSONShapeCountsOutsideStrings(t *testing.T) {
	caps := jsonCaps{objects: 2, values: 4, objectsName: "objCap", valuesName: "valCap"}
	for _, tc := range []struct {
		text string
		want string // "" for no error, else the cap named
	}{
		{`{"a":[1,2]}`, ""},                         // 1 object; values: top, [, one comma
		{`{"a":"{{{,,,[[[\"}}}"}`, ""},              // inside a string, escapes and all
		{`{"a":{},"b":{}}`, "objCap"},               // 3 objects
		{`[1,2,3,4]`, "valCap"},                     // 5 values
		{`"\\",[1,2,3]`, "valCap"},                  // an escaped backslash ends its string
		{strings.Repeat("{},", 10), "objCap"},       // malformed counts the same
		{`{"messages":[{"role":"user"}]}`, ""},      // 2 objects, 3 values
		{`{"content":"a, b, c, d, e, f, g"}`, ""},   // commas in text are text
		{`{"x":"\u0022,,,,,,,,"}`, ""},              // \u0022 is a quote, but escaped
		{`{"x":"a\\"},[1,2,3,4,5]`, "valCap"},       // the string ends after \\
		{`{"x":"a\\\"b,,,,,,"}`, ""},                // \\ then \" stays in the string
		{`{"x":"a"},{"y":"b"},{"z":"c"}`, "objCap"}, // 3 objects
	} {
		err := checkJSONShape([]byte(tc.text), caps, "the fake's JSON")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.text, err)
		case tc.want != "" && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want a refusal naming %s", tc.text, err, tc.want)
		}
	}
}

func TestProxyRefusesARequestOfTooManyValues(t *testing.T) {
	arm := &fakeArm{}
	p, call := proxyClient(t, arm, AiderCaps{Turns: 5})
	// Small in bytes, but each "{}" would decode into a message struct.
	body := `{"messages":[` + strings.Repeat(`{},`, maxProxyRequestValues) + `{"role":"user","content":"x"}]}`
	status, out := call("POST", "/v1/chat/completions", body)
	msg := fmt.Sprint(out["error"])
	if status != http.StatusBadRequest || !strings.Contains(msg, "maxProxyRequestValues") {
		t.Fatalf("HTTP %d %v; want 400 naming maxProxyRequestValues", status, out)
	}
	if len(arm.got) != 0 {
		t.Errorf("the arm got the refused request")
	}
	if f := p.failed(); len(f) != 1 || !strings.Contains(f[0], "call 1:") || !strings.Contains(f[0], "maxProxyRequestValues") {
		t.Errorf("call errors %q; want the refusal kept for the trial", f)
	}
	if status, _ := call("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"fix it"}],"tools":[]}`); status != 200 {
		t.Errorf("a normal call after the refusal (with an empty tools list): HTTP %d", status)
	}
	if status, out := call("POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`); status != 400 || !strings.Contains(fmt.Sprint(out), "tool calls") {
		t.Errorf("a call with tools: HTTP %d %v; want 400", status, out)
	}
}

func TestProxyKeepsAtMostMaxFailures(t *testing.T) {
	p, call := proxyClient(t, &fakeArm{}, AiderCaps{})
	big := `{"messages":[` + strings.Repeat(`{},`, maxProxyRequestValues) + `{}]}`
	for range maxProxyFailures + 5 {
		if status, _ := call("POST", "/v1/chat/completions", big); status != http.StatusBadRequest {
			t.Fatalf("HTTP %d", status)
		}
	}
	f := p.failed()
	if len(f) != maxProxyFailures+1 || !strings.Contains(f[len(f)-1], "and 5 more") {
		t.Errorf("%d call errors kept, the last %q; want %d and a count of the rest", len(f), f[len(f)-1], maxProxyFailures)
	}
}

// TestLlamaServerAnswerSaidTooLongIsNotRead: an answer whose length is said
// past the cap is refused before any of it is read.
func TestLlamaServerAnswerSaidTooLongIsNotRead(t *testing.T) {
	arm := fakeLlamaServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", fmt.Sprint(int64(1)<<40))
		w.Write([]byte(`{"content":"`))
	})
	_, err := arm.Generate(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 4})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "/completion") || !strings.Contains(err.Error(), "1099511627776") {
		t.Fatalf("err = %v; want a refusal naming /completion and the length it said", err)
	}
}

// TestLlamaServerAnswerOfTooManyObjects: an answer under the byte cap that
// would decode into far more than its size is refused before decoding.
func TestLlamaServerAnswerOfTooManyObjects(t *testing.T) {
	arm := fakeLlamaServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"content":"x","completion_probabilities":[{"top_logprobs":[`))
		w.Write(bytes.Repeat([]byte(`{},`), maxRuntimeResponseObjects))
		w.Write([]byte(`{}]}],"stop_type":"eos","tokens_predicted":1}`))
	})
	before := measure()
	_, err := arm.Generate(context.Background(), Request{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 4})
	after := measure()
	t.Logf("%v; %s", err, after.growth(before))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "maxRuntimeResponseObjects") {
		t.Fatalf("err = %v; want a refusal naming maxRuntimeResponseObjects", err)
	}
}

// fakeOllama is a fake Ollama (no model behind it) on a unix socket, as the
// real one is reached, with a client made as StartOllama makes it.
func fakeOllama(t *testing.T, h http.HandlerFunc) *Ollama {
	t.Helper()
	sock, err := socketPath(t.TempDir(), "ollama.sock")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	base, _ := url.Parse("http://127.0.0.1:11434")
	return &Ollama{sb: &Sandbox{done: make(chan struct{})}, sock: sock, model: "fake",
		client: api.NewClient(base, socketClient(sock))}
}

// TestOllamaClientIsCappedAtTheSocket: Ollama's client library reads answers
// whole; the socket's client stops it at the cap.
func TestOllamaClientIsCappedAtTheSocket(t *testing.T) {
	o := fakeOllama(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, io.MultiReader(strings.NewReader(`{"version":"`), io.LimitReader(filler('9'), 256<<20), strings.NewReader(`"}`)))
	})
	before := measure()
	_, err := o.client.Version(context.Background())
	after := measure()
	t.Logf("Version with a 256 MiB answer: %.300v; %s", err, after.growth(before))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "/api/version") {
		t.Errorf("err = %.300v; want ErrTooLarge naming /api/version", err)
	}
	// io.ReadAll grows its buffer by a quarter at a time: what it allocates
	// in reaching the cap is several times the cap, but not the answer.
	if grew := after.totalAlloc - before.totalAlloc; grew > 8*maxRuntimeResponseBytes {
		t.Errorf("allocated %d MiB", grew>>20)
	}
}

// TestOllamaStreamedAnswerIsCapped: a streamed answer of endless pieces is
// cut at the cap; the call fails and what it read is bounded.
func TestOllamaStreamedAnswerIsCapped(t *testing.T) {
	piece := []byte(`{"model":"fake","response":"` + strings.Repeat("a", 4<<10) + `","done":false}` + "\n")
	o := fakeOllama(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		for i := 0; i < (128<<20)/len(piece); i++ {
			if _, err := w.Write(piece); err != nil {
				return
			}
		}
	})
	before := measure()
	res, err := o.completionOllama(context.Background(), Request{Prompt: "x", MaxTokens: 4})
	after := measure()
	t.Logf("a 128 MiB stream: %d characters kept, %v; %s", len(res.Text), err, after.growth(before))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "/api/generate") || len(err.Error()) > 1000 {
		t.Fatalf("err = %.1200v; want a short refusal naming /api/generate and the cap", err)
	}
	if len(res.Text) > maxRuntimeResponseBytes {
		t.Errorf("%d characters kept; the cap is %d bytes", len(res.Text), maxRuntimeResponseBytes)
	}
}
