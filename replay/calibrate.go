package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/runtimes"
	"rig/studies"
)

// ReplayCalibrationRequest is `rig replay calibrate`.
type ReplayCalibrationRequest struct {
	Runtimes    []string // "llama-server", "ollama"
	Model       string   // the model whose replay is calibrated (registry name)
	Control     string   // another model, whose rows are the swapped-model control
	Rows        int      // genuine rows generated on Model, per runtime
	ControlRows int      // rows generated on Control, per runtime
	MaxTokens   int      // output cap of every generated row
	WorkDir     string   // records and runtime homes; a temporary directory when empty
	NoSandbox   bool
	// Mode is ModeExact (empty) or ModePrefill: how replay re-scores.
	Mode string
	// Slots are the slot counts to calibrate at (none: one): at N the
	// genuine rows are generated N at a time on a runtime serving N slots,
	// as an arm with pins.slots N keeps them, and replayed alone as replay
	// does. Each count gets its own tolerance per runtime.
	Slots []int
	// Server is the server an "openai-server" runtime is calibrated on
	// (LoadServerSpec): the tolerance is that server's, matched to a record
	// by the server's executable and environment digests.
	Server *runtimes.ServerSpec
}

// Sides of a replay group.
const (
	SideGenuine = "genuine"
	SideControl = "control"
)

// ReplayGroup is one set of rows replayed one way: genuine rows on their own
// stack (the noise floor), or a positive control that replay must catch.
type ReplayGroup struct {
	Name   string `json:"name"`
	Side   string `json:"side"`
	Rows   int    `json:"rows"`
	Greedy int    `json:"greedy_rows"`
	// Exact counts rows reproduced with zero tolerance: every token and
	// every log-prob equal.
	Exact int `json:"exactly_reproduced"`
	// Changed counts rows where a token differed, steps were missing, a
	// kept field (text, rendered prompt) is not what the tokens say, or the
	// runtime refused the row: caught whatever the tolerance.
	Changed int `json:"token_changed"`
	Refused int `json:"refused"`
	// Caught counts rows the calibrated tolerance fails.
	Caught   int     `json:"caught"`
	MaxToken float64 `json:"max_token_nats"` // over rows not Changed
	MaxRow   float64 `json:"max_row_mean_nats"`
	MinToken float64 `json:"min_token_nats"`
	MinRow   float64 `json:"min_row_mean_nats"`
	Note     string  `json:"note,omitempty"`

	distances []genrecord.Distance
	results   []genrecord.RowResult
}

// RuntimeCalibration is the calibration on one runtime.
type RuntimeCalibration struct {
	Runtime string `json:"runtime"`
	// Slots is the slot count the genuine rows were generated at (absent:
	// one, as every calibration before slots); replay takes the entry of
	// the record's own slot count (genrecord.Pins.Slots).
	Slots       int                   `json:"slots,omitempty"`
	Pins        genrecord.Pins        `json:"pins"`
	Groups      []ReplayGroup         `json:"groups"`
	Calibration genrecord.Calibration `json:"calibration"`
	// Models, in prefill mode, is a calibration per model: a batched pass
	// drifts from decoding by an amount that depends on the model and its
	// quant (its kernels), so one tolerance across models would either
	// reject one model's genuine rows or accept another's controls. Replay
	// takes the entry of the record's model.
	Models []ModelCalibration `json:"models,omitempty"`
}

// ModelCalibration is one model's tolerance: its genuine rows against the
// controls made of its rows.
type ModelCalibration struct {
	Model       string                `json:"model"`
	ModelSHA256 string                `json:"model_sha256"`
	Calibration genrecord.Calibration `json:"calibration"`
}

