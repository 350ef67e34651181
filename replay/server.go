package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/provision"
	"rig/internal/serverspec"
	"rig/runtimes"
	"rig/studies"
)

// How an openai-server row is re-scored (genrecord.RowResult.Method).
const (
	// MethodPromptLogprobs scores the kept prompt and output in one request
	// through the server's own prompt log-probabilities (`echo` with
	// `logprobs` on /v1/completions): no token is generated.
	MethodPromptLogprobs = "prompt-logprobs"
	// MethodRegenerated sends the row's request again with its recorded
	// sampling and seed and compares what comes back, step by step.
	MethodRegenerated = "regenerated"
)

// ErrNoServerSpec is an openai-server record replayed without the server
// its arm described: a record keeps the server's digests, not how to start it.
var ErrNoServerSpec = errors.New("an openai-server record replays on the server its arm describes")

// LoadServerSpec reads the server an openai-server arm describes from path:
// a design (the arm named arm's "server" block; with arm empty, the one arm
// that has one) or a bare server block, as a design writes it. ${REFERENCES} are expanded as the design reader expands
// them (the environment, then installed.env), relative paths against the
// file's folder.
func LoadServerSpec(path, arm string) (runtimes.ServerSpec, error) {
	raw, err := calibrationCap.ReadFile(path)
	if err != nil {
		return runtimes.ServerSpec{}, fmt.Errorf("--server %s: %w", path, err)
	}
	var doc struct {
		Arms []struct {
			Name   string           `json:"name"`
			Server *serverspec.Spec `json:"server"`
		} `json:"arms"`
		serverspec.Spec
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return runtimes.ServerSpec{}, fmt.Errorf("--server %s: neither a design nor a server block (%v)", path, err)
	}
	spec := doc.Spec
	if len(doc.Arms) > 0 {
		var names []string
		found := 0
		for _, a := range doc.Arms {
			if a.Server == nil {
				continue
			}
			names = append(names, a.Name)
			if a.Name == arm || arm == "" {
				spec = *a.Server
				found++
			}
		}
		switch {
		case found == 0 && arm != "":
			return runtimes.ServerSpec{}, fmt.Errorf("--server %s: no arm %q with a server block (arms with one: %s); the record's rows are arm %q's", path, arm, strings.Join(names, ", "), arm)
		case found == 0:
			return runtimes.ServerSpec{}, fmt.Errorf("--server %s: no arm has a server block (an openai-server arm's \"server\")", path)
		case found > 1:
			return runtimes.ServerSpec{}, fmt.Errorf("--server %s: arms %s each have a server block; name one with --server-arm", path, strings.Join(names, ", "))
		}
	}
	lookup, err := provision.Lookup()
	if err != nil {
		return runtimes.ServerSpec{}, err
	}
	resolved, err := studies.Arm{Server: &spec}.ServerSpec(studies.ResolveOptions{Lookup: lookup, BaseDir: filepath.Dir(path)})
	if err != nil {
		return runtimes.ServerSpec{}, fmt.Errorf("--server %s: %w", path, err)
	}
	if err := resolved.Check(); err != nil {
		return runtimes.ServerSpec{}, fmt.Errorf("--server %s: server.%w", path, err)
	}
	return *resolved, nil
}

// startRecordServer starts the record's server from spec, as a trial starts
// it (run.startServer): in its sandbox, at the record's context, its model
// checked against the record's sha256, and its executable and Python
// environment against the record's digests. One that changed is a stale
// asset and nothing is replayed.
func startRecordServer(ctx context.Context, spec runtimes.ServerSpec, pins genrecord.Pins, model provision.Model, work string, noSandbox bool) (*runtimes.OpenAIServer, error) {
	cfg := runtimes.Config{Model: model.Path, ModelName: pins.ModelName, ModelSHA256: model.SHA256,
		Context: pins.ReplayContext(), Slots: max(pins.Slots, 1), WorkDir: work, NoSandbox: noSandbox}
	srv, err := runtimes.StartOpenAIServer(ctx, spec, cfg, runtimes.ServerAssets{ExecutableSHA256: pins.BinarySHA256, EnvSHA256: pins.EnvSHA256}, runtimes.RequestPins{})
	if errors.Is(err, runtimes.ErrStaleServer) {
		return nil, fmt.Errorf("stale_asset: %w; the record was made on another server, so it is not replayed", err)
	}
	return srv, err
}

