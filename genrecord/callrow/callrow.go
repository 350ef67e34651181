// Package callrow turns what a runtime returned into the generation record's
// types: a kept call into a genrecord.Row, a runtime's pins into the
// record's header. The trial runner writes rows with it and replay
// re-scores with it, so both read a call the same way.
//
// It is not the record itself (genrecord, which knows no runtime) and it
// decides nothing about which calls are kept or how a study pins its arms:
// callers pass the sampling the call ran under.
package callrow

import (
	"cmp"
	"time"

	"rig/genrecord"
	"rig/internal/offload"
	"rig/runtimes"
)

// Sampling is the record's sampling for a call made with s and capped at
// maxTokens output tokens.
func Sampling(s runtimes.Sampling, maxTokens int) genrecord.Sampling {
	return genrecord.Sampling{Temperature: s.Temperature, TopK: s.TopK, TopP: s.TopP, MinP: s.MinP, Seed: int64(s.Seed), MaxTokens: maxTokens}
}

// Row converts a runtime's call into a generation-record row.
func Row(rowID, arm string, role genrecord.Role, s genrecord.Sampling, k int, r runtimes.Result) genrecord.Row {
	row := genrecord.Row{
		Kind: genrecord.KindRow, RowID: rowID, Arm: arm, Prompt: r.CallID, Role: role,
		RenderedPrompt: r.RenderedPrompt, PromptTokenIDs: r.PromptTokenIDs, K: k,
		Sampling:             s,
		StopReason:           genrecord.StopReason(r.StopReason),
		RuntimeTokenCount:    r.OutputTokens,
		LogprobsMissingSteps: r.LogprobsMissing,
		WallMS:               float64(r.Wall) / float64(time.Millisecond),
		Text:                 r.Text,
	}
	if r.StopReason == "" {
		row.StopReason = genrecord.StopEOS
	}
	for _, st := range r.Steps {
		lp := st.Logprob
		gs := genrecord.Step{Text: st.Text, Bytes: st.Bytes, Logprob: &lp, ID: idPtr(st.ID)}
		for _, t := range st.Top {
			gs.Top = append(gs.Top, genrecord.Alt{ID: idPtr(t.ID), Text: t.Text, Bytes: t.Bytes, Logprob: t.Logprob})
		}
		row.Output = append(row.Output, gs)
	}
	return row
}

// idPtr keeps a token id, or none where the runtime reported none (-1): a
// record without ids is compared by text.
func idPtr(id int) *int {
	if id < 0 {
		return nil
	}
	v := id
	return &v
}

// Pins is the generation record's header for one arm's runtime.
func Pins(rp runtimes.Pins, designHash, study, exec string) genrecord.Pins {
	p := genrecord.Pins{
		ModelSHA256: rp.ModelSHA256, ModelName: rp.ModelName, OllamaDigest: rp.OllamaDigest,
		Runtime: rp.Runtime, RuntimeVersion: rp.RuntimeVersion, BinarySHA256: rp.BinarySHA256,
		Libraries: rp.Libraries, BuildFlags: cmp.Or(rp.BuildFlags, "unrecorded"), WeightRepack: rp.WeightRepack, PromptCheckpoints: rp.PromptCheckpoints, MachineLine: rp.Machine.String(),
		DesignHash: designHash, StudyID: study, ExecutionID: exec, Context: rp.Context,
		EnvSHA256: rp.EnvSHA256, ServerRequest: rp.ServerRequest,
	}
	if rp.Slots > 1 {
		p.Slots = rp.Slots
	}
	// The CPU path writes no offload pin, so its records read as every
	// record before the pin did.
	if rp.Offload.BackendName() != offload.BackendCPU {
		o := rp.Offload
		p.Offload = &o
	}
	return p
}
