package replay

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/provision"
	"rig/runtimes"
)

// replayStack is one provisioned model running on one runtime, started for
// a replay study (calibration, goals, cost) rather than for a trial.
type replayStack struct {
	rt     runtimes.Runtime
	model  string
	header genrecord.Header
	// scorer, when set, re-scores the rows in prefill mode.
	scorer *prefillScorer
	// slots is how many requests the runtime serves at once; generateRows
	// sends that many together.
	slots int
	// server, on an openai-server stack, re-scores its rows as `rig replay`
	// does (prompt log-probabilities, else regeneration).
	server *serverRescorer
}

// replayDesignHash marks records made by replay's own studies, which have no
// design of their own.
const replayDesignHash = "replay-calibration"

func startReplayStack(ctx context.Context, in provision.Installed, kind, model, work string, noSandbox bool) (*replayStack, error) {
	m, ok := in.Models[model]
	if !ok || m.Path == "" {
		names := make([]string, 0, len(in.Models))
		for n := range in.Models {
			names = append(names, n)
		}
		return nil, fmt.Errorf("model %q is not provisioned (provisioned: %s; run make setup)", model, strings.Join(names, ", "))
	}
	return startReplayStackOf(ctx, in, kind, m, work, noSandbox, false)
}

// startReplayStackOf starts kind with the model file m, whichever quant it
// is; old makes llama-server run as before rig pinned its arithmetic
// (weights repacked, prompts cut for checkpoints), as older records were made.
func startReplayStackOf(ctx context.Context, in provision.Installed, kind string, m provision.Model, work string, noSandbox, old bool) (*replayStack, error) {
	return launchStack(ctx, in, kind, m, work, noSandbox, old, 1)
}

func launchStack(ctx context.Context, in provision.Installed, kind string, m provision.Model, work string, noSandbox, old bool, slots int) (*replayStack, error) {
	rt, err := runtimes.Launch(ctx, in, kind, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256,
		Context: 4096, Slots: slots, WorkDir: filepath.Join(work, kind+"-"+m.Name+"-"+strings.ToLower(m.Quant)), NoSandbox: noSandbox, WeightRepack: old, PromptCheckpoints: old})
	if err != nil {
		return nil, fmt.Errorf("starting %s with %s (%s): %w", kind, m.Name, m.Quant, err)
	}
	h := genrecord.Header{Kind: genrecord.KindHeader, SchemaVersion: genrecord.SchemaVersion,
		Pins: callrow.Pins(rt.Pins(), replayDesignHash, "", "")}
	return &replayStack{rt: rt, model: m.Name, header: h, slots: max(slots, 1)}, nil
}

func (s *replayStack) stop() {
	if s.scorer != nil {
		s.scorer.Stop()
	}
	s.rt.Stop(context.Background())
}

func (s *replayStack) rescorer() rescorer { return rescorer{rt: s.rt, header: s.header} }

// rs is how the stack re-scores rows: by decode steps, or in one batched
// pass when it has a prefill scorer.
func (s *replayStack) rs() genrecord.Rescorer {
	if s.server != nil {
		return *s.server
	}
	if s.scorer != nil {
		return prefillRescorer{rescorer: s.rescorer(), scorer: s.scorer}
	}
	return s.rescorer()
}

// withPrefill starts the stack's prefill scorer on the same model file,
// context, KV cache type and weight repacking as its server.
func (s *replayStack) withPrefill(ctx context.Context, in provision.Installed, model, work string, noSandbox bool) error {
	sc, err := startPrefillScorer(ctx, in, model, s.rt.Pins(), work, noSandbox)
	if err != nil {
		return err
	}
	s.scorer = sc
	return nil
}

// replayAsks and replayTopics make distinct prompts, mostly short, one in
// seven long (longAsk); each prompt is asked once greedy and once sampled.
func replayAsks() []string {
	return []string{"Write one sentence about %s.", "Name three facts about %s.", "What is %s?",
		"Describe %s in a few words.", "Give a short tip about %s.", "Why do people like %s?", longAsk}
}