// serverRescorer re-scores an openai-server's rows: by the server's prompt
// log-probabilities where it gives them for the row's prompt (a plain-text
// prompt the server took on /v1/completions, which it can score again with
// `echo`), else by regenerating the row with its recorded sampling and seed.
// A row the prompt log-probabilities dispute is regenerated and that
// verdict is the row's (replayOnServer), as a prefill pass's is. Methods
// says which way each row went.
type serverRescorer struct {
	srv    *runtimes.OpenAIServer
	header genrecord.Header
	// echo is why the server's prompt log-probabilities are not used ("":
	// they are), learnt once when the server starts.
	echo string
	// regenerateOnly makes every row regenerate (the exact side of a
	// dispute).
	regenerateOnly bool
	methods        *methodLog
}

// methodLog is how each row was re-scored, with why.
type methodLog struct {
	mu sync.Mutex
	by map[string]string
}

func (m *methodLog) set(row, how string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.by == nil {
		m.by = map[string]string{}
	}
	m.by[row] = how
}

func (m *methodLog) get(row string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.by[row]
}

// newServerRescorer asks the server once whether it scores a given text
// (echo), so every row's method is known before any is replayed.
func newServerRescorer(ctx context.Context, srv *runtimes.OpenAIServer, h genrecord.Header) serverRescorer {
	return serverRescorer{srv: srv, header: h, echo: echoProbe(ctx, srv), methods: &methodLog{}}
}

// echoProbe says why the server's prompt log-probabilities cannot be used,
// or "" when they can.
func echoProbe(ctx context.Context, srv *runtimes.OpenAIServer) string {
	if !srv.Speaks(runtimes.APICompletions) {
		return "the server's spec does not list the completions API, where prompt log-probabilities are asked (echo)"
	}
	const probe = "The sky is blue."
	e, err := srv.Echo(ctx, probe, 2)
	if err != nil {
		return fmt.Sprintf("the server refused echo with logprobs on /v1/completions (%s)", short(err.Error()))
	}
	return echoAligned(e, probe)
}

// short cuts a server's message for a summary line.
func short(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return s
}

func (r serverRescorer) Stack(context.Context) (genrecord.Pins, error) {
	p := callrow.Pins(r.srv.Pins(), r.header.Pins.DesignHash, r.header.Pins.StudyID, r.header.Pins.ExecutionID)
	return p, nil
}

// Rescore scores the row by the server's prompt log-probabilities where it
// can, else regenerates it.
func (r serverRescorer) Rescore(ctx context.Context, row genrecord.Row) ([]genrecord.Step, error) {
	msgs := keptMessages(row.RenderedPrompt)
	why := r.echo
	switch {
	case r.regenerateOnly:
		why = "the server's prompt log-probabilities disputed it"
	case msgs != nil:
		why = "a chat row: the server applied its own template, which its API does not show, so there is no prompt text to score"
	case why != "":
	default:
		steps, err := r.scoreByEcho(ctx, row)
		if err == nil {
			r.methods.set(row.RowID, MethodPromptLogprobs)
			return steps, nil
		}
		var na notAligned
		if !errors.As(err, &na) {
			return nil, err
		}
		why = na.why
	}
	r.methods.set(row.RowID, MethodRegenerated+" ("+why+")")
	return r.regenerate(ctx, row, msgs)
}

