package runtimes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// What the daemon reads back from a sandbox is hostile data (issue 43: code
// in Aider's sandbox posted 1 GiB to the proxy, and the daemon, which read
// it whole, grew from 20 MB to 2.7 GB). Every such read has a cap below, and
// a read past its cap is refused with an error wrapping ErrTooLarge that
// names what was too big, the cap and where it came from: the call or the
// trial fails, the daemon goes on. Decoding JSON costs more than its bytes
// (an object of two bytes, "{}", becomes a struct of tens), so JSON read from
// a sandbox is also held to a count of values before it is decoded.
const (
	// maxProxyRequestBytes caps one request posted to the proxy. A chat
	// request holds the whole conversation as text: Aider's system prompt,
	// repository map, the files in the chat and the history, all of it within
	// the arm's context. A 128k-token context is about 0.5 MB of text and
	// under 1 MB JSON-escaped; 16 MiB is many times what any arm can read.
	maxProxyRequestBytes = 16 << 20
	// maxProxyRequestValues caps the JSON values (objects, arrays, and the
	// items between commas) of one request, so decoding it stays within a
	// small multiple of its bytes. A conversation is a handful of values a
	// message; 100,000 allows thousands of messages.
	maxProxyRequestValues = 100_000
	// maxProxyBodyWait bounds how long the proxy waits for a request's body
	// once its headers are in: a 16 MiB body over the loopback takes
	// milliseconds, and a body that trickles would hold the call slot.
	maxProxyBodyWait = time.Minute
	// maxProxyConns caps the connections the proxy serves at once (more wait
	// in the listen queue). Aider calls one at a time on one or two
	// connections; each open one costs the daemon its header buffer.
	maxProxyConns = 16
	// maxProxyHeaderBytes caps a request's header lines (net/http's default
	// is 1 MiB); Aider's are under 1 KiB.
	maxProxyHeaderBytes = 64 << 10
	// maxProxyFailures caps the refused or failed calls the proxy keeps with
	// why (the trial's call errors); past it only their count is kept, since
	// code in the sandbox can post refused requests in a loop.
	maxProxyFailures = 32

	// maxRuntimeResponseBytes caps one answer rig reads from a runtime in its
	// sandbox (llama-server, Ollama). The largest is a completion with top-K
	// log-probabilities: a step is its token and K candidates of about 80
	// bytes each (id, token, its bytes, log-probability), so about 1.7 KB a
	// step at top_k 20, the most a study may ask, and 0.5 KB at the default
	// 5. 64 MiB holds about 40,000 steps at top_k 20 and 130,000 at 5, many
	// times a stop cap of a few thousand tokens.
	maxRuntimeResponseBytes = 64 << 20
	// maxRuntimeResponseObjects and maxRuntimeResponseValues cap the JSON
	// objects and values of one answer before it is decoded. A candidate is
	// one object of at least about 48 bytes and 6 values (each of its token's
	// bytes is one more, at 2 to 4 bytes each), so an answer under the byte
	// cap stays under both; a hostile one of "{}" or "0," items would
	// otherwise decode into 20 or 4 times its size.
	maxRuntimeResponseObjects = 2 << 20
	maxRuntimeResponseValues  = 16 << 20
)

// ErrTooLarge marks something a sandbox sent that was past the cap on what rig
// reads of it. The call, or the trial, fails with it; nothing more of it is read.
var ErrTooLarge = errors.New("past the cap on what rig reads back from a sandbox")

// tooLarge is the refusal of what, past the cap named capName of limit bytes
// (or values, when unit says so).
func tooLarge(what string, limit int64, unit, capName string) error {
	n := fmt.Sprintf("%d %s", limit, unit)
	if unit == "bytes" && limit >= 1<<20 && limit%(1<<20) == 0 {
		n = fmt.Sprintf("%d MiB", limit>>20)
	}
	return fmt.Errorf("%s is more than %s (%s): %w", what, n, capName, ErrTooLarge)
}

