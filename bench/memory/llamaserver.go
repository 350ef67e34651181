package memory

import (
	"context"
	"fmt"
	"regexp"
	"strconv"

	"rig/internal/cgroup"
	"rig/preflight"
	"rig/runtimes"
)

// measureLlamaServer starts llama-server through its launcher in a fresh
// reservation, sends one completion of the bench prompt and reads the peak.
// Inside a card the launcher reads the weights into the runtime's own
// memory (no mmap), so the peak does not depend on what the page cache held,
// and it never lets the server shrink the context to fit.
func (b *bench) measureLlamaServer(ctx context.Context, r *Row, cfg runtimes.Config) error {
	if err := warmFile(cfg.Model); err != nil {
		return err
	}
	res, err := cgroup.Reserve(ctx, uint64(b.opts.Limit))
	if err != nil {
		return err
	}
	defer res.Close()
	cfg.CgroupDir, cfg.VerboseLog = res.Dir(), true
	rt, err := b.builds[preflight.RuntimeLlamaServer].Start(ctx, cfg)
	if err != nil {
		r.Measured = reservationPeak(res)
		r.Logged = parseBuffers(readLog(cfg.WorkDir, preflight.RuntimeLlamaServer))
		return fmt.Errorf("llama-server did not start (oom kills %d): %w", oomKills(res), err)
	}
	defer rt.Stop(context.Background())
	ls := rt.(*runtimes.LlamaServer)
	r.Stack = rt.Pins().Stack
	_, cerr := ls.Raw(ctx, "/completion", map[string]any{"prompt": benchPrompt(cfg.Context), "n_predict": 16, "temperature": 0})
	peak, perr := res.Peak()
	r.Measured = preflight.Size(peak)
	r.Logged = parseBuffers(readLog(cfg.WorkDir, preflight.RuntimeLlamaServer))
	if cerr != nil {
		return fmt.Errorf("completion (oom kills %d): %w", oomKills(res), cerr)
	}
	return perr
}

// readLog reads what a runtime started in work logged, started or not.
func readLog(work, kind string) string {
	b, _ := runtimes.ReadLog(runtimes.LogPath(work, kind))
	return string(b)
}

// llamaOwnEstimate is llama.cpp's own projection of the run: llama-fit-params
// when it is built, else llama-server's fit dry run; 0 when neither answers.
func (b *bench) llamaOwnEstimate(ctx context.Context, model string, p preflight.Profile) preflight.Size {
	server := b.builds[preflight.RuntimeLlamaServer]
	if bin := fitParams(server); bin != "" {
		fp, _, err := FitPrint(ctx, bin, model, p, b.opts.NoSandbox)
		if err != nil {
			b.opts.Logger.Warn("llama-fit-params", "err", err)
		}
		return fp
	}
	fp, _, err := FitDryRun(ctx, server.Binary, model, p, b.opts.NoSandbox)
	if err != nil {
		b.opts.Logger.Warn("llama-server fit dry run", "err", err)
	}
	return fp
}

var bufferLine = regexp.MustCompile(`(model|KV|compute|output) buffer size =\s+([0-9.]+) MiB`)

func parseBuffers(log string) Buffers {
	var b Buffers
	for _, m := range bufferLine.FindAllStringSubmatch(log, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		s := preflight.Size(v * float64(preflight.MiB))
		switch m[1] {
		case "model":
			b.Model += s
		case "KV":
			b.KV += s
		case "compute":
			b.Compute += s
		case "output":
			b.Output += s
		}
	}
	return b
}
