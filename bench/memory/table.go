package memory

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"rig/preflight"
)

func benchTable(rows []Row, cal *preflight.Calibration, machine string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Preflight accuracy, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "machine: %s\n\n", machine)
	fmt.Fprintf(&b, "calibration: %s on %s\n\n", cal.Date, cal.Machine)
	fmt.Fprintf(&b, "Measured = cgroup v1/v2 peak of the runtime's whole process tree, CPU only, one slot, one completion of a prompt of the row's `prompt sentences` (about ten tokens each; the bench runs min(120, ctx/16), about 1200 tokens, and a longer prompt is its own configuration, because Ollama's own engine is charged for its cache and mask as the context fills); the model file is in the page cache beforehand, so the peak counts what the runtime itself allocates. ")
	fmt.Fprintf(&b, "Each runtime is started by its launcher (package runtimes), as a trial in a simulated card starts it, at %d threads. llama-server: --load-mode none, --fit off. Ollama: `ollama serve` and its runner, OLLAMA_FLASH_ATTENTION=1, OLLAMA_KV_CACHE_TYPE and num_ctx as the row says. ", benchThreads)
	fmt.Fprintf(&b, "Error = (predicted − measured) / measured. own = the runtime's own estimate: for llama-server llama.cpp's fit projection (`llama-fit-params --fit-print on`, or `llama-server --fit on` dry run: model + context + compute, no runtime overhead); for Ollama the loaded model's size as its scheduler counts it (/api/ps size, its log's \"total memory\").\n\n")
	b.WriteString(stackLines(rows))
	fmt.Fprintf(&b, "| model | runtime | ctx | kv | measured MiB | rig MiB | rig err | gguf-parser MiB | parser err | own MiB | own err | logged model/KV/compute MiB | prompt sentences |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	type sums struct {
		rig, parser, own, worst float64
		n, nOwn                 int
	}
	per := map[string]*sums{}
	var order []string
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | failed: %s | %.0f | | %.0f | | %.0f | | | %d |\n", r.Model, r.Runtime, r.Context, r.KV, strings.ReplaceAll(tail(r.Err, 120), "|", "/"), r.Rig.MiBf(), r.Parser.MiBf(), r.Own.MiBf(), r.PromptSentences)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.1f | %.1f | %+.1f%% | %.0f | %+.1f%% | %.0f | %s | %.0f/%.0f/%.0f | %d |\n",
			r.Model, r.Runtime, r.Context, r.KV, r.Measured.MiBf(), r.Rig.MiBf(), 100*r.RigErr, r.Parser.MiBf(), 100*r.ParserErr,
			r.Own.MiBf(), pct(r.OwnErr), r.Logged.Model.MiBf(), r.Logged.KV.MiBf(), r.Logged.Compute.MiBf(), r.PromptSentences)
		s := per[r.Runtime]
		if s == nil {
			s = &sums{}
			per[r.Runtime] = s
			order = append(order, r.Runtime)
		}
		s.rig += math.Abs(r.RigErr)
		s.parser += math.Abs(r.ParserErr)
		s.worst = max(s.worst, math.Abs(r.RigErr))
		s.n++
		if !math.IsNaN(r.OwnErr) {
			s.own += math.Abs(r.OwnErr)
			s.nOwn++
		}
	}
	if len(order) > 0 {
		b.WriteString("\n")
	}
	for _, rt := range order {
		s := per[rt]
		fmt.Fprintf(&b, "%s, mean |error| over %d runs: rig %.1f%%, gguf-parser-go %.1f%%", rt, s.n, 100*s.rig/float64(s.n), 100*s.parser/float64(s.n))
		if s.nOwn > 0 {
			fmt.Fprintf(&b, ", %s's own %.1f%%", rt, 100*s.own/float64(s.nOwn))
		}
		fmt.Fprintf(&b, "; rig worst %.1f%% (goal: within 10%% in every case)", 100*s.worst)
		var good []Row
		for _, r := range rows {
			if r.Runtime == rt && r.Err == "" {
				good = append(good, r)
			}
		}
		if spread := repeatSpread(good); spread > 0 {
			fmt.Fprintf(&b, "; widest spread between repeats of one configuration %.1f%%", 100*spread)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%s\n", preflight.SimulatedCaveat)
	return b.String()
}

func pct(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*f)
}

// stackLines names, per runtime, the Stack its rows ran on: one line when
// every row ran the same build, as they must.
func stackLines(rows []Row) string {
	var b strings.Builder
	stacks := map[string][]string{} // runtime → distinct stacks, as JSON
	summary := map[string]string{}
	var order []string
	for _, r := range rows {
		if r.Stack.BinarySHA256 == "" {
			continue
		}
		key, _ := json.Marshal(r.Stack)
		if _, ok := stacks[r.Runtime]; !ok {
			order = append(order, r.Runtime)
		}
		if !slices.Contains(stacks[r.Runtime], string(key)) {
			stacks[r.Runtime] = append(stacks[r.Runtime], string(key))
			summary[string(key)] = fmt.Sprintf("%s %s (binary sha256 %s, build flags %q, %d libraries)", r.Runtime, r.Stack.RuntimeVersion, r.Stack.BinarySHA256, r.Stack.BuildFlags, len(r.Stack.Libraries))
		}
	}
	for _, rt := range order {
		var lines []string
		for _, k := range stacks[rt] {
			lines = append(lines, summary[k])
		}
		if len(lines) > 1 {
			fmt.Fprintf(&b, "%s: %d different stacks between rows, so its rows are not one build's: %s\n\n", rt, len(lines), strings.Join(lines, "; "))
			continue
		}
		fmt.Fprintf(&b, "stack: %s\n\n", lines[0])
	}
	return b.String()
}