// ReplayCalibration is what `rig replay calibrate` measures and writes.
type ReplayCalibration struct {
	Model       string               `json:"model"`
	Control     string               `json:"control_model"`
	Rows        int                  `json:"rows"`
	ControlRows int                  `json:"control_rows"`
	MaxTokens   int                  `json:"max_tokens"`
	Runtimes    []RuntimeCalibration `json:"runtimes"`
	// OtherQuant names the second quants of Model and Control used as
	// controls, if any ("; " between them).
	OtherQuant  string   `json:"other_quant,omitempty"`
	NotMeasured []string `json:"not_measured"`
	// Mode is how the rows were re-scored ("exact" when empty: files
	// written before prefill existed); replay uses a calibration only in
	// the mode it was measured in.
	Mode string `json:"mode,omitempty"`
}

// CalibrateReplay measures, on each runtime, the distance between genuine
// rows and their replay on the same stack (the noise floor), and between
// positive controls and their replay: one-token edits of the kept text,
// edits of the kept text alone and of the rendered prompt alone, and
// each model's rows re-scored by the other model on a stack that claims the
// recorded pins. It sets the per-token and per-row tolerance between the two
// with genrecord.Calibrate and reports the error rates observed.
func CalibrateReplay(ctx context.Context, req ReplayCalibrationRequest) (ReplayCalibration, error) {
	out := ReplayCalibration{Model: req.Model, Control: req.Control, Rows: req.Rows, ControlRows: req.ControlRows, MaxTokens: req.MaxTokens, Mode: modeOf(req.Mode)}
	if out.Mode != ModeExact && out.Mode != ModePrefill {
		return out, fmt.Errorf("replay calibrate: --mode %q: the modes are exact and prefill", req.Mode)
	}
	if req.Model == req.Control {
		return out, fmt.Errorf("replay calibrate: --control %q is the model being calibrated; the swapped-model control needs another model", req.Control)
	}
	if req.Rows < 1 || req.ControlRows < 1 || req.MaxTokens < 1 {
		return out, fmt.Errorf("replay calibrate: rows (%d), control rows (%d) and max tokens (%d) must each be at least 1", req.Rows, req.ControlRows, req.MaxTokens)
	}
	in, err := provision.Load()
	if err != nil {
		return out, err
	}
	work, cleanup, err := workDir(req.WorkDir, "rig-replay-calibrate-")
	if err != nil {
		return out, err
	}
	defer cleanup()
	// No registry package carries a second quant of the bundled models; set-up
	// makes one of each with llama-quantize. Without one the control is
	// named as not measured rather than left out silently.
	var quants []string
	for _, name := range []string{req.Model, req.Control} {
		if oq, ok := in.OtherQuants[name]; ok {
			quants = append(quants, fmt.Sprintf("%s %s (%s)", oq.Name, oq.Quant, oq.DerivedFrom))
		} else {
			out.NotMeasured = append(out.NotMeasured, fmt.Sprintf("no other quant of %s: no registry package carries one and set-up made none here; not measured", name))
		}
	}
	out.OtherQuant = strings.Join(quants, "; ")
	slotCounts := req.Slots
	if len(slotCounts) == 0 {
		slotCounts = []int{1}
	}
	for _, n := range slotCounts {
		if n < 1 || n > studies.MaxSlots {
			return out, fmt.Errorf("replay calibrate: --slots %d: want 1 to %d (the slot counts the study's arms run at)", n, studies.MaxSlots)
		}
	}
	for _, kind := range req.Runtimes {
		if kind == runtimes.OpenAIServerKind && req.Server == nil {
			return out, fmt.Errorf("replay calibrate: --runtime %s: %w; give it with --server (the study's design, or a file holding the arm's \"server\" block)", kind, ErrNoServerSpec)
		}
		if out.Mode == ModePrefill && kind != "llama-server" {
			out.NotMeasured = append(out.NotMeasured, fmt.Sprintf("%s: %s", kind, noPrefillWhy(kind)))
			continue
		}
		for _, n := range slotCounts {
			rc, err := calibrateOn(ctx, in, kind, n, req, filepath.Join(work, kind, fmt.Sprintf("slots-%d", n)))
			if err != nil {
				return out, err
			}
			out.Runtimes = append(out.Runtimes, rc)
		}
	}
	return out, nil
}

