package memory

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"rig/preflight"
	"rig/runtimes"
)

var projectedLine = regexp.MustCompile(`projected to use (\d+) MiB of (host|device) memory`)

// FitDryRun asks llama-server itself what a run at p would use: it starts
// the server with --fit on, reads llama.cpp's projection (made before any
// weight is loaded) and stops the server at once. The projection covers
// model, context and compute buffers, not the process's own overhead. The
// answer is kept as evidence beside rig's verdict; it never changes the pins.
func FitDryRun(ctx context.Context, serverBin, model string, p preflight.Profile, noSandbox bool) (preflight.Size, preflight.Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	args := []string{serverBin, "--host", "127.0.0.1", "--port", "8080", "-m", model,
		"-c", strconv.Itoa(p.Context * p.Slots()), "-np", strconv.Itoa(p.Slots()),
		"--cache-type-k", p.CacheType(), "--cache-type-v", p.CacheType(), "--fit", "on", "-lv", "4"}
	if !p.Simulated {
		ngl := p.OffloadLayers
		if ngl == preflight.OffloadAll {
			ngl = 999
		}
		args = append(args, "-ngl", strconv.Itoa(ngl), "--fit-target", "0")
	} else {
		args = append(args, "-ngl", "0")
	}
	ev := preflight.Evidence{Source: "llama-server --fit on (dry run, stopped after the projection)"}
	out, err := runtimes.RunTool(ctx, args, model, noSandbox, !p.Simulated && p.OffloadLayers != 0, func(log string) bool {
		return strings.Contains(log, "fitting params to free memory took") || strings.Contains(log, "failed to fit")
	})
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && out == "" {
		return 0, ev, fmt.Errorf("preflight: fit dry run: %w", err)
	}
	var total preflight.Size
	var lines []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "fit") {
			continue
		}
		lines = append(lines, strings.TrimSpace(line))
		if m := projectedLine.FindStringSubmatch(line); m != nil {
			mib, _ := strconv.Atoi(m[1])
			total += preflight.Size(mib) * preflight.MiB
		}
		if strings.Contains(line, "fitting params to free memory took") || strings.Contains(line, "failed to fit") {
			break
		}
	}
	ev.Output = strings.Join(lines, "\n")
	if total == 0 {
		return 0, ev, fmt.Errorf("preflight: fit dry run: llama-server printed no projection: %s", tail(ev.Output, 400))
	}
	ev.Says = fmt.Sprintf("llama.cpp projects %s (model + context + compute)", total)
	return total, ev, nil
}

// FitPrint asks llama.cpp itself (llama-fit-params --fit-print on, a dry run
// that builds the model and context without allocating) what the run needs,
// and returns the host total and the raw answer as evidence.
func FitPrint(ctx context.Context, fitBin, model string, p preflight.Profile, noSandbox bool) (preflight.Size, preflight.Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := []string{"--fit-print", "on", "-m", model, "-c", strconv.Itoa(p.Context * p.Slots()), "-np", strconv.Itoa(p.Slots()),
		"--cache-type-k", p.CacheType(), "--cache-type-v", p.CacheType(), "-ngl", "0"}
	ev := preflight.Evidence{Source: "llama-fit-params --fit-print on " + strings.Join(args[2:], " ")}
	out, err := runtimes.RunTool(ctx, append([]string{fitBin}, args...), model, noSandbox, false, nil)
	if err != nil {
		ev.Output = tail(out, 2000)
		return 0, ev, fmt.Errorf("preflight: llama-fit-params: %w: %s", err, tail(out, 400))
	}
	ev.Output = out
	// The table (device, model, context, compute in MiB) follows the log line
	// that announces it; stdout and stderr share the sandbox's log, so only
	// lines whose last three fields are all numbers count.
	if _, after, ok := strings.Cut(out, "printing estimated memory"); ok {
		if _, rest, ok := strings.Cut(after, "\n"); ok {
			out = rest
		}
	}
	var total float64
	for _, line := range strings.Split(out, "\n") {
		fs := strings.Fields(line)
		if len(fs) < 4 {
			continue
		}
		var sum float64
		numeric := true
		for _, x := range fs[len(fs)-3:] {
			v, err := strconv.ParseFloat(x, 64)
			numeric = numeric && err == nil
			sum += v
		}
		if numeric {
			total += sum
		}
	}
	ev.Says = fmt.Sprintf("model + context + compute = %.0f MiB (device lines: %s)", total, strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", "; ")), " "))
	return preflight.Size(total * float64(preflight.MiB)), ev, nil
}
