package governor

import (
	"context"
	"sync"
	"time"
)

// Progress value keys.
const (
	KeyActive          = "active"             // 1 while a call is running
	KeyTokens          = "tokens"             // tokens generated in the current call
	KeyTokensPerS      = "tokens_per_s"       // over the call so far
	KeySinceLastTokenS = "since_last_token_s" // since the last token, or since the call began
	KeyExited          = "exited"             // 1 once the runtime process exited on its own
	KeyStopped         = "stopped"            // 1 while the tracked runtime process is stopped (SIGSTOP, tracer)
	// KeyCalls counts the calls in flight (several when a runtime serves
	// several slots); KeyFirstTokenWaitS is, while some of them have
	// progressed and others have not, the longest any of the others has
	// waited for its first token. KeyTokens and KeySinceLastTokenS are then
	// those of the progressed call that has gone longest without a token.
	KeyCalls           = "calls"
	KeyFirstTokenWaitS = "first_token_wait_s"
)

// Progress is fed by the runtime driver: Begin when a call starts, Tokens as
// tokens stream, Exited when the runtime process ends unexpectedly, End when
// the call finishes. It turns that into tokens/s and time since the last
// token, which the hung-runtime and runtime-crash policies read.
//
// Several calls can be in flight at once on one runtime (its slots): each
// is fed under its own id (BeginCall, TokensOf, EndCall), and the reading
// is that of the call that has stalled longest, so one slot that stops
// advancing while the others run is a hung runtime. Begin, Tokens, Add,
// Track and End are the same for the one call of id "".
type Progress struct {
	name string
	// now is the clock; a unit test's fake clock replaces time.Now.
	now func() time.Time

	mu     sync.Mutex
	calls  map[string]*call
	exited bool
}

// call is one call in flight.
type call struct {
	begun, lastAt time.Time
	tokens        int
	pid           int
}

// NewProgress returns an idle progress sensor named "progress".
func NewProgress() *Progress {
	return &Progress{name: "progress", now: time.Now, calls: map[string]*call{}}
}

// Name implements Sensor.
func (p *Progress) Name() string { return p.name }

// Begin marks the start of a call; the hung clock starts now.
func (p *Progress) Begin() { p.BeginCall("") }

// BeginCall marks the start of call id. A runtime's exit is forgotten
// only when no other call was in flight on it.
func (p *Progress) BeginCall(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	others := len(p.calls)
	if _, ok := p.calls[id]; ok {
		others--
	}
	if others == 0 {
		p.exited = false
	}
	p.calls[id] = &call{begun: now, lastAt: now}
}

// Track names the runtime's process, whose state is read with the progress:
// a stopped process (state T or t) is hung now, without waiting out the
// token-gap limit. 0 stops tracking.
func (p *Progress) Track(pid int) { p.TrackCall("", pid) }

// TrackCall is Track for call id.
func (p *Progress) TrackCall(id string, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.calls[id]; ok {
		c.pid = pid
	}
}

// Tokens records the running total of generated tokens in the call. A total
// that does not grow is not progress.
func (p *Progress) Tokens(total int) { p.TokensOf("", total) }

// TokensOf is Tokens for call id.
func (p *Progress) TokensOf(id string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.calls[id]; ok && total > c.tokens {
		c.tokens = total
		c.lastAt = p.now()
	}
}

// Add records n more tokens.
func (p *Progress) Add(n int) {
	p.mu.Lock()
	total := n
	if c, ok := p.calls[""]; ok {
		total += c.tokens
	}
	p.mu.Unlock()
	p.Tokens(total)
}

// Exited records that the runtime process ended without being asked to.
func (p *Progress) Exited() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited = true
}

// End marks the call finished normally.
func (p *Progress) End() { p.EndCall("") }

// EndCall marks call id finished; the others in flight stay watched.
func (p *Progress) EndCall(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.calls, id)
}

// Read implements Sensor.
func (p *Progress) Read(ctx context.Context) (Reading, error) {
	if err := ctx.Err(); err != nil {
		return Reading{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	v := map[string]float64{KeyActive: b2f(len(p.calls) > 0), KeyExited: b2f(p.exited), KeyCalls: float64(len(p.calls)), KeyTokens: 0}
	// The worst call: among those that progressed, the longest without a
	// token; with none progressed, the longest waiting for its first.
	var worst, waiting *call
	for _, c := range p.calls {
		switch {
		case c.tokens > 0 && (worst == nil || c.lastAt.Before(worst.lastAt)):
			worst = c
		case c.tokens == 0 && (waiting == nil || c.begun.Before(waiting.begun)):
			waiting = c
		}
		if c.pid > 0 {
			if st, ok := procState(c.pid); ok && (st == 'T' || st == 't') {
				v[KeyStopped] = 1
			}
		}
	}
	switch {
	case worst != nil:
		v[KeyTokens] = float64(worst.tokens)
		if el := now.Sub(worst.begun).Seconds(); el > 0 {
			v[KeyTokensPerS] = float64(worst.tokens) / el
		}
		v[KeySinceLastTokenS] = now.Sub(worst.lastAt).Seconds()
		if waiting != nil {
			v[KeyFirstTokenWaitS] = now.Sub(waiting.begun).Seconds()
		}
	case waiting != nil:
		v[KeySinceLastTokenS] = now.Sub(waiting.begun).Seconds()
	}
	return Reading{Sensor: p.name, At: now, Values: v}, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