// longAsk makes a prompt of well over 64 tokens around one topic: a prompt
// that long is one llama-server ran through the CPU flash-attention
// kernel's tiled path, so calibration and the tests hold rows of both kinds.
const longAsk = "Here is a note from a customer, quoted in full. \"I ordered a blue kettle, a set of four mugs, a tea towel and a tin of loose-leaf tea on the third of March. The kettle arrived with a dented lid, the mugs were the wrong colour and the tea never came at all. I have written twice and called once.\" Answer the customer in two sentences, and mention %s."

func replayTopics() []string {
	return []string{"rivers", "bread", "the moon", "bicycles", "owls", "glass", "rain", "chess", "copper", "tea",
		"maps", "bees", "snow", "clocks", "salt", "ferns", "kites", "violins", "deserts", "lighthouses"}
}

// liveRow is a generated row with the messages that produced it.
type liveRow struct {
	row      genrecord.Row
	messages []runtimes.Message
}

// rowPlan says how row i of a replay study is asked: even rows greedy,
// odd rows sampled with their own seed, prompt i/2.
func rowPlan(i int, ask string) ([]runtimes.Message, runtimes.Sampling) {
	asks, topics := replayAsks(), replayTopics()
	p := i / 2
	if ask == "" {
		ask = asks[p%len(asks)]
	}
	q := fmt.Sprintf(ask, topics[(p/len(asks))%len(topics)])
	s := runtimes.Sampling{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1000 + i}
	if i%2 == 1 {
		s.Temperature = 0.8
	}
	return []runtimes.Message{{Role: "user", Content: q}}, s
}

// generateRows makes n kept calls on s, each capped at maxTokens output
// tokens. ask, when set, replaces the built-in questions (a format with one
// %s). A stack with several slots gets them in batches of its slots, each
// batch's calls together, as the runner keeps an arm's trials in flight.
func (s *replayStack) generateRows(ctx context.Context, prefix string, n, maxTokens int, ask string) ([]liveRow, error) {
	out := make([]liveRow, n)
	batch := max(s.slots, 1)
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		errs := make([]error, hi-lo)
		var wg sync.WaitGroup
		for i := lo; i < hi; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i], errs[i-lo] = s.generateRow(ctx, prefix, i, maxTokens, ask)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return out[:lo], err
			}
		}
	}
	return out, nil
}

// generateRow makes row i of generateRows.
func (s *replayStack) generateRow(ctx context.Context, prefix string, i, maxTokens int, ask string) (liveRow, error) {
	msgs, samp := rowPlan(i, ask)
	id := fmt.Sprintf("%s-%03d", prefix, i)
	req := runtimes.Request{CallID: id, Messages: msgs, Sampling: samp, MaxTokens: maxTokens, TopK: genrecord.DefaultK}
	if s.server != nil && s.server.srv.Speaks(runtimes.APICompletions) && (i%4 >= 2 || !s.server.srv.Speaks(runtimes.APIChat)) {
		// Half of a completions server's rows go as plain text, as a
		// completion-format arm's do (all of them where it speaks no
		// chat): those are the rows its prompt log-probabilities can
		// score, so the calibration holds both kinds. A question and an
		// answer's cue, so that the model continues rather than ending.
		req.Messages, req.Prompt = nil, "Question: "+lastContent(msgs)+"\nAnswer:"
	}
	res, err := s.rt.Generate(ctx, req)
	if err == nil && req.Prompt != "" && len(res.Steps) == 0 && s.server.srv.Speaks(runtimes.APIChat) {
		// The model ended the plain prompt at once: a row with no step has
		// nothing to replay, so it is asked as chat instead.
		req.Messages, req.Prompt = msgs, ""
		res, err = s.rt.Generate(ctx, req)
	}
	if err != nil {
		return liveRow{}, fmt.Errorf("%s on %s, row %s: %w", s.model, s.rt.Name(), id, err)
	}
	row := callrow.Row(id, s.model, genrecord.RoleCandidate, callrow.Sampling(samp, maxTokens), genrecord.DefaultK, res)
	row.Kind = genrecord.KindRow
	return liveRow{row: row, messages: msgs}, nil
}

