package runtimes

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 43: the recording proxy that answers Aider runs in the daemon, and
// code in Aider's sandbox (where model-written tests run too) can post
// anything to it. It posted 1 GiB and the daemon's process grew from 20 MB
// to 2.7 GB. These tests play that code: they post to the real proxy as
// Aider's launcher starts it, with the arm a real llama-server driver whose
// runtime is a fake llama-server (an httptest server on 127.0.0.1, no model
// behind it), and measure what the test's process, which is the daemon's
// side here, allocates meanwhile.

// redTeamAllocBound is what one refused request may make the daemon's side
// allocate in all (runtime.MemStats.TotalAlloc, which only grows, so a
// collection in between cannot hide a whole-body read). Reading 1 GiB whole
// allocates over 1 GiB; the bounded read stops at maxProxyRequestBytes.
const redTeamAllocBound = 64 << 20

// fakeLlamaServer is a fake llama-server on 127.0.0.1: it renders and
// tokenizes any chat to fixed values and answers /completion with complete.
func fakeLlamaServer(t *testing.T, complete http.HandlerFunc) *LlamaServer {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/apply-template", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"prompt":"<|user|>fix calc.py<|assistant|>"}`))
	})
	mux.HandleFunc("/tokenize", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"tokens":[1,2,3]}`))
	})
	mux.HandleFunc("/completion", complete)
	srv := httptest.NewServer(mux) // binds 127.0.0.1
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	return &LlamaServer{
		// A sandbox that never ends: the fake is not contained.
		sb: &Sandbox{done: make(chan struct{})},
		http: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", addr)
			},
			DisableKeepAlives: true,
		}},
	}
}

// completeSmall is a normal llama-server /completion answer.
func completeSmall(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{"content":"edited","tokens":[7],"completion_probabilities":[{"id":7,"token":"edited","bytes":[101],"logprob":-0.1,"top_logprobs":[{"id":7,"token":"edited","bytes":[101],"logprob":-0.1}]}],"stop_type":"eos","tokens_predicted":1,"timings":{"prompt_n":3,"predicted_n":1}}`))
}

// startAiderProxy starts the recording proxy as the Aider launcher does:
// on a socket under socketPath, answering through arm.
func startAiderProxy(t *testing.T, arm Runtime) (*recordingProxy, string) {
	t.Helper()
	sock, err := socketPath(t.TempDir(), "aider-proxy.sock")
	if err != nil {
		t.Fatal(err)
	}
	p, err := newRecordingProxy(sock, arm, Sampling{Temperature: 0.2, Seed: 42}, 96, 5, AiderCaps{Turns: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p, sock
}

// filler reads as an endless run of one byte, allocating nothing.
type filler byte

func (f filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(f)
	}
	return len(p), nil
}

// hugeChat is a chat request of n bytes in all, one message's content
// filling it: valid JSON, so only its size is wrong.
func hugeChat(n int64) io.Reader {
	head, tail := `{"model":"openai/rig-arm","messages":[{"role":"user","content":"`, `"}]}`
	return io.MultiReader(strings.NewReader(head),
		io.LimitReader(filler('a'), n-int64(len(head)+len(tail))), strings.NewReader(tail))
}

// postRaw posts body on a connection of its own and returns the status and
// body of the answer, which may come before the body is all sent (so no
// http.Client, which may report the broken write instead). size < 0 sends
// the body chunked, with no length said beforehand.
func postRaw(t *testing.T, sock string, body io.Reader, size int64) (int, string) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Minute))
	hdr := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
	if size >= 0 {
		hdr += "Content-Length: " + strconv.FormatInt(size, 10) + "\r\n\r\n"
	} else {
		hdr += "Transfer-Encoding: chunked\r\n\r\n"
	}
	sent := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(c, 64<<10)
		if _, err := w.WriteString(hdr); err != nil {
			sent <- err
			return
		}
		var dst io.Writer = w
		var cw io.WriteCloser
		if size < 0 {
			cw = httputil.NewChunkedWriter(w)
			dst = cw
		}
		_, err := io.Copy(dst, body)
		if err == nil && cw != nil {
			err = cw.Close()
			if err == nil {
				_, err = w.WriteString("\r\n")
			}
		}
		if err == nil {
			err = w.Flush()
		}
		sent <- err
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to the post: %v (the body write ended with %v)", err, <-sent)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	c.Close() // stops the writer, if the proxy answered before reading it all
	<-sent
	return resp.StatusCode, string(b)
}

// memory is what the process has allocated so far and its peak resident size.
type memory struct {
	totalAlloc uint64
	hwmKiB     int64
}

func measure() memory {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memory{totalAlloc: ms.TotalAlloc}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				m.hwmKiB, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			}
		}
	}
	return m
}

func (m memory) growth(since memory) string {
	return fmt.Sprintf("allocated %.1f MiB, peak resident size %d MiB -> %d MiB",
		float64(m.totalAlloc-since.totalAlloc)/(1<<20), since.hwmKiB>>10, m.hwmKiB>>10)
}