// readCapped reads r to its end, refusing past limit bytes: it reads at most
// limit bytes and one more to tell an overrun from an end at the cap. size is
// the length r says it has (-1 if it says none), used only to size the buffer
// once. An overrun returns the first limit bytes with the error; an error
// from r that already wraps ErrTooLarge is replaced by this one, which names
// what was read.
func readCapped(r io.Reader, size, limit int64, capName, what string) ([]byte, error) {
	n := int64(64 << 10)
	if size >= 0 {
		n = size
	}
	buf := make([]byte, 0, min(max(n, 512), limit))
	for {
		if len(buf) == cap(buf) {
			// Full: one more byte, or the end, decides whether to grow (a
			// length said rightly then costs one buffer, not two).
			var one [1]byte
			k, err := io.ReadFull(r, one[:])
			switch {
			case k == 0 && err == io.EOF:
				return buf, nil
			case k == 0 && errors.Is(err, ErrTooLarge):
				return buf, tooLarge(what, limit, "bytes", capName)
			case k == 0:
				return buf, err
			case int64(len(buf)) >= limit:
				return buf, tooLarge(what, limit, "bytes", capName)
			}
			// Doubling, never past the cap: what is allocated in all stays
			// under twice the cap.
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit))
			copy(grown, buf)
			buf = append(grown, one[0])
			continue
		}
		k, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+k]
		switch {
		case err == io.EOF:
			return buf, nil
		case errors.Is(err, ErrTooLarge):
			return buf, tooLarge(what, limit, "bytes", capName)
		case err != nil:
			return buf, err
		}
	}
}

// jsonCaps are caps on the shape of JSON text, each with its constant's
// name; 0 leaves that count unchecked.
type jsonCaps struct {
	objects, values         int
	objectsName, valuesName string
}

var (
	proxyRequestShape  = jsonCaps{values: maxProxyRequestValues, valuesName: "maxProxyRequestValues"}
	runtimeAnswerShape = jsonCaps{maxRuntimeResponseObjects, maxRuntimeResponseValues, "maxRuntimeResponseObjects", "maxRuntimeResponseValues"}
)

// checkJSONShape refuses JSON text with more objects or values (objects,
// arrays and the items between commas, counted outside strings) than caps
// allow, before anything decodes it. Malformed text is counted all the
// same: the count is only compared to a cap, and the decoder refuses it.
func checkJSONShape(b []byte, caps jsonCaps, what string) error {
	objects, values := 0, 1
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			objects++
			values++
		case c == '[' || c == ',':
			values++
		}
	}
	if caps.objects > 0 && objects > caps.objects {
		return tooLarge(what, int64(caps.objects), "JSON objects", caps.objectsName)
	}
	if caps.values > 0 && values > caps.values {
		return tooLarge(what, int64(caps.values), "JSON values", caps.valuesName)
	}
	return nil
}

// quote is at most 1 KiB of what a sandbox sent, for an error message.
func quote(b []byte) string {
	const n = 1 << 10
	s := strings.TrimSpace(string(b[:min(len(b), n)]))
	if len(b) > n {
		s += fmt.Sprintf(" … (%d bytes in all)", len(b))
	}
	return s
}

// limitListener holds a listener to n connections at once: Accept waits
// for one to close. Those past n wait in the kernel's listen queue, where
// they cost the daemon nothing.
type limitListener struct {
	net.Listener
	slots chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.slots <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

type limitConn struct {
	net.Conn
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// recordingProxy is the only model server Aider sees. It answers Aider's
// OpenAI-style chat calls through the arm's own driver, so each call is made
// under the arm's full pins (sampling, seed, stop cap, top-K log-probabilities)
// exactly as rig's own calls are, and is kept with the prompt the template
// rendered (and its token ids where the runtime gives them). A replay then
// re-scores an Aider call the same way as any other row. Aider itself cannot be
// trusted to send the pins, and an OpenAI-compatible endpoint cannot take them
// all (Ollama's has no top_k, min_p or repeat_penalty), so Aider's request is
// never forwarded as it came. On a generic server (OpenAIServer) the arm's
// driver is itself such a client: each call goes to the server's
// /v1/chat/completions with every pin and logprobs set by rig, and is kept
// as that driver keeps any call (the messages as sent, token texts without
// ids, since the API gives none). The proxy also counts turns and tokens
// against the caps.
type recordingProxy struct {
	arm      Runtime
	sampling Sampling
	maxTok   int // per-call stop cap
	topK     int
	caps     AiderCaps

	// slot is held while a call's body is read and the arm answers it: one
	// call at a time, so at most one request body is in memory. Aider makes
	// its calls one after another, and each Aider run has a proxy of its own
	// (RunAider), so N runs in flight still reach the arm's N slots at once.
	slot chan struct{}
	// serverSlot is the arm's slot the calls ask for (AiderConfig.Slot).
	serverSlot int

	mu          sync.Mutex
	calls       []Result
	failures    []string // calls the arm did not answer, or refused, with why
	moreFailed  int      // failures past maxProxyFailures, counted only
	outputTotal int
	capHit      string
	srv         *http.Server
	l           net.Listener
}

func newRecordingProxy(socket string, arm Runtime, s Sampling, maxTok, topK int, caps AiderCaps) (*recordingProxy, error) {
	if err := claimSocket(socket); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(socket, 0o600)
	p := &recordingProxy{arm: arm, sampling: s, maxTok: maxTok, topK: topK, caps: caps, l: l, slot: make(chan struct{}, 1)}
	// The socket is reached from Aider's sandbox: every byte the daemon
	// reads from it is bounded (headers here, bodies in ServeHTTP), and so
	// are the connections served at once. An idle connection is closed
	// after a while so it gives its place back (Aider's client, httpx,
	// drops its own idle connections after 5 s).
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: maxProxyHeaderBytes,
		IdleTimeout: 30 * time.Second}
	go p.srv.Serve(&limitListener{Listener: l, slots: make(chan struct{}, maxProxyConns)})
	return p, nil
}

func (p *recordingProxy) close() { p.srv.Close() }

// proxyDefaultMaxTokens bounds a call when neither the arm nor Aider names a cap.
const proxyDefaultMaxTokens = 1024

// oaChatRequest is the part of an OpenAI-style chat request the proxy reads.
type oaChatRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens int             `json:"max_tokens"`
	Stop      json.RawMessage `json:"stop"`
	// Tools is kept raw: only whether there are any matters, and decoding
	// a list of anything would build a value for each item.
	Tools json.RawMessage `json:"tools"`
	N     int             `json:"n"`
}