func calibrateOn(ctx context.Context, in provision.Installed, kind string, slots int, req ReplayCalibrationRequest, work string) (RuntimeCalibration, error) {
	rc := RuntimeCalibration{Runtime: kind}
	if slots > 1 {
		rc.Slots = slots
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return rc, err
	}
	prefill := modeOf(req.Mode) == ModePrefill
	// Both models get the same controls: each one's tolerance is set
	// between its own genuine rows and edits, swaps and quants of its rows.
	sides := []*calibrationSide{{of: "m", name: req.Model, rows: req.Rows}, {of: "c", name: req.Control, rows: req.ControlRows}}
	stop, err := startSides(ctx, in, kind, slots, req, work, sides)
	defer stop()
	if err != nil {
		return rc, err
	}
	rc.Pins = sides[0].generator().header.Pins

	set := replaySet{work: work}
	if err := generateSides(ctx, kind, sides, set, req.MaxTokens); err != nil {
		return rc, err
	}

	slog.InfoContext(ctx, "replay calibrate: replaying", "runtime", kind)
	var plan []calibrationStep
	for i, sd := range sides {
		peer := sides[1-i]
		steps, err := sd.plan(kind, set, peer, i == 0)
		if err != nil {
			return rc, err
		}
		plan = append(plan, steps...)
	}
	if err := replayAndCalibrate(ctx, &rc, kind, plan, sides, prefill); err != nil {
		return rc, err
	}
	for i := range rc.Groups {
		g := &rc.Groups[i]
		tol := rc.Calibration.Tolerance
		if mc, ok := rc.modelOf(plan[i].of, req); ok {
			tol = mc.Calibration.Tolerance // each model's rows at its own tolerance
		}
		for _, d := range g.distances {
			if tol.Catches(d) {
				g.Caught++
			}
		}
	}
	return rc, nil
}

// startSides starts each side's stacks: the one that replays (with its
// prefill scorer in that mode), its other quant where set-up made one, and
// at more than one slot the stack that generates its rows in batches. stop
// stops every one started, whatever the error.
func startSides(ctx context.Context, in provision.Installed, kind string, slots int, req ReplayCalibrationRequest, work string, sides []*calibrationSide) (func(), error) {
	prefill := modeOf(req.Mode) == ModePrefill
	var stops []func()
	stop := func() {
		for _, f := range stops {
			f()
		}
	}
	for _, sd := range sides {
		st, err := startSideStack(ctx, in, kind, sd.name, req, work, 1)
		if err != nil {
			return stop, err
		}
		stops = append(stops, st.stop)
		sd.stack = st
		if prefill {
			// Each stack gets its own scorer on its own model file: the
			// swapped-model control scores through the other model's scorer.
			if err := st.withPrefill(ctx, in, in.Models[sd.name].Path, filepath.Join(work, "prefill-"+sd.of), req.NoSandbox); err != nil {
				return stop, err
			}
		}
		if oq, ok := in.OtherQuants[sd.name]; ok {
			other, err := startStackOf(ctx, in, kind, oq, req, work, 1)
			if err != nil {
				return stop, err
			}
			stops = append(stops, other.stop)
			if prefill {
				if err := other.withPrefill(ctx, in, oq.Path, filepath.Join(work, "prefill-other-"+sd.of), req.NoSandbox); err != nil {
					return stop, err
				}
			}
			sd.other, sd.otherQuant = other, oq.Quant
		}
		if slots > 1 {
			// The genuine rows come from a stack serving slots at once;
			// replay re-scores them alone on sd.stack, as it re-scores a
			// batched study's rows.
			gen, err := startSideStack(ctx, in, kind, sd.name, req, filepath.Join(work, fmt.Sprintf("slots-%d", slots)), slots)
			if err != nil {
				return stop, err
			}
			stops = append(stops, gen.stop)
			sd.gen = gen
		}
	}
	return stop, nil
}

