package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/runtimes"
)

// rescorer re-scores kept rows through the pinned runtime: llama-server forces
// the kept tokens with a grammar of token-id literals, so one request re-scores
// a whole row; Ollama's API cannot force tokens, so its path regenerates the
// row in raw mode with the recorded seed and sampling, and a row that
// diverges is a mismatch from the step where it diverged.
type rescorer struct {
	rt     runtimes.Runtime
	header genrecord.Header
}

func (r rescorer) Stack(context.Context) (genrecord.Pins, error) {
	p := callrow.Pins(r.rt.Pins(), r.header.Pins.DesignHash, r.header.Pins.StudyID, r.header.Pins.ExecutionID)
	return p, nil
}

func (r rescorer) Rescore(ctx context.Context, row genrecord.Row) ([]genrecord.Step, error) {
	samp := runtimes.Sampling{Temperature: row.Sampling.Temperature, TopK: row.Sampling.TopK, TopP: row.Sampling.TopP, MinP: row.Sampling.MinP, Seed: int(row.Sampling.Seed)}
	var res runtimes.Result
	var err error
	switch rt := r.rt.(type) {
	case *runtimes.LlamaServer:
		ids, _, ferr := genrecord.ForcedTokens(row)
		if ferr != nil {
			return nil, ferr
		}
		req := runtimes.Request{CallID: "replay:" + row.RowID, PromptTokens: row.PromptTokenIDs,
			Grammar: genrecord.ForcedGrammar(ids), MaxTokens: len(row.Output), TopK: row.K, Sampling: samp}
		if len(req.PromptTokens) == 0 {
			// A harness's call (Aider through the recording proxy) keeps the
			// chat request it sent, not token ids: render it again with the
			// same template, then force the kept tokens as for any row.
			msgs, err := runtimes.ChatMessages(row.RenderedPrompt)
			if err != nil {
				return nil, fmt.Errorf("row %s: no prompt token ids, and its rendered prompt is not a kept chat request (%v), so it cannot be rendered again", row.RowID, err)
			}
			req.Messages = msgs
		}
		res, err = rt.Generate(ctx, req)
	case *runtimes.Ollama:
		if _, cerr := runtimes.ChatMessages(row.RenderedPrompt); cerr == nil {
			// A harness call kept as the chat request it sent to Ollama's
			// OpenAI-compatible endpoint (records made before the proxy
			// answered through the driver): send it there again as it was.
			res, err = rt.OpenAIChat(ctx, []byte(row.RenderedPrompt))
			break
		}
		res, err = rt.GenerateRaw(ctx, row.RenderedPrompt, samp, len(row.Output), row.K)
	case *runtimes.OpenAIServer:
		// A control re-scored by another model's server (calibration):
		// regenerated, as a row the server's prompt log-probabilities
		// dispute is.
		return serverRescorer{srv: rt, header: r.header, regenerateOnly: true, methods: &methodLog{}}.Rescore(ctx, row)
	default:
		return nil, fmt.Errorf("replay: no rescoring path for %s", r.rt.Name())
	}
	if err != nil {
		return nil, err
	}
	return callrow.Row(row.RowID, row.Arm, row.Role, genrecord.Sampling{}, row.K, res).Output, nil
}

// Tokenize and Detokenize are the pinned runtime's tokenizer, with which
// replay checks a row's kept prompt and text against its kept ids (see
// genrecord.CheckFields). llama-server has /tokenize and /detokenize;
// Ollama's API has neither, so on Ollama only the text against the kept
// steps' bytes is checked, and its rows keep no prompt ids to check.
func (r rescorer) Tokenize(ctx context.Context, text string) ([]int, error) {
	if ls, ok := r.rt.(*runtimes.LlamaServer); ok {
		return ls.Tokenize(ctx, text)
	}
	return nil, genrecord.ErrNoTokenizer
}

func (r rescorer) Detokenize(ctx context.Context, ids []int) ([]byte, error) {
	if ls, ok := r.rt.(*runtimes.LlamaServer); ok {
		return ls.Detokenize(ctx, ids)
	}
	return nil, genrecord.ErrNoTokenizer
}

