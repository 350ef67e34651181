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
)

// Progress is fed by the runtime driver: Begin when a call starts, Tokens as
// tokens stream, Exited when the runtime process ends unexpectedly, End when
// the call finishes. It turns that into tokens/s and time since the last
// token, which the hung-runtime and runtime-crash policies read.
type Progress struct {
	name string

	mu     sync.Mutex
	active bool
	begun  time.Time
	lastAt time.Time
	tokens int
	exited bool
	pid    int
}

// NewProgress returns an idle progress sensor named "progress".
func NewProgress() *Progress { return &Progress{name: "progress"} }

// Name implements Sensor.
func (p *Progress) Name() string { return p.name }

// Begin marks the start of a call; the hung clock starts now.
func (p *Progress) Begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.active, p.begun, p.lastAt, p.tokens, p.exited = true, now, now, 0, false
}

// Track names the runtime's process, whose state is read with the progress:
// a stopped process (state T or t) is hung now, without waiting out the
// token-gap limit. 0 stops tracking.
func (p *Progress) Track(pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pid = pid
}

// Tokens records the running total of generated tokens in the call. A total
// that does not grow is not progress.
func (p *Progress) Tokens(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if total > p.tokens {
		p.tokens = total
		p.lastAt = time.Now()
	}
}

// Add records n more tokens.
func (p *Progress) Add(n int) {
	p.mu.Lock()
	total := p.tokens + n
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
func (p *Progress) End() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.active = false
}

// Read implements Sensor.
func (p *Progress) Read(ctx context.Context) (Reading, error) {
	if err := ctx.Err(); err != nil {
		return Reading{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	v := map[string]float64{KeyTokens: float64(p.tokens)}
	v[KeyActive] = b2f(p.active)
	v[KeyExited] = b2f(p.exited)
	if p.active {
		if el := now.Sub(p.begun).Seconds(); el > 0 {
			v[KeyTokensPerS] = float64(p.tokens) / el
		}
		v[KeySinceLastTokenS] = now.Sub(p.lastAt).Seconds()
		if p.pid > 0 {
			st, ok := procState(p.pid)
			v[KeyStopped] = b2f(ok && (st == 'T' || st == 't'))
		}
	}
	return Reading{Sensor: p.name, At: now, Values: v}, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