// generateSides has each side's stack generate its rows and records them in
// set, as the genuine rows the plan replays.
func generateSides(ctx context.Context, kind string, sides []*calibrationSide, set replaySet, maxTokens int) error {
	for _, sd := range sides {
		slog.InfoContext(ctx, "replay calibrate: generating", "runtime", kind, "model", sd.name, "rows", sd.rows)
		live, err := sd.generator().generateRows(ctx, sd.of, sd.rows, maxTokens, "")
		if err != nil {
			return err
		}
		sd.live = live
		if sd.rec, err = set.record(sd.of+".jsonl", sd.generator().header.Pins, rowsOf(live)); err != nil {
			return err
		}
	}
	return nil
}

// replayAndCalibrate replays each step of plan into rc.Groups and sets the
// tolerance between the genuine rows' distances and the controls': one for
// the runtime and, for prefill, one per model.
func replayAndCalibrate(ctx context.Context, rc *RuntimeCalibration, kind string, plan []calibrationStep, sides []*calibrationSide, prefill bool) error {
	var noise, controls []genrecord.Distance
	noiseOf, controlsOf := map[string][]genrecord.Distance{}, map[string][]genrecord.Distance{}
	for _, p := range plan {
		g, err := replayGroup(ctx, p.name, p.side, p.path, p.rs, kind)
		if err != nil {
			return err
		}
		if p.note != nil {
			g.Note = p.note()
		}
		rc.Groups = append(rc.Groups, g)
		if p.side == SideGenuine {
			noise = append(noise, g.distances...)
			noiseOf[p.of] = append(noiseOf[p.of], g.distances...)
		} else {
			controls = append(controls, g.distances...)
			controlsOf[p.of] = append(controlsOf[p.of], g.distances...)
		}
	}
	var err error
	if rc.Calibration, err = genrecord.Calibrate(noise, controls); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if prefill {
		for _, sd := range sides {
			c, err := genrecord.Calibrate(noiseOf[sd.of], controlsOf[sd.of])
			if err != nil {
				return fmt.Errorf("%s, %s: %w", kind, sd.name, err)
			}
			rc.Models = append(rc.Models, ModelCalibration{Model: sd.name, ModelSHA256: sd.stack.header.Pins.ModelSHA256, Calibration: c})
		}
	}
	return nil
}

// modelOf is the per-model calibration of the model or the control ("m",
// "c"), when the runtime has them (prefill).
func (rc RuntimeCalibration) modelOf(of string, req ReplayCalibrationRequest) (ModelCalibration, bool) {
	name := req.Model
	if of == "c" {
		name = req.Control
	}
	for _, m := range rc.Models {
		if m.Model == name {
			return m, true
		}
	}
	return ModelCalibration{}, false
}

// Separable says whether replay can use the runtime's calibration: its
// one tolerance, or in prefill mode each model's.
func (rc RuntimeCalibration) Separable() bool {
	if len(rc.Models) == 0 {
		return rc.Calibration.Separable
	}
	for _, m := range rc.Models {
		if !m.Calibration.Separable {
			return false
		}
	}
	return true
}

// calibrationStep is one group of rows calibration replays: which record, on
// which side, re-scored by what, and the note the report gives it.
type calibrationStep struct {
	name, side, path string
	rs               genrecord.Rescorer
	note             func() string
	// of is whose rows the group holds: "m" (the model) or "c" (the control).
	of string
}

// calibrationSide is one model's part of a calibration: its stack, its
// second quant's stack (if set-up made one), and the rows generated on it.
type calibrationSide struct {
	of, name   string // "m" or "c"; the registry name
	rows       int
	stack      *replayStack
	other      *replayStack
	otherQuant string
	// gen, at more than one slot, is the stack that generates the genuine
	// rows in batches; stack replays them.
	gen  *replayStack
	live []liveRow
	rec  string // the genuine rows' record
}

// generator is the stack that generates the side's genuine rows.
func (sd *calibrationSide) generator() *replayStack {
	if sd.gen != nil {
		return sd.gen
	}
	return sd.stack
}