// writeRecord writes rows under pins to path.
func writeRecord(path string, pins genrecord.Pins, rows []genrecord.Row) error {
	w, err := genrecord.OpenWriter(path, pins)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := w.Append(r); err != nil {
			w.Close()
			return fmt.Errorf("%s: row %s: %w", path, r.RowID, err)
		}
	}
	return w.Close()
}

func rowsOf(live []liveRow) []genrecord.Row {
	out := make([]genrecord.Row, len(live))
	for i, l := range live {
		out[i] = l.row
	}
	return out
}

// editOneToken replaces the token at one step with a runner-up from that
// step's recorded top-K and leaves every log-prob as recorded: what editing
// the kept text, without the model, does to a record. pick chooses the step
// among those that can be edited (the end-of-generation step cannot: it has
// no text). ok is false when no step has a usable runner-up.
func editOneToken(row genrecord.Row, pick int) (genrecord.Row, int, bool) {
	type edit struct {
		step int
		alt  genrecord.Alt
	}
	var edits []edit
	for i, st := range row.Output {
		if st.Text == "" && len(st.Bytes) == 0 {
			continue
		}
		for _, a := range st.Top {
			if a.Text == "" && len(a.Bytes) == 0 {
				continue // an end-of-generation token cannot be forced in the middle of a row
			}
			if sameTokenAs(st, a) {
				continue
			}
			edits = append(edits, edit{i, a})
			break
		}
	}
	if len(edits) == 0 {
		return row, -1, false
	}
	e := edits[pick%len(edits)]
	out := row
	out.Output = append([]genrecord.Step(nil), row.Output...)
	st := out.Output[e.step]
	st.ID, st.Text, st.Bytes = e.alt.ID, e.alt.Text, e.alt.Bytes
	out.Output[e.step] = st
	// The text follows the tokens, as an editor who knows the format would
	// keep it: this control is about the tokens, the text-only edit below
	// about the text.
	out.Text = string(genrecord.Spelled(out))
	return out, e.step, true
}

// editText changes one character of the kept text and leaves every token,
// id and log-prob as recorded: what the reporter did to an invoice
// number. A digit is preferred (numbers are what such an edit changes),
// else a letter; pick chooses among them. ok is false for a row whose text
// has neither. It returns the byte changed.
func editText(row genrecord.Row, pick int) (genrecord.Row, int, bool) {
	at := editablePositions(row.Text, 0, len(row.Text), true)
	if len(at) == 0 {
		return row, -1, false
	}
	i := at[pick%len(at)]
	row.Text = row.Text[:i] + string(nextChar(row.Text[i])) + row.Text[i+1:]
	return row, i, true
}

// editPrompt changes one letter of the user's message inside the rendered
// prompt and leaves the kept prompt ids as they were, as an edit of the
// prompt someone reads beside the output would. content is the message as
// sent; ok is false when the rendered prompt does not hold it.
func editPrompt(row genrecord.Row, content string, pick int) (genrecord.Row, int, bool) {
	start := strings.LastIndex(row.RenderedPrompt, content)
	if content == "" || start < 0 {
		return row, -1, false
	}
	at := editablePositions(row.RenderedPrompt, start, start+len(content), false)
	if len(at) == 0 {
		return row, -1, false
	}
	i := at[pick%len(at)]
	row.RenderedPrompt = row.RenderedPrompt[:i] + string(nextChar(row.RenderedPrompt[i])) + row.RenderedPrompt[i+1:]
	return row, i, true
}

// editablePositions lists the ASCII digits of s[lo:hi] when preferDigits and
// there are any, else its ASCII letters.
func editablePositions(s string, lo, hi int, preferDigits bool) []int {
	var digits, letters []int
	for i := lo; i < hi; i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits = append(digits, i)
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letters = append(letters, i)
		}
	}
	if preferDigits && len(digits) > 0 {
		return digits
	}
	return letters
}

