package speed

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

	"rig/runtimes"
)

// A runtime's time per output token is its compute threads' work plus
// whatever else must run for each token (sampling, detokenizing, streaming
// the token between processes and over HTTP). Where that other work finds
// a free core it costs no time per token; where every core runs a compute
// thread it takes its time from them. Attributing CPU time to threads does
// not tell the two apart (Go moves the goroutine that calls into ggml from
// one OS thread to another, and OpenMP's workers spin while they wait), so
// the bench tests it directly: one compute thread fewer, once with the
// freed cores idle and once with them kept busy. A runtime whose time per
// token rises when the spare core is taken needs that core for work
// outside its kernels; the reference shows what the busy core costs
// anyway (memory bandwidth, the cache).

// Cause is the probe of a generation gap (a missed goal, or any with
// --probe).
type Cause struct {
	Runtime string `json:"runtime"`
	Model   string `json:"model"`
	// Threads is the missed cell's thread count; the probe runs at
	// Threads-1 with the machine's other cores idle, then busy.
	Threads int `json:"threads"`
	Cores   int `json:"cores"`
	// IdleTPOT and BusyTPOT are the runtime's time per output token (ms,
	// p50) in the two runs; RefIdleTPOT and RefBusyTPOT llama-server's.
	IdleTPOT    float64 `json:"idle_tpot_ms"`
	BusyTPOT    float64 `json:"busy_tpot_ms"`
	RefIdleTPOT float64 `json:"ref_idle_tpot_ms"`
	RefBusyTPOT float64 `json:"ref_busy_tpot_ms"`
	// Gap is the missed cell's time per token over llama-server's (ms).
	Gap float64 `json:"gap_ms"`
	// TPOT and RefTPOT are the cell's own times per token (ms, p50), at
	// Threads: against IdleTPOT and RefIdleTPOT they are each runtime's
	// speed-up from its last thread.
	TPOT    float64 `json:"tpot_ms"`
	RefTPOT float64 `json:"ref_tpot_ms"`
	// OpenMP says whether each runtime's CPU backend lists OPENMP=1 among
	// its features (ggml's threads synchronized by OpenMP, else by its own
	// threadpool); empty where the backend's log named none.
	OpenMP    string `json:"openmp,omitempty"`
	RefOpenMP string `json:"ref_openmp,omitempty"`
	// Reading is the probe's conclusion, in words.
	Reading string `json:"reading"`
}

// spin keeps n cores busy until stop is called.
func spin(n int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			x := uint64(1)
			for {
				select {
				case <-done:
					return
				default:
				}
				for range 1 << 16 {
					x = x*6364136223846793005 + 1442695040888963407
				}
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// tpots are a row's time per output token (p50), idle and with the spare
// cores busy, by runtime.
func tpots(c Cell, rt string) (idle, busy float64) {
	for _, r := range c.Rows {
		if r.Runtime == rt {
			idle = r.TPOT.P50
			if r.TPOTBusy != nil {
				busy = r.TPOTBusy.P50
			}
		}
	}
	return idle, busy
}

// probeCause runs the cell's model at one thread fewer, each tg call made
// idle and then again at once with the freed cores busy (the two
// interleaved, so a machine whose load drifts moves both), and reads what
// the rise says of rt's gap.
func probeCause(c Cell, rt string, run func(threads, spare int) (Cell, error)) (Cause, error) {
	cores := runtime.NumCPU()
	gapRT, _ := tpots(c, rt)
	gapRef, _ := tpots(c, "llama-server")
	cs := Cause{Runtime: rt, Model: c.Model, Threads: c.Threads, Cores: cores, Gap: gapRT - gapRef, TPOT: gapRT, RefTPOT: gapRef}
	probe, err := run(c.Threads-1, cores-(c.Threads-1))
	if err != nil {
		return cs, err
	}
	cs.IdleTPOT, cs.BusyTPOT = tpots(probe, rt)
	cs.RefIdleTPOT, cs.RefBusyTPOT = tpots(probe, "llama-server")
	return cs, nil
}

// openMP is "yes" or "no" for a CPU backend that lists its features, ""
// for none.
func openMP(b *runtimes.CPUBackend) string {
	if b == nil || len(b.Features) == 0 {
		return ""
	}
	if slices.Contains(b.Features, "OPENMP=1") {
		return "yes"
	}
	return "no"
}

// read is the probe's conclusion: how much of the gap the runtime's need
// of a spare core explains.
func (cs Cause) read() string {
	rise, refRise := cs.BusyTPOT-cs.IdleTPOT, cs.RefBusyTPOT-cs.RefIdleTPOT
	own := rise - refRise
	head := fmt.Sprintf("%s on %s at %d thread(s) is %.2f ms per token slower than llama-server. At %d thread(s), taking the other %d core(s) away raised its time per token from %.2f to %.2f ms (+%.2f), llama-server's from %.2f to %.2f (+%.2f)",
		cs.Runtime, cs.Model, cs.Threads, cs.Gap, cs.Threads-1, cs.Cores-(cs.Threads-1), cs.IdleTPOT, cs.BusyTPOT, rise, cs.RefIdleTPOT, cs.RefBusyTPOT, refRise)
	switch {
	case cs.Gap <= 0:
		return head + fmt.Sprintf(": at %d thread(s) it is not slower here; what the spare core costs it is %.2f ms per token more than llama-server", cs.Threads, own)
	case own >= cs.Gap/2:
		return head + fmt.Sprintf(": %s needs %.2f ms of a spare core per token for work outside its compute threads (sampling, detokenizing, streaming each token); with as many compute threads as cores it takes that time from them, which explains %.0f%% of the gap. Not a kernel or a build flag: give it a core more than its threads", cs.Runtime, own, 100*min(own/cs.Gap, 1))
	}
	out := head + fmt.Sprintf(": the spare core explains %.2f of the %.2f ms; the rest is in the compute threads themselves", max(own, 0), cs.Gap)
	if cs.TPOT > 0 && cs.RefTPOT > 0 && cs.IdleTPOT > 0 && cs.RefIdleTPOT > 0 {
		out += fmt.Sprintf(". Going from %d to %d thread(s) cut %s's time per token %.2f× and llama-server's %.2f×", cs.Threads-1, cs.Threads, cs.Runtime, cs.IdleTPOT/cs.TPOT, cs.RefIdleTPOT/cs.RefTPOT)
		if cs.OpenMP == "no" && cs.RefOpenMP == "yes" {
			out += fmt.Sprintf(": %s's CPU backend is built without OpenMP (no OPENMP=1 among its features; llama-server's has it), so ggml synchronizes its threads at every operation with its own threadpool, a cost that weighs most on a small model whose operations are short", cs.Runtime)
		}
	}
	return out
}