// plan writes this side's controls and returns its groups: its genuine rows
// (twice for the calibrated model, to show the pass is deterministic),
// one-token edits, edits that copy the runner-up's log-prob too, text-only
// and prompt-only edits, its rows re-scored by the peer's model claiming
// this side's pins, and by its other quant.
func (sd *calibrationSide) plan(kind string, set replaySet, peer *calibrationSide, twice bool) ([]calibrationStep, error) {
	pins, rows, n := sd.generator().header.Pins, rowsOf(sd.live), len(sd.live)
	edited := func(what string, edit func(genrecord.Row, int) (genrecord.Row, int, bool)) (string, int, error) {
		return set.edits(sd.of+"-"+what+".jsonl", pins, rows, edit)
	}
	editOne, nOne, err := edited("edited", editOneToken)
	if err != nil {
		return nil, err
	}
	forged, nForged, err := edited("forged", forgeOneToken)
	if err != nil {
		return nil, err
	}
	// Edits of the kept fields alone, tokens untouched: the text people read
	// and graders graded, and the prompt shown beside it.
	text, nText, err := edited("text-edited", editText)
	if err != nil {
		return nil, err
	}
	msgs := messagesOf(sd.live)
	prompt, nPrompt, err := edited("prompt-edited", func(r genrecord.Row, pick int) (genrecord.Row, int, bool) {
		return editPrompt(r, lastContent(msgs[r.RowID]), pick)
	})
	if err != nil {
		return nil, err
	}
	genuine := fmt.Sprintf("genuine %s rows, re-scored", sd.name)
	var steps []calibrationStep
	if twice {
		steps = append(steps, calibrationStep{genuine + " (pass 1)", SideGenuine, sd.rec, sd.stack.rs(), nil, sd.of},
			calibrationStep{genuine + " (pass 2)", SideGenuine, sd.rec, sd.stack.rs(), nil, sd.of})
	} else {
		steps = append(steps, calibrationStep{genuine, SideGenuine, sd.rec, sd.stack.rs(), nil, sd.of})
	}
	steps = append(steps,
		calibrationStep{fmt.Sprintf("one-token edits of %s rows", sd.name), SideControl, editOne, sd.stack.rs(), skipped(n - nOne), sd.of},
		calibrationStep{fmt.Sprintf("one-token edits of %s rows, log-prob copied from the top-K", sd.name), SideControl, forged, sd.stack.rs(), skipped(n - nForged), sd.of},
		calibrationStep{fmt.Sprintf("text-only edits of %s rows (one character, tokens untouched)", sd.name), SideControl, text, sd.stack.rs(), fieldNote(kind, "text", n-nText), sd.of},
		calibrationStep{fmt.Sprintf("prompt-only edits of %s rows (one letter of the rendered prompt, prompt ids untouched)", sd.name), SideControl, prompt, sd.stack.rs(), fieldNote(kind, "prompt", n-nPrompt), sd.of},
		sd.claimedBy(kind, fmt.Sprintf("%s rows re-scored by %s", sd.name, peer.name), peer.stack, msgs))
	if sd.other != nil {
		steps = append(steps, sd.claimedBy(kind, fmt.Sprintf("%s rows re-scored by its %s quant", sd.name, sd.otherQuant), sd.other, msgs))
	}
	return steps, nil
}

// claimedBy is the group of this side's rows re-scored by another stack
// that claims the rows' pins: the swapped-model and other-quant controls.
func (sd *calibrationSide) claimedBy(kind, name string, by *replayStack, msgs map[string][]runtimes.Message) calibrationStep {
	var regen []string
	var firstErr string
	return calibrationStep{name, SideControl, sd.rec,
		claimedStack{inner: by.rescorer(), scorer: by.scorer, pins: sd.stack.header.Pins, messages: msgs, regenerated: &regen, firstErr: &firstErr},
		regenNote(kind, &regen, &firstErr), sd.of}
}