// replayLaunch is the runtime build and config that replay a record made
// with pins: the stack is this machine's own build of the record's backend
// (replay compares it with the record's, never borrows the record's build
// flags), started the record's way. Weight repacking, prompt cuts for
// checkpoints and the card (layers, flash attention) each give other
// log-probs for the same tokens; the context decides only which rows fit,
// and is the arm's, so that every row the arm allowed replays.
func replayLaunch(pins genrecord.Pins, kind string, model provision.Model, work string, noSandbox bool) (string, runtimes.Config) {
	return offload.Component(kind, pins.OffloadPin().Backend), runtimes.Config{
		Model: model.Path, ModelName: pins.ModelName, ModelSHA256: model.SHA256,
		Context: pins.ReplayContext(), WorkDir: work, NoSandbox: noSandbox,
		WeightRepack: pins.Repacked(), PromptCheckpoints: pins.Checkpointed(), Offload: pins.OffloadPin()}
}

// ReplayRequest is `rig replay`.
type ReplayRequest struct {
	File    string
	Runtime string // empty: the runtime that made the record
	Options genrecord.ReplayOptions
	// Calibration, when set, is a file written by `rig replay calibrate`;
	// the tolerance calibrated for the replaying runtime is used.
	Calibration string
	WorkDir     string
	NoSandbox   bool
	// Store, when set, is the study's store.bolt: the record's sha256 is
	// checked against its trials' receipts before anything starts.
	// Receipts does the same with receipts already read (the daemon's).
	Store    string
	Receipts []ReceiptSum
	// Mode is ModeExact (empty) or ModePrefill.
	Mode string
	// Server is the server an openai-server record's arm describes
	// (LoadServerSpec): the record keeps its digests, not how to start it.
	Server *runtimes.ServerSpec
}

// ReplayRecord verifies the record's pins against the stack this machine would run,
// starts the pinned runtime in its sandbox and re-scores the selected rows.
func ReplayRecord(ctx context.Context, req ReplayRequest) (genrecord.Summary, error) {
	rd, err := genrecord.OpenReader(req.File)
	if err != nil {
		return genrecord.Summary{}, err
	}
	h := rd.Header()
	rd.Close()
	receiptCheck, err := holdToReceipts(ctx, &req)
	if err != nil {
		return genrecord.Summary{}, err
	}
	kind := req.Runtime
	if kind == "" {
		kind = h.Pins.Runtime
	}
	mode := modeOf(req.Mode)
	if err := checkReplayMode(req, h.Pins, kind, mode); err != nil {
		return genrecord.Summary{}, err
	}
	tol, err := replayTolerance(&req, kind, h.Pins, mode)
	if err != nil {
		return genrecord.Summary{}, err
	}
	in, err := provision.Load()
	if err != nil {
		return genrecord.Summary{}, err
	}
	model, ok := in.ModelBySHA256(h.Pins.ModelSHA256)
	if !ok {
		return genrecord.Summary{}, fmt.Errorf("%s: the record's model (sha256 %s, %s) is not provisioned here; replay needs the pinned model file", req.File, h.Pins.ModelSHA256, h.Pins.ModelName)
	}
	work, cleanup, err := workDir(req.WorkDir, "rig-replay-")
	if err != nil {
		return genrecord.Summary{}, err
	}
	defer cleanup()
	if kind == runtimes.OpenAIServerKind {
		sum, err := replayOnServer(ctx, req, h, model, filepath.Join(work, kind))
		sum.ToleranceSource, sum.ReceiptCheck = tol.Source, receiptCheck
		if tol.Warning != "" {
			sum.Warnings = append(sum.Warnings, tol.Warning)
		}
		return sum, err
	}
	component, cfg := replayLaunch(h.Pins, kind, model, filepath.Join(work, kind), req.NoSandbox)
	rt, err := runtimes.Launch(ctx, in, component, cfg)
	if err != nil {
		return genrecord.Summary{}, err
	}
	defer rt.Stop(context.Background())
	var rs genrecord.Rescorer = rescorer{rt: rt, header: h}
	stack := ""
	if mode == ModePrefill {
		sc, err := startPrefillScorer(ctx, in, model.Path, rt.Pins(), work, req.NoSandbox)
		if err != nil {
			return genrecord.Summary{}, err
		}
		defer sc.Stop()
		rs, stack = prefillRescorer{rescorer: rescorer{rt: rt, header: h}, scorer: sc}, sc.fingerprint()
	}
	sum, err := genrecord.Replay(ctx, req.File, rs, req.Options)
	if err == nil && mode == ModePrefill && sum.Status != genrecord.StatusStackDiffers {
		var eerr error
		if sum, eerr = recheckDisputed(ctx, req, rescorer{rt: rt, header: h}, sum); eerr != nil {
			return sum, eerr
		}
	}
	sum.ToleranceSource, sum.ReceiptCheck, sum.Mode, sum.Stack = tol.Source, receiptCheck, mode, stack
	if tol.Warning != "" {
		sum.Warnings = append(sum.Warnings, tol.Warning)
	}
	return sum, err
}

