package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"rig/runtimes"
)

func printSmoke(w io.Writer, p runtimes.Pins, r runtimes.Result, total time.Duration) {
	fmt.Fprintf(w, "  runtime   %s (binary sha256 %s…, %d libraries hashed)\n", p.RuntimeVersion, p.BinarySHA256[:12], len(p.Libraries))
	fmt.Fprintf(w, "  model     %s sha256 %s…", p.ModelName, p.ModelSHA256[:12])
	if p.OllamaDigest != "" {
		fmt.Fprintf(w, " (ollama digest %s…)", p.OllamaDigest[:min(12, len(p.OllamaDigest))])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  template  %s\n", p.ChatTemplate)
	c := p.Containment
	if c.Sandboxed {
		fmt.Fprintf(w, "  sandbox   %s (rig in %s), loopback only: %v, interfaces: %s\n", c.NetNS, c.ParentNetNS, c.LoopbackOnly, strings.Join(c.Interfaces, ", "))
		fmt.Fprintf(w, "  contained %s\n", c.Confinement.Summary())
	} else {
		fmt.Fprintln(w, "  sandbox   NONE (--no-sandbox; recorded on every receipt)")
	}
	fmt.Fprintf(w, "  output    %q\n", r.Text)
	fmt.Fprintf(w, "  tokens    prompt %d, thinking %d, output %d, stop %s, truncated %v, log-probs missing %d\n",
		r.PromptTokens, r.ThinkingTokens, r.OutputTokens, r.StopReason, r.Truncated, r.LogprobsMissing)
	for i, st := range r.Steps {
		if i == 3 {
			break
		}
		var top []string
		for _, t := range st.Top {
			top = append(top, fmt.Sprintf("%q %.3f", t.Text, t.Logprob))
		}
		fmt.Fprintf(w, "  step %d    %q (id %d) %.4f | top-%d: %s\n", i, st.Text, st.ID, st.Logprob, len(st.Top), strings.Join(top, ", "))
	}
	fmt.Fprintf(w, "  timings   wall %s; prompt %.0f tok/s, output %.1f tok/s (runtime's own)\n", r.Wall.Round(time.Millisecond), r.Timings.PromptPerSecond, r.Timings.OutputPerSecond)
	fmt.Fprintf(w, "  memory    peak %.1f MiB (%s)\n", float64(r.PeakMemory)/(1<<20), r.PeakSource)
	fmt.Fprintf(w, "  total     %s including start, load and stop\n", total.Round(time.Millisecond))
}