func skipped(n int) func() string {
	return func() string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("%d rows had no step with a runner-up to swap in and were not edited", n)
	}
}

// fieldNote says which check catches a field-only edit on kind, and how
// many rows had nothing to edit.
func fieldNote(kind, field string, notEdited int) func() string {
	return func() string {
		var n string
		switch {
		case field == "text":
			n = "caught by the text check against the kept steps' bytes"
			if kind == "llama-server" {
				n += " (and against the detokenized ids)"
			}
		case kind == "llama-server":
			n = "caught by tokenizing the rendered prompt and comparing with the kept prompt ids"
		case kind == runtimes.OpenAIServerKind:
			n = "the server's API has no tokenizer and its rows keep no prompt ids: only scoring or regenerating from the edited prompt can catch these"
		default:
			n = "Ollama keeps no prompt ids and has no tokenizer in its API: only regeneration from the edited prompt can catch these"
		}
		if notEdited > 0 {
			n += fmt.Sprintf("; %d rows had nothing to edit", notEdited)
		}
		return n
	}
}

// lastContent is the content of the last message, the one a row answers.
func lastContent(msgs []runtimes.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	return msgs[len(msgs)-1].Content
}

func regenNote(kind string, regen *[]string, firstErr *string) func() string {
	return func() string {
		switch {
		case kind == "ollama":
			return "every row regenerated in raw mode by the other model with its recorded seed and sampling (Ollama cannot force tokens)"
		case kind == runtimes.OpenAIServerKind:
			return "every row regenerated by the same server running the other model, with its recorded seed and sampling"
		case len(*regen) == 0:
			return "every row re-scored by forcing its recorded token ids"
		}
		return fmt.Sprintf("%d rows hold token ids the other model's llama-server refuses to force (%s): regenerated from their messages and compared by text", len(*regen), *firstErr)
	}
}

func messagesOf(live []liveRow) map[string][]runtimes.Message {
	out := make(map[string][]runtimes.Message, len(live))
	for _, l := range live {
		out[l.row.RowID] = l.messages
	}
	return out
}

// replaySet writes the records of one replay study into one directory.
type replaySet struct{ work string }

func (s replaySet) record(name string, pins genrecord.Pins, rows []genrecord.Row) (string, error) {
	path := filepath.Join(s.work, name)
	return path, writeRecord(path, pins, rows)
}

// edits writes a copy of rows with one token of each edited, spreading the
// edited step over the row, and returns how many rows were edited.
func (s replaySet) edits(name string, pins genrecord.Pins, rows []genrecord.Row, edit func(genrecord.Row, int) (genrecord.Row, int, bool)) (string, int, error) {
	var edited []genrecord.Row
	for i, r := range rows {
		if e, _, ok := edit(r, 3*i+1); ok {
			edited = append(edited, e)
		}
	}
	path, err := s.record(name, pins, edited)
	return path, len(edited), err
}

