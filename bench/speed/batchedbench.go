package speed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"rig/internal/provision"
	"rig/runtimes"
)

// batchedBenchArgs is llama-batched-bench's command line for n sequences
// as llama-server runs them: the same model, threads, cache type and KV
// layout (one stream per sequence of the pinned context, no --kv-unified),
// weights not repacked and threads not spinning, as rig starts the server.
func batchedBenchArgs(req SlotsRequest, m provision.Model, threads, n int) []string {
	args := []string{req.Installed.LlamaBatchedBench,
		"-m", m.Path, "-t", strconv.Itoa(threads), "-c", strconv.Itoa(n * req.Context),
		"-npp", strconv.Itoa(req.PromptTokens), "-ntg", strconv.Itoa(req.GenTokens), "-npl", strconv.Itoa(n),
		"-ctk", "f16", "-ctv", "f16", "--no-repack", "--poll", "0", "--output-format", "jsonl"}
	if req.Device == DeviceCUDA {
		// Every layer on the card, as the server's offload pin puts them.
		args = append(args, "-ngl", "99")
	}
	return args
}

// batchedBenchArgsLine is the command line for the result, with N for the
// sequence count.
func batchedBenchArgsLine(req SlotsRequest, m provision.Model, threads int) string {
	args := batchedBenchArgs(req, m, threads, 1)
	for i := 1; i < len(args); i++ {
		switch args[i-1] {
		case "-npl":
			args[i] = "N"
		case "-c":
			args[i] = "N×" + strconv.Itoa(req.Context)
		}
	}
	return strings.Join(args, " ")
}

// runBatchedBench runs llama-batched-bench once at n sequences and reads
// its one result line.
func runBatchedBench(ctx context.Context, req SlotsRequest, m provision.Model, threads, n int) (BatchedBench, error) {
	// Contained like the runtime it is held against: it reads the same
	// untrusted model file.
	out, err := runtimes.RunTool(ctx, batchedBenchArgs(req, m, threads, n), m.Path, req.NoSandbox, req.Device == DeviceCUDA, nil)
	if err != nil {
		return BatchedBench{}, fmt.Errorf("llama-batched-bench: %w: %s", err, tail(out, 600))
	}
	bb, err := parseBatchedBench([]byte(out))
	if err != nil {
		return bb, fmt.Errorf("llama-batched-bench: %w: %s", err, tail(out, 600))
	}
	if bb.PL != n || bb.PP != req.PromptTokens || bb.TG != req.GenTokens {
		return bb, fmt.Errorf("llama-batched-bench ran pp %d, tg %d, pl %d; asked for %d, %d, %d", bb.PP, bb.TG, bb.PL, req.PromptTokens, req.GenTokens, n)
	}
	return bb, nil
}

// parseBatchedBench reads the one jsonl result line of a run of one
// prompt length, one generation length and one sequence count.
func parseBatchedBench(out []byte) (BatchedBench, error) {
	var rows []BatchedBench
	for line := range bytes.Lines(out) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var bb BatchedBench
		if err := json.Unmarshal(line, &bb); err != nil {
			return bb, fmt.Errorf("reading its result %q: %w", line, err)
		}
		rows = append(rows, bb)
	}
	if len(rows) != 1 {
		return BatchedBench{}, fmt.Errorf("%d result lines, want 1 (a run that does not fit its -c prints none)", len(rows))
	}
	if r := rows[0]; r.T <= 0 || r.TTG <= 0 || r.S <= 0 || r.STG <= 0 {
		return r, fmt.Errorf("a result without times: %+v", r)
	}
	return rows[0], nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