// holdToReceipts, when req names a store or receipts, checks the record
// against the sums they recorded and makes the whole-file sum the one the
// replay holds it to. It returns what the receipts matched.
func holdToReceipts(ctx context.Context, req *ReplayRequest) (string, error) {
	if req.Store == "" && req.Receipts == nil {
		return "", nil
	}
	sums := req.Receipts
	if req.Store != "" {
		var err error
		if sums, err = StoreSums(ctx, req.Store, req.File); err != nil {
			return "", err
		}
	}
	whole, matched, err := CheckReceipts(req.File, sums)
	if err != nil {
		return "", err
	}
	if req.Options.WantSum != "" && !strings.EqualFold(strings.TrimPrefix(req.Options.WantSum, "sha256:"), whole) {
		return "", fmt.Errorf("%s: --sha256 %s is not what the receipts in %s recorded (%s); give one or the other", req.File, req.Options.WantSum, req.Store, whole)
	}
	// Replay hashes the file again as it reads it, so a record changed
	// after this check is refused too.
	req.Options.WantSum = whole
	return matched, nil
}

// checkReplayMode refuses a mode that is not known, or that cannot replay
// this record on runtime kind.
func checkReplayMode(req ReplayRequest, pins genrecord.Pins, kind, mode string) error {
	switch {
	case kind == runtimes.OpenAIServerKind && req.Server == nil:
		return fmt.Errorf("%s: %w, and the record keeps its digests (binary_sha256 %.12s), not how to start it: give the study's design, or a file holding the arm's \"server\" block, with --server", req.File, ErrNoServerSpec, pins.BinarySHA256)
	case mode != ModeExact && mode != ModePrefill:
		return fmt.Errorf("--mode %q: the modes are exact (decode steps) and prefill (one batched pass)", req.Mode)
	case mode == ModePrefill && kind != "llama-server":
		return fmt.Errorf("%s: %w for %s: %s", req.File, ErrNoPrefill, kind, noPrefillWhy(kind))
	case pins.Offload == nil && runtimes.LineBackend(pins.MachineLine) == offload.BackendCUDA:
		// Made on the card before records carried the offload pin: replay
		// cannot start the runtime the record's way, and a CPU pass would
		// only report mismatches.
		return fmt.Errorf("%s: the record was made on the card (its machine line says runtime backend cuda) before records carried the offload pin, so replay cannot start its runtime the same way; its receipts hold the pin (offload_backend, gpu_layers, flash_attention, kv_cache_on_host)", req.File)
	case mode == ModePrefill && pins.OffloadPin().BackendName() != offload.BackendCPU:
		return fmt.Errorf("%s: %w for a record made on the card (offload backend %s): the prefill scorer is built against the CPU llama.cpp only, and a CPU pass would not be the record's stack; replay it with --mode exact where setup built the %s runtime (docs/gpu.md)",
			req.File, ErrNoPrefill, pins.OffloadPin().BackendName(), offload.Component(kind, pins.OffloadPin().Backend))
	}
	return nil
}