// replayGroup replays one record through rs and measures each row's
// distance from the record, tolerance-free.
func replayGroup(ctx context.Context, name, side, path string, rs genrecord.Rescorer, kind string) (ReplayGroup, error) {
	g := ReplayGroup{Name: name, Side: side, MinToken: math.Inf(1), MinRow: math.Inf(1)}
	sum, err := genrecord.Replay(ctx, path, rs, genrecord.ReplayOptions{})
	if err != nil {
		return g, fmt.Errorf("%s, %s: %w", kind, name, err)
	}
	if sum.Status == genrecord.StatusStackDiffers {
		return g, fmt.Errorf("%s, %s: the replaying stack differs from the record's pins: %v", kind, name, sum.StackDiffs)
	}
	greedy := map[string]bool{}
	if rd, err := genrecord.OpenReader(path); err == nil {
		for {
			r, err := rd.Next()
			if err != nil {
				break
			}
			greedy[r.RowID] = r.Sampling.Temperature == 0
		}
		rd.Close()
	}
	for _, r := range sum.Results {
		label := fmt.Sprintf("%s: %s: %s", kind, name, r.RowID)
		d := r.Comparison.Distance(label)
		switch {
		case r.Status == genrecord.StatusError:
			g.Refused++
			d = genrecord.Distance{Label: label + " (refused: " + r.Error + ")", Changed: true}
		case r.Comparison.Checked == 0 && r.Comparison.Steps > 0:
			d.Changed = true // nothing could be checked: never a reproduction
		}
		g.Rows++
		if greedy[r.RowID] {
			g.Greedy++
		}
		if r.Status == genrecord.StatusReproduced {
			g.Exact++
		}
		if d.Changed {
			g.Changed++
		} else {
			g.MaxToken, g.MaxRow = math.Max(g.MaxToken, d.Token), math.Max(g.MaxRow, d.Row)
			g.MinToken, g.MinRow = math.Min(g.MinToken, d.Token), math.Min(g.MinRow, d.Row)
		}
		g.distances = append(g.distances, d)
	}
	g.results = sum.Results
	if math.IsInf(g.MinToken, 1) {
		g.MinToken, g.MinRow = 0, 0 // every row changed a token; JSON has no infinity
	}
	return g, nil
}

// WriteFile writes the calibration as JSON to path.
func (c ReplayCalibration) WriteFile(path string) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the calibration: %w", err)
	}
	return nil
}

// WriteText prints, per runtime, each group's rows and distances, the
// tolerance chosen and the error rates observed.
func (c ReplayCalibration) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "replay calibration (%s mode) of %s (swapped-model control: %s); %d rows and %d control rows per runtime, at most %d output tokens each, even rows greedy, odd rows sampled (temperature 0.8, seeded)\n",
		modeOf(c.Mode), c.Model, c.Control, c.Rows, c.ControlRows, c.MaxTokens)
	if c.OtherQuant != "" {
		fmt.Fprintf(&b, "other-quant control: %s, on a stack that claims the record's pins\n", c.OtherQuant)
	}
	for _, rc := range c.Runtimes {
		fmt.Fprintf(&b, "\n%s %s (binary %s, model %s)%s:\n", rc.Runtime, rc.Pins.RuntimeVersion, studies.Short(rc.Pins.BinarySHA256), studies.Short(rc.Pins.ModelSHA256), slotsNote(rc.Slots))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  side\tgroup\trows\tgreedy\texact\ttoken or field changed\trefused\tmax |Δ| token/row\tmin |Δ| token/row\tfailed at tolerance")
		for _, g := range rc.Groups {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%d\t%.3g / %.3g\t%.3g / %.3g\t%d/%d\n", g.Side, g.Name, g.Rows, g.Greedy, g.Exact, g.Changed, g.Refused,
				g.MaxToken, g.MaxRow, g.MinToken, g.MinRow, g.Caught, g.Rows)
		}
		tw.Flush()
		for _, g := range rc.Groups {
			if g.Note != "" {
				fmt.Fprintf(&b, "  note (%s): %s\n", g.Name, g.Note)
			}
		}
		var cal strings.Builder
		if len(rc.Models) > 0 {
			fmt.Fprintf(&cal, "all models together (not used in %s mode; shown to say why):\n", ModePrefill)
		}
		if err := rc.Calibration.WriteText(&cal); err != nil {
			return err
		}
		for _, m := range rc.Models {
			fmt.Fprintf(&cal, "%s alone (used for its records):\n", m.Model)
			if err := m.Calibration.WriteText(&cal); err != nil {
				return err
			}
		}
		for _, line := range strings.Split(strings.TrimRight(cal.String(), "\n"), "\n") {
			fmt.Fprintf(&b, "  %s\n", line)
		}
	}
	for _, n := range c.NotMeasured {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// slotsNote says at what slot count a calibration's genuine rows were made.
func slotsNote(slots int) string {
	if slots <= 1 {
		return ", one slot"
	}
	return fmt.Sprintf(", %d slots: genuine rows generated %d at a time in a batch, replayed alone", slots, slots)
}
