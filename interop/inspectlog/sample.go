package inspectlog

import (
	"fmt"
	"strings"

	"rig/genrecord"
	"rig/receipts"
)

// buildSample makes a trial's sample: the last attempt's output, grade and
// receipt; every earlier attempt that gave no score is an error retry.
func buildSample(x Execution, model, measure string, bank Bank, t trial, epoch int, rows map[string][]genrecord.Row) (Sample, error) {
	final := t.attempts[len(t.attempts)-1]
	task, ok := bank.Tasks[t.task]
	if !ok {
		return Sample{}, fmt.Errorf("execution %s: trial %s names task %q, which bank %s (sha256 %s) does not hold", x.ID, final.Trial(), t.task, bank.Path, bank.Hash)
	}
	calls := rows[callID(final)]
	input := task.Input.Prompt
	if len(calls) > 0 && calls[0].RenderedPrompt != "" {
		input = calls[0].RenderedPrompt
	}
	s := Sample{
		ID: t.task, Epoch: epoch, Input: input, Target: keyText(task.Key),
		Metadata: sampleMetadata(final, t.attempts), Store: map[string]any{}, Events: []any{},
		ModelUsage: map[string]Usage{}, RoleUsage: map[string]Usage{}, Attachments: map[string]string{},
		StartedAt: isoTime(t.attempts[0].StartedAt), CompletedAt: isoTime(final.FinishedAt),
		TotalTime: seconds(t.attempts), WorkingTime: float64(final.WallMS) / 1000,
		UUID: stableID(x.Study, x.ID, final.Trial().String()),
	}
	usage := usageOf(final)
	s.ModelUsage[model] = usage
	s.Messages = []Message{{ID: stableID(s.UUID, "input"), Role: "user", Content: input, Source: "input"}}
	s.Output = Output{Model: model, Choices: []Choice{}, Usage: &usage}
	for i, row := range calls {
		text := rowText(row)
		s.Messages = append(s.Messages, Message{ID: stableID(s.UUID, row.RowID), Role: "assistant", Content: text, Source: "generate", Model: model})
		if i == len(calls)-1 {
			secs := row.WallMS / 1000
			s.Output.Choices = []Choice{{Message: s.Messages[len(s.Messages)-1], StopReason: stopReason(row.StopReason), Logprobs: logprobs(row)}}
			s.Output.Completion, s.Output.Time = text, &secs
		}
	}
	missing := 0
	for _, row := range calls {
		missing += row.LogprobsMissingSteps
	}
	s.Metadata["logprobs_missing_steps"] = missing
	for _, a := range t.attempts[:len(t.attempts)-1] {
		if !a.Outcome.Counted() {
			s.ErrorRetries = append(s.ErrorRetries, attemptError(a))
		}
	}
	switch {
	case !final.Outcome.Counted():
		e := attemptError(final)
		s.Error = &e
	case final.Grade != nil:
		s.Scores = map[string]SampleScore{final.Grade.Grader: score(measure, final, s.Output.Completion)}
	}
	return s, nil
}

// score is the trial's grade as Inspect's Score: for a pass-rate job kind
// the value is the pass (1 or 0), the measure rig ranks on; otherwise the
// grader's score. Both, and the grader's name and version, are in its
// metadata.
func score(measure string, r receipts.Receipt, answer string) SampleScore {
	v := r.Grade.Score
	if measure == "pass_rate" {
		v = 0
		if r.Grade.Pass {
			v = 1
		}
	}
	return SampleScore{Value: v, Answer: answer, History: []any{},
		Metadata: map[string]any{"grader": r.Grade.Grader, "grader_version": r.Grade.GraderVersion, "pass": r.Grade.Pass, "score": r.Grade.Score, "outcome": string(r.Outcome)}}
}

// attemptError is an attempt that gave no score, as Inspect's sample error.
func attemptError(r receipts.Receipt) Error {
	msg := fmt.Sprintf("rig attempt %d of %s: %s", r.Attempt, r.Trial(), r.Outcome)
	if r.Detail != "" {
		msg += ": " + r.Detail
	}
	return Error{Message: msg, Traceback: msg, TracebackANSI: msg}
}

// sampleMetadata is the receipt of the trial's last attempt and the list of
// its attempts: what ties the sample to rig's own evidence.
func sampleMetadata(final receipts.Receipt, attempts []receipts.Receipt) map[string]any {
	var tries []map[string]any
	for _, a := range attempts {
		tries = append(tries, map[string]any{"attempt": a.Attempt, "parent_attempt": a.ParentAttempt, "outcome": string(a.Outcome), "generation_sha256": a.GenerationSHA256, "detail": a.Detail})
	}
	return map[string]any{
		"trial_key": final.Trial().String(), "call_id": callID(final), "repeat": final.Repeat,
		"attempt": final.Attempt, "outcome": string(final.Outcome), "counted": final.Outcome.Counted(),
		"model_digest": final.ModelDigest, "generation_sha256": final.GenerationSHA256, "design_hash": final.DesignHash,
		"truncated": final.Truncated, "stop_reason": final.StopReason, "wall_ms": final.WallMS,
		"peak_memory_bytes": final.PeakMemoryBytes, "machine": final.Machine, "no_sandbox": final.NoSandbox,
		"attempts": tries,
	}
}

func usageOf(r receipts.Receipt) Usage {
	u := Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, TotalTokens: r.InputTokens + r.OutputTokens + r.ThinkingTokens}
	if r.ThinkingTokens > 0 {
		n := r.ThinkingTokens
		u.ReasoningTokens = &n
	}
	return u
}

// seconds is the wall time of every attempt of a trial.
func seconds(attempts []receipts.Receipt) float64 {
	var ms int64
	for _, a := range attempts {
		ms += a.WallMS
	}
	return float64(ms) / 1000
}

func rowText(r genrecord.Row) string {
	if r.Text != "" {
		return r.Text
	}
	var b strings.Builder
	for _, s := range r.Output {
		b.WriteString(s.Text)
	}
	return b.String()
}

func stopReason(s genrecord.StopReason) string {
	switch s {
	case genrecord.StopEOS:
		return "stop"
	case genrecord.StopLength:
		return "max_tokens"
	}
	return "unknown"
}

// logprobs is the row's steps in OpenAI's shape. A step whose log-prob the
// runtime did not return (a gap) has none to give and is left out; the
// sample's metadata counts them (logprobs_missing_steps of the row).
func logprobs(r genrecord.Row) *Logprobs {
	if len(r.Output) == 0 {
		return nil
	}
	lp := &Logprobs{Content: []Logprob{}}
	for _, s := range r.Output {
		if s.Logprob == nil {
			continue
		}
		step := Logprob{Token: s.Text, Logprob: *s.Logprob, Bytes: ints(s.Bytes), TopLogprobs: []TopLogprob{}}
		for _, a := range s.Top {
			step.TopLogprobs = append(step.TopLogprobs, TopLogprob{Token: a.Text, Logprob: a.Logprob, Bytes: ints(a.Bytes)})
		}
		lp.Content = append(lp.Content, step)
	}
	return lp
}

func ints(b []byte) []int {
	if b == nil {
		return nil
	}
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}