// normalCall is a call Aider makes, through an http.Client as Aider's does.
func normalCall(t *testing.T, sock string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/v1/chat/completions",
		strings.NewReader(`{"model":"openai/rig-arm","messages":[{"role":"user","content":"fix calc.py"}]}`))
	resp, err := socketClient(sock).Do(req)
	if err != nil {
		t.Fatalf("a normal call after the attack: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRedTeamProxyBodyIsBounded(t *testing.T) {
	const gib = int64(1) << 30
	p, sock := startAiderProxy(t, fakeLlamaServer(t, completeSmall))
	for _, tc := range []struct {
		name string
		size int64 // -1: chunked, no length said
	}{
		{"chunked, no length said", -1},
		{"Content-Length 1 GiB", gib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := measure()
			status, body := postRaw(t, sock, hugeChat(gib), tc.size)
			after := measure()
			t.Logf("posting 1 GiB (%s): HTTP %d %.300s; the daemon's side %s", tc.name, status, body, after.growth(before))
			if grew := after.totalAlloc - before.totalAlloc; grew > redTeamAllocBound {
				t.Errorf("the proxy allocated %d MiB for one posted body; want under %d MiB", grew>>20, redTeamAllocBound>>20)
			}
			if status != http.StatusBadRequest || !strings.Contains(body, "chat request") || !strings.Contains(body, "16 MiB (maxProxyRequestBytes)") {
				t.Errorf("HTTP %d %.300s; want 400 with an error naming the request and the cap", status, body)
			}
			if f := p.failed(); len(f) == 0 || !strings.Contains(f[len(f)-1], "maxProxyRequestBytes") {
				t.Errorf("the trial's call errors are %q; want the refusal, so the trial fails saying why", f)
			}
			if status, body := normalCall(t, sock); status != 200 || !strings.Contains(body, `"content":"edited"`) {
				t.Errorf("after the attack, a normal call got HTTP %d %.300s", status, body)
			}
		})
	}
}

// TestRedTeamRuntimeAnswerIsBounded: the arm's runtime runs in a sandbox too,
// and its answer is read by the daemon. An answer past the cap is refused
// with an error naming it, and the call is a failed call of the trial.
func TestRedTeamRuntimeAnswerIsBounded(t *testing.T) {
	const size = 512 << 20
	huge := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		// Written as it is generated: the fake holds none of it.
		io.Copy(w, hugeCompletion(size))
	}
	p, sock := startAiderProxy(t, fakeLlamaServer(t, huge))
	before := measure()
	status, body := normalCall(t, sock)
	after := measure()
	t.Logf("a 512 MiB /completion answer: HTTP %d %.300s; the daemon's side %s", status, body, after.growth(before))
	// The answer is read up to its cap, which is larger than a request's.
	bound := uint64(3 * maxRuntimeResponseBytes)
	if grew := after.totalAlloc - before.totalAlloc; grew > bound {
		t.Errorf("reading the runtime's answer allocated %d MiB; want under %d MiB", grew>>20, bound>>20)
	}
	if status != http.StatusBadRequest || !strings.Contains(body, "/completion") || !strings.Contains(body, "64 MiB (maxRuntimeResponseBytes)") {
		t.Errorf("HTTP %d %.300s; want 400 naming /completion and the cap", status, body)
	}
	if f := p.failed(); len(f) != 1 || !strings.Contains(f[0], "/completion") {
		t.Errorf("the trial's call errors are %q; want the refused answer", f)
	}
}

// hugeCompletion is a /completion answer of about n bytes.
func hugeCompletion(n int64) io.Reader {
	head, tail := `{"content":"`, `","stop_type":"eos","tokens_predicted":1}`
	return io.MultiReader(strings.NewReader(head), io.LimitReader(filler('a'), n), strings.NewReader(tail))
}

// TestOllamaOpenAIChatAnswerIsBounded: replay's OpenAI-style chat to Ollama
// reads the runtime's answer under the same cap. The fake Ollama listens on
// a unix socket, as the real one is reached through its forward.
func TestOllamaOpenAIChatAnswerIsBounded(t *testing.T) {
	sock, err := socketPath(t.TempDir(), "ollama.sock")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.Copy(w, hugeCompletion(maxRuntimeResponseBytes+(8<<20)))
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	o := &Ollama{sb: &Sandbox{done: make(chan struct{})}, sock: sock, model: "fake"}
	before := measure()
	_, err = o.OpenAIChat(context.Background(), []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	after := measure()
	t.Logf("an oversized answer to OpenAIChat: %v; %s", err, after.growth(before))
	if err == nil || !strings.Contains(err.Error(), "MiB") || !strings.Contains(err.Error(), "chat/completions") {
		t.Errorf("err = %v; want a refusal naming the endpoint and the cap", err)
	}
	if grew := after.totalAlloc - before.totalAlloc; grew > uint64(3*maxRuntimeResponseBytes) {
		t.Errorf("reading the answer allocated %d MiB", grew>>20)
	}
}

// TestReadLogIsBounded: ReadLog reads a log a contained process wrote.
func TestReadLogIsBounded(t *testing.T) {
	path := t.TempDir() + "/runtime.log"
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the file says it is larger than the cap without the disk.
	if err := f.Truncate(maxLogReadBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before := measure()
	b, err := ReadLog(path)
	after := measure()
	t.Logf("ReadLog of a log past the cap: %d bytes, %v; %s", len(b), err, after.growth(before))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "MiB") {
		t.Errorf("ReadLog of a log past the cap: %v; want a refusal naming the log and the cap", err)
	}
	if len(b) != maxLogReadBytes {
		t.Errorf("ReadLog past the cap gave %d bytes; want its first %d", len(b), maxLogReadBytes)
	}
	if grew := after.totalAlloc - before.totalAlloc; grew > 2*maxLogReadBytes {
		t.Errorf("ReadLog allocated %d MiB", grew>>20)
	}
	small := t.TempDir() + "/small.log"
	os.WriteFile(small, []byte("load_tensors: done\n"), 0o600)
	if b, err := ReadLog(small); err != nil || string(b) != "load_tensors: done\n" {
		t.Errorf("ReadLog of a small log: %q, %v", b, err)
	}
}