// regenerate sends the row's request again, as the arm's driver sent it: its
// messages (or plain prompt), recorded sampling and seed, capped at its
// recorded length, with its top-K.
func (r serverRescorer) regenerate(ctx context.Context, row genrecord.Row, msgs []runtimes.Message) ([]genrecord.Step, error) {
	samp := runtimes.Sampling{Temperature: row.Sampling.Temperature, TopK: row.Sampling.TopK, TopP: row.Sampling.TopP, MinP: row.Sampling.MinP, Seed: int(row.Sampling.Seed)}
	req := runtimes.Request{CallID: "replay:" + row.RowID, Messages: msgs, Sampling: samp, MaxTokens: len(row.Output), TopK: row.K}
	if msgs == nil {
		req.Prompt = row.RenderedPrompt
	}
	res, err := r.srv.Generate(ctx, req)
	if err != nil {
		return nil, err
	}
	return callrow.Row(row.RowID, row.Arm, row.Role, genrecord.Sampling{}, row.K, res).Output, nil
}

// keptMessages reads a chat row's rendered prompt, which an openai-server
// row keeps as the messages it sent (the server's template is its own); nil
// for a plain-text prompt.
func keptMessages(rendered string) []runtimes.Message {
	if !strings.HasPrefix(rendered, "[") {
		return nil
	}
	var msgs []runtimes.Message
	if err := json.Unmarshal([]byte(rendered), &msgs); err != nil || len(msgs) == 0 {
		return nil
	}
	for _, m := range msgs {
		if m.Role == "" {
			return nil
		}
	}
	return msgs
}

// notAligned is a row whose kept output the server's scoring of prompt and
// output does not line up with token for token: it is regenerated instead.
type notAligned struct{ why string }

func (n notAligned) Error() string { return n.why }

// scoreByEcho asks the server to score the kept prompt followed by the
// kept text and reads the output's steps from it. The server reads the
// text as its tokenizer splits it; where that is not the kept tokens (a
// token across the prompt's end, another split of the same text), the row
// is not aligned and is regenerated.
func (r serverRescorer) scoreByEcho(ctx context.Context, row genrecord.Row) ([]genrecord.Step, error) {
	kept, eos := row.Output, false
	if n := len(kept); n > 0 && row.StopReason == genrecord.StopEOS && kept[n-1].Text == "" && len(kept[n-1].Bytes) == 0 {
		// The end-of-generation step spells nothing: scoring the text cannot
		// reach it. It is left unchecked, never counted as agreement.
		kept, eos = kept[:n-1], true
	}
	text := string(genrecord.Spelled(genrecord.Row{Output: kept}))
	e, err := r.srv.Echo(ctx, row.RenderedPrompt+text, row.K)
	if err != nil {
		return nil, notAligned{fmt.Sprintf("the server did not score it (%s)", short(err.Error()))}
	}
	steps, err := echoOutput(e, row.RenderedPrompt, text, kept, row.K)
	if err != nil {
		return nil, err
	}
	if eos {
		steps = append(steps, genrecord.Step{Text: "", Top: nil})
	}
	return steps, nil
}

// echoAligned says why the server's echo of text does not line its
// log-probabilities up with its tokens, or "" when it does.
// llama-cpp-python (0.3.36) pairs the scores of position i, which predict
// token i+1, with token i+1 only where it dropped a leading start-of-text
// token from the echo; for a model that adds none it pairs them with token
// i, one token off (and cuts the generated token). Its usage says which:
// the text's own entries are one fewer than the prompt tokens it counts
// exactly when a start-of-text token was dropped. A server that keeps the
// start-of-text token in its echo (the OpenAI API's own reading, with a
// null first log-probability) is read as not aligned too, and its rows
// regenerate: it is untested here.
func echoAligned(e runtimes.EchoLogprobs, text string) string {
	n := len(e.Tokens)
	if len(e.TextOffset) != n || len(e.TokenLogprobs) != n || len(e.TopLogprobs) != n {
		return fmt.Sprintf("the server's echo lists %d tokens, %d offsets, %d log-probabilities and %d top-K: not one entry per token", n, len(e.TextOffset), len(e.TokenLogprobs), len(e.TopLogprobs))
	}
	end, own := utf8.RuneCountInString(text), 0
	for _, off := range e.TextOffset {
		if off < end {
			own++
		}
	}
	if own == 0 {
		return "the server's answer to echo holds no log-probabilities of the text's own tokens"
	}
	if own != e.PromptTokens-1 {
		return fmt.Sprintf("the server's echo holds %d entries for the text's %d tokens (its usage), so it dropped no start-of-text token, and llama-cpp-python then pairs each log-probability with the token before the one it predicts (one token off)", own, e.PromptTokens)
	}
	return ""
}