// nextChar is the next digit or letter, wrapping within its kind and case.
func nextChar(c byte) byte {
	switch {
	case c == '9':
		return '0'
	case c == 'z':
		return 'a'
	case c == 'Z':
		return 'A'
	}
	return c + 1
}

// forgeOneToken is editOneToken by a forger who also copies the swapped-in
// token's log-prob from the step's recorded top-K, so the edited step is
// consistent with the recorded distribution. Only what follows the edit, or
// a regeneration that diverges at it, can catch such a row.
func forgeOneToken(row genrecord.Row, pick int) (genrecord.Row, int, bool) {
	e, step, ok := editOneToken(row, pick)
	if !ok {
		return e, step, ok
	}
	st := e.Output[step]
	for _, a := range st.Top {
		if sameTokenAs(st, a) {
			lp := a.Logprob
			st.Logprob = &lp
		}
	}
	e.Output[step] = st
	return e, step, true
}

func sameTokenAs(s genrecord.Step, a genrecord.Alt) bool {
	if s.ID != nil && a.ID != nil {
		return *s.ID == *a.ID
	}
	return s.Text == a.Text
}

// claimedStack is a positive control: a stack running one model that
// reports another's pins, so the pin check passes and only the log-probs can
// tell. Rows whose token ids the running model cannot force (ids outside its
// vocabulary, which llama-server refuses) are regenerated from their
// messages instead, and compared by text.
type claimedStack struct {
	inner rescorer
	// scorer, when set, re-scores in prefill mode; inner still regenerates.
	scorer   *prefillScorer
	pins     genrecord.Pins
	messages map[string][]runtimes.Message
	// regenerated collects the ids of rows that took the regeneration path,
	// firstErr the runtime's reason for the first of them.
	regenerated *[]string
	firstErr    *string
}

func (c claimedStack) Stack(context.Context) (genrecord.Pins, error) { return c.pins, nil }

func (c claimedStack) Rescore(ctx context.Context, row genrecord.Row) ([]genrecord.Step, error) {
	var first genrecord.Rescorer = c.inner
	if c.scorer != nil {
		first = prefillRescorer{rescorer: c.inner, scorer: c.scorer}
	}
	steps, err := first.Rescore(ctx, row)
	msgs, known := c.messages[row.RowID]
	if err == nil || !known || ctx.Err() != nil {
		return steps, err
	}
	samp := runtimes.Sampling{Temperature: row.Sampling.Temperature, TopK: row.Sampling.TopK, TopP: row.Sampling.TopP, MinP: row.Sampling.MinP, Seed: int(row.Sampling.Seed)}
	res, gerr := c.inner.rt.Generate(ctx, runtimes.Request{CallID: "regenerate:" + row.RowID, Messages: msgs, Sampling: samp, MaxTokens: len(row.Output), TopK: row.K})
	if gerr != nil {
		return nil, fmt.Errorf("forced re-scoring failed (%v), and so did regeneration: %w", err, gerr)
	}
	*c.regenerated = append(*c.regenerated, row.RowID)
	if *c.firstErr == "" {
		*c.firstErr = err.Error()
		if len(*c.firstErr) > 200 {
			*c.firstErr = (*c.firstErr)[:200] + "…"
		}
	}
	out := callrow.Row(row.RowID, row.Arm, row.Role, genrecord.Sampling{}, row.K, res).Output
	for i := range out {
		// Ids of another vocabulary say nothing; compare the text.
		out[i].ID = nil
		for j := range out[i].Top {
			out[i].Top[j].ID = nil
		}
	}
	return out, nil
}

// workDir is the folder a replay's runtimes work in: dir when the caller
// gave one (kept), else a fresh temporary one that cleanup removes.
func workDir(dir, prefix string) (work string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	if work, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	return work, func() { os.RemoveAll(work) }, nil
}