// hasTools says whether a request's tools list is there and not empty.
func (r oaChatRequest) hasTools() bool {
	t := bytes.TrimSpace(r.Tools)
	if len(t) == 0 || string(t) == "null" {
		return false
	}
	if t[0] == '[' {
		rest := bytes.TrimSpace(t[1:])
		return len(rest) > 0 && rest[0] != ']'
	}
	return true
}

// parseChatRequest reads the messages and stop strings of an OpenAI-style chat
// request; content given as parts keeps its text parts in order.
func parseChatRequest(body []byte) (oaChatRequest, []Message, []string, error) {
	var req oaChatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, nil, fmt.Errorf("not a JSON chat request: %w", err)
	}
	if len(req.Messages) == 0 {
		return req, nil, nil, errors.New("a chat request with no messages")
	}
	msgs := make([]Message, 0, len(req.Messages))
	for i, m := range req.Messages {
		var text string
		if len(m.Content) > 0 && string(m.Content) != "null" && json.Unmarshal(m.Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return req, nil, nil, fmt.Errorf("messages[%d].content is neither text nor a list of parts", i)
			}
			for _, part := range parts {
				text += part.Text
			}
		}
		msgs = append(msgs, Message{Role: m.Role, Content: text})
	}
	var stop []string
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if json.Unmarshal(req.Stop, &one) == nil {
			stop = []string{one}
		} else if err := json.Unmarshal(req.Stop, &stop); err != nil {
			return req, nil, nil, errors.New("stop is neither a string nor a list of strings")
		}
	}
	return req, msgs, stop, nil
}

// ChatMessages reads the messages of a kept OpenAI-style chat request (how
// harness calls were kept before the proxy answered through the driver).
func ChatMessages(body string) ([]Message, error) {
	_, msgs, _, err := parseChatRequest([]byte(body))
	return msgs, err
}

// readProxyRequest reads a request's body within maxProxyRequestBytes and
// maxProxyBodyWait, and refuses one past maxProxyRequestValues. A body said
// to be larger than the cap is refused before any of it is read.
func readProxyRequest(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	const what = "the chat request posted to rig's proxy from Aider's sandbox"
	if r.ContentLength > maxProxyRequestBytes {
		return nil, fmt.Errorf("%w (it said %d bytes)", tooLarge(what, maxProxyRequestBytes, "bytes", "maxProxyRequestBytes"), r.ContentLength)
	}
	// MaxBytesReader also has the server close the connection after the
	// answer instead of reading the rest of an overrun to keep it open.
	body := http.MaxBytesReader(w, r.Body, maxProxyRequestBytes)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(maxProxyBodyWait))
	b, err := readCapped(body, r.ContentLength, maxProxyRequestBytes, "maxProxyRequestBytes", what)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = tooLarge(what, maxProxyRequestBytes, "bytes", "maxProxyRequestBytes")
	}
	if err != nil {
		return nil, err
	}
	// No deadline while the arm answers: a call may take minutes.
	_ = rc.SetReadDeadline(time.Time{})
	if err := checkJSONShape(b, proxyRequestShape, what); err != nil {
		return nil, err
	}
	return b, nil
}