// echoOutput reads the kept output's steps from the server's scoring of
// prompt followed by text: the entries from the one that begins where the
// prompt ends (offsets count characters, as the server's Python does) to
// the end of the text, each the kept step's token. The entry of the token
// generated after the text begins at its end and is left out.
func echoOutput(e runtimes.EchoLogprobs, prompt, text string, kept []genrecord.Step, k int) ([]genrecord.Step, error) {
	if why := echoAligned(e, prompt+text); why != "" {
		return nil, notAligned{why}
	}
	start, end := utf8.RuneCountInString(prompt), utf8.RuneCountInString(prompt+text)
	first, last := -1, -1
	for j, off := range e.TextOffset {
		if off >= start && off < end {
			if first < 0 {
				first = j
			}
			last = j
		}
	}
	if first < 0 || e.TextOffset[first] != start {
		return nil, notAligned{"the server reads a token across the end of the prompt, so the output's first token is not scored on its own"}
	}
	if n := last - first + 1; n != len(kept) {
		return nil, notAligned{fmt.Sprintf("the server splits the kept text into %d tokens, the record kept %d", n, len(kept))}
	}
	out := make([]genrecord.Step, 0, len(kept))
	for j := first; j <= last; j++ {
		want := kept[j-first]
		if e.Tokens[j] != want.Text {
			return nil, notAligned{fmt.Sprintf("the server splits the kept text into other tokens (%q where the record kept %q)", e.Tokens[j], want.Text)}
		}
		st := genrecord.Step{Text: e.Tokens[j], Bytes: want.Bytes, Logprob: e.TokenLogprobs[j]}
		for t, lp := range e.TopLogprobs[j] {
			st.Top = append(st.Top, genrecord.Alt{Text: t, Bytes: []byte(t), Logprob: lp})
		}
		sort.Slice(st.Top, func(a, b int) bool {
			if st.Top[a].Logprob != st.Top[b].Logprob {
				return st.Top[a].Logprob > st.Top[b].Logprob
			}
			return st.Top[a].Text < st.Top[b].Text
		})
		if len(st.Top) > k {
			// The chosen token, added to the map when not among the K, as
			// the record's steps were cut (runtimes' Generate).
			st.Top = st.Top[:k]
		}
		out = append(out, st)
	}
	return out, nil
}

// replayOnServer replays an openai-server record on the server its arm
// describes (req.Server, which checkReplayMode requires), started as its trials started it: each row by the
// server's prompt log-probabilities where it gives them, else by
// regeneration, a row they dispute regenerated again to decide; the
// summary says which way each row went (RowResult.Method) and counts them.
func replayOnServer(ctx context.Context, req ReplayRequest, h genrecord.Header, model provision.Model, work string) (genrecord.Summary, error) {
	srv, err := startRecordServer(ctx, *req.Server, h.Pins, model, work, req.NoSandbox)
	if err != nil {
		return genrecord.Summary{}, err
	}
	defer srv.Stop(context.Background())
	rs := newServerRescorer(ctx, srv, h)
	sum, err := genrecord.Replay(ctx, req.File, rs, req.Options)
	if err != nil || sum.Status == genrecord.StatusStackDiffers {
		return sum, err
	}
	var disputed []string
	for _, r := range sum.Results {
		if r.Status != genrecord.StatusReproduced && rs.methods.get(r.RowID) == MethodPromptLogprobs {
			disputed = append(disputed, r.RowID)
		}
	}
	if len(disputed) > 0 {
		again := rs
		again.regenerateOnly = true
		exact, err := genrecord.Replay(ctx, req.File, again, genrecord.ReplayOptions{Rows: disputed, WantSum: req.Options.WantSum, Tolerance: req.Options.Tolerance})
		if err != nil {
			return sum, err
		}
		sum = withFallback(sum, exact, "the server's prompt log-probabilities disputed were regenerated")
	}
	noteMethods(&sum, rs.methods)
	return sum, nil
}