// replayTolerance sets req's tolerance from the calibration it names, or,
// for prefill with none given, to rig's default, and says where it came from.
func replayTolerance(req *ReplayRequest, kind string, pins genrecord.Pins, mode string) (ReplayTolerance, error) {
	var tol ReplayTolerance
	if req.Calibration != "" {
		if req.Options.Tolerance != (genrecord.Tolerance{}) {
			return tol, errToleranceTwice
		}
		var err error
		if tol, err = LoadReplayTolerance(req.Calibration, kind, pins, mode); err != nil {
			return tol, err
		}
		req.Options.Tolerance = tol.Tolerance
	} else if mode == ModePrefill && req.Options.Tolerance == (genrecord.Tolerance{}) {
		// A batched pass is never bit-identical to decoding: with no
		// calibration, rig's default, measured as docs/generations.md says.
		req.Options.Tolerance = DefaultPrefillTolerance
		tol.Source = DefaultPrefillToleranceSource
	}
	return tol, nil
}

// recheckDisputed replays by decode steps the rows the batched pass
// disputed: prefill screens, the exact path decides.
func recheckDisputed(ctx context.Context, req ReplayRequest, exactRS genrecord.Rescorer, sum genrecord.Summary) (genrecord.Summary, error) {
	var disputed []string
	for _, r := range sum.Results {
		if r.Status != genrecord.StatusReproduced {
			disputed = append(disputed, r.RowID)
		}
	}
	if len(disputed) == 0 {
		return sum, nil
	}
	exact, err := genrecord.Replay(ctx, req.File, exactRS, genrecord.ReplayOptions{Rows: disputed, WantSum: req.Options.WantSum})
	if err != nil {
		return sum, err
	}
	return withFallback(sum, exact, "the prefill pass disputed were checked again by decode steps (--mode exact)"), nil
}

// withFallback puts the exact replays of the rows a prefill pass disputed
// in place of their prefill results, and counts again.
// what says which rows went again, and how ("… rows WHAT: N reproduced there").
func withFallback(prefill, exact genrecord.Summary, what string) genrecord.Summary {
	byID := map[string]genrecord.RowResult{}
	for _, r := range exact.Results {
		byID[r.RowID] = r
	}
	out := prefill
	out.Results = make([]genrecord.RowResult, len(prefill.Results))
	out.Reproduced, out.Mismatched, out.Errors, out.MaxAbsDiff = 0, 0, 0, 0
	var replayMS, wallMS float64
	again, held := 0, 0
	for i, r := range prefill.Results {
		if e, ok := byID[r.RowID]; ok {
			e.ReplayMS += r.ReplayMS
			r = e
			again++
			if r.Status == genrecord.StatusReproduced {
				held++
			}
		}
		out.Results[i] = r
		switch r.Status {
		case genrecord.StatusReproduced:
			out.Reproduced++
		case genrecord.StatusMismatch:
			out.Mismatched++
		default:
			out.Errors++
		}
		out.MaxAbsDiff = max(out.MaxAbsDiff, r.Comparison.MaxAbsDiff)
		if r.WallMS > 0 {
			replayMS, wallMS = replayMS+r.ReplayMS, wallMS+r.WallMS
		}
	}
	switch {
	case out.Mismatched > 0:
		out.Status = genrecord.StatusMismatch
	case out.Errors > 0:
		out.Status = genrecord.StatusError
	default:
		out.Status = genrecord.StatusReproduced
	}
	if wallMS > 0 {
		out.CostRatio = replayMS / wallMS
	}
	out.ElapsedSecs += exact.ElapsedSecs
	out.Fallback, out.FallbackHeld = again, held
	out.Warnings = append(out.Warnings, fmt.Sprintf("%d of %d rows %s: %d reproduced there", again, len(prefill.Results), what, held))
	return out
}