func oaError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "rig: " + msg, "type": "rig_proxy"}})
	w.Write(b)
}

func (p *recordingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"rig-arm","object":"model","owned_by":"rig"}]}`))
		return
	case r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions"):
		oaError(w, http.StatusNotFound, r.Method+" "+r.URL.Path+" is not served; the arm answers chat completions only")
		return
	}
	select {
	case p.slot <- struct{}{}:
		defer func() { <-p.slot }()
	case <-r.Context().Done():
		return
	}
	body, err := readProxyRequest(w, r)
	if errors.Is(err, ErrTooLarge) {
		// Kept with the result: the trial fails, saying what was posted.
		// 400, not 413: Aider's client maps a 413 to a generic API error,
		// which it retries, and the same request is as large again.
		p.fail(p.nextCall(), err)
		oaError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		oaError(w, http.StatusBadRequest, "reading the request: "+err.Error())
		return
	}
	req, msgs, stop, err := parseChatRequest(body)
	if err != nil {
		oaError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.hasTools() || req.N > 1 {
		// Tool calls and several choices have no place in the record's one
		// output per call; an edit format that needs them is refused aloud.
		oaError(w, http.StatusBadRequest, "tool calls and n > 1 are not supported; use a text edit format (whole, diff)")
		return
	}
	p.mu.Lock()
	n := len(p.calls) + 1
	if p.capHit == "" && p.caps.Turns > 0 && n > p.caps.Turns {
		p.capHit = "turns"
	}
	hit := p.capHit
	p.mu.Unlock()
	if hit != "" {
		// 400, not 429: Aider retries a rate limit for a minute or more,
		// and a cap is not lifted by waiting.
		oaError(w, http.StatusBadRequest, "the "+hit+" cap of this run is reached")
		return
	}
	maxTok := p.maxTok
	if maxTok <= 0 {
		maxTok = req.MaxTokens
	}
	if maxTok <= 0 {
		maxTok = proxyDefaultMaxTokens
	}
	res, err := p.arm.Generate(r.Context(), Request{CallID: fmt.Sprintf("aider-call-%d", n), Messages: msgs,
		Sampling: p.sampling, MaxTokens: maxTok, TopK: p.topK, Stop: stop, Slot: p.serverSlot})
	if err != nil && r.Context().Err() != nil {
		// Aider went away mid-call (the wall cap stopped it): a cut call,
		// not one the arm failed; the cap is what the result reports.
		oaError(w, http.StatusBadRequest, "the run ended during this call")
		return
	}
	if err != nil {
		// Kept with the result, so the trial or validation says why the
		// call has no record. 400 because Aider retries a 5xx with the same
		// request, which the pinned runtime answers the same way again.
		p.fail(n, err)
		oaError(w, http.StatusBadRequest, "the arm did not answer: "+err.Error())
		return
	}
	p.keep(res)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(oaCompletion(res, n))
}

// oaCompletion is the OpenAI-style answer Aider reads.
func oaCompletion(res Result, n int) map[string]any {
	finish := "stop"
	if res.Truncated {
		finish = "length"
	}
	msg := map[string]any{"role": "assistant", "content": res.Text}
	if res.Thinking != "" {
		msg["reasoning_content"] = res.Thinking
	}
	return map[string]any{
		"id": fmt.Sprintf("rig-aider-call-%d", n), "object": "chat.completion", "created": time.Now().Unix(), "model": "rig-arm",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": res.PromptTokens, "completion_tokens": res.OutputTokens,
			"total_tokens": res.PromptTokens + res.OutputTokens},
	}
}

func (p *recordingProxy) keep(res Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, res)
	p.outputTotal += res.OutputTokens
	if p.caps.Tokens > 0 && p.outputTotal >= p.caps.Tokens && p.capHit == "" {
		p.capHit = "tokens"
	}
}

func (p *recordingProxy) fail(n int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.failures) >= maxProxyFailures {
		p.moreFailed++
		return
	}
	p.failures = append(p.failures, fmt.Sprintf("call %d: %v", n, err))
}

// nextCall is the number the next call the arm answers will have.
func (p *recordingProxy) nextCall() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.calls) + 1
}

func (p *recordingProxy) failed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]string(nil), p.failures...)
	if p.moreFailed > 0 {
		out = append(out, fmt.Sprintf("and %d more calls failed or were refused (only the first %d are kept)", p.moreFailed, maxProxyFailures))
	}
	return out
}

func (p *recordingProxy) results() ([]Result, int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Result(nil), p.calls...), p.outputTotal, p.capHit
}