// noteMethods writes each row's method and a line counting them.
func noteMethods(sum *genrecord.Summary, methods *methodLog) {
	byEcho, regen := 0, 0
	reasons := map[string]int{}
	for i := range sum.Results {
		m := methods.get(sum.Results[i].RowID)
		sum.Results[i].Method = m
		if m == MethodPromptLogprobs {
			byEcho++
			continue
		}
		regen++
		reasons[strings.TrimSuffix(strings.TrimPrefix(m, MethodRegenerated+" ("), ")")]++
	}
	line := fmt.Sprintf("openai-server: %d rows scored by the server's prompt log-probabilities (echo on /v1/completions), %d regenerated with their recorded sampling and seed", byEcho, regen)
	var why []string
	for r, n := range reasons {
		why = append(why, fmt.Sprintf("%d: %s", n, r))
	}
	sort.Strings(why)
	if len(why) > 0 {
		line += " (" + strings.Join(why, "; ") + ")"
	}
	sum.Warnings = append(sum.Warnings, line)
}

// startSideStack starts a calibration side's stack of kind with the
// provisioned model name, serving slots requests at once: an openai-server
// runs req.Server, any other kind rig's own build.
func startSideStack(ctx context.Context, in provision.Installed, kind, name string, req ReplayCalibrationRequest, work string, slots int) (*replayStack, error) {
	m, ok := in.Models[name]
	if !ok || m.Path == "" {
		if kind != runtimes.OpenAIServerKind && slots == 1 {
			return startReplayStack(ctx, in, kind, name, work, req.NoSandbox) // its error lists the provisioned models
		}
		return nil, fmt.Errorf("model %q is not provisioned (run make setup)", name)
	}
	return startStackOf(ctx, in, kind, m, req, work, slots)
}

// startStackOf starts kind with the model file m, whichever quant it is.
func startStackOf(ctx context.Context, in provision.Installed, kind string, m provision.Model, req ReplayCalibrationRequest, work string, slots int) (*replayStack, error) {
	if kind != runtimes.OpenAIServerKind {
		return launchStack(ctx, in, kind, m, work, req.NoSandbox, false, slots)
	}
	srv, err := runtimes.StartOpenAIServer(ctx, *req.Server, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256,
		Context: 4096, Slots: slots, WorkDir: filepath.Join(work, kind+"-"+m.Name+"-"+strings.ToLower(m.Quant)), NoSandbox: req.NoSandbox},
		runtimes.ServerAssets{}, runtimes.RequestPins{})
	if err != nil {
		return nil, fmt.Errorf("starting %s with %s (%s): %w", kind, m.Name, m.Quant, err)
	}
	h := genrecord.Header{Kind: genrecord.KindHeader, SchemaVersion: genrecord.SchemaVersion,
		Pins: callrow.Pins(srv.Pins(), replayDesignHash, "", "")}
	rs := newServerRescorer(ctx, srv, h)
	return &replayStack{rt: srv, model: m.Name, header: h, slots: max(slots, 1), server: &rs}, nil
}

// FrozenServer is the server a study's frozen arm describes, as its trials
// start it (run's startServer): the design's server block with the
// executable and Python environment the freeze found. nil for an arm that
// runs on no openai-server.
func FrozenServer(snap *studies.Snapshot, arm string) (*runtimes.ServerSpec, error) {
	fa, ok := snap.Arm(arm)
	if !ok {
		return nil, fmt.Errorf("the frozen study has no arm %q", arm)
	}
	b, frozen := fa.Server()
	if !frozen {
		return nil, nil
	}
	d, err := snap.DesignValue()
	if err != nil {
		return nil, err
	}
	for _, a := range d.Arms {
		if a.Name != arm || a.Server == nil {
			continue
		}
		spec := *a.Server
		spec.Command = append([]string{b.Path}, spec.Command[1:]...)
		spec.PythonEnv = b.PythonEnv
		return &spec, nil
	}
	return nil, fmt.Errorf("the frozen design's arm %q has no server block, though its freeze holds a server", arm)
}
