package run

// One trial, start to end, for a local execution and a worker's Host alike:
// the arm's runtime started or kept (startArm, stopArm), the gates waited
// for, the call made under the governor's guard (runTrial, generate),
// grading, the receipt (newReceipt, pinMap) and the generation rows, into a
// Sink (sink.go). A runtime that fails at the card is recorded here too.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"rig/genrecord"
	"rig/genrecord/callrow"
	"rig/internal/cgroup"
	"rig/internal/provision"
	"rig/preflight"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
	"rig/tasks"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// trialRunner is the one piece of code that runs a trial, for a local
// execution and for a worker's Host alike: it starts the arm's runtime (or
// keeps the one the trial before used), holds the trial under the
// governor's watch, makes the call, grades it, and leaves the receipt and
// the generation rows in a Sink. The wall caps, the arm's binary and the
// governor's wiring are therefore the same in both modes.
type trialRunner struct {
	env       Env
	study     string
	design    *studies.Design
	snap      *studies.Snapshot
	exec      receipts.Execution
	installed provision.Installed
	graders   *tasks.Registry
	banks     map[string]*tasks.Bank
	topK      int
	workDir   string
	// walls are the derived walls of the job kinds whose harness_caps.wall
	// is auto, fixed once per execution (on the machine that owns the
	// study: a worker is given them).
	walls map[string]studies.WallDerivation
	// validating marks a validation run, which uses its own short caps.
	validating bool
	// cur is the runtime kept up between trials of the same arm, curArm
	// that arm, and res the card reservation the runtime started in.
	cur    runtimes.Runtime
	curArm string
	res    *cgroup.Reservation
	// rows keeps one trial's generation rows, and the record's sum its
	// receipt carries, together when trials of an arm run at once.
	rows sync.Mutex
	// pool, in a try (try.go), keeps runtimes warm between tries: startArm
	// takes the arm's runtime from it, and stopping one parks it there.
	pool *TryPool
}

// newTrialRunner readies the runner of one execution: the snapshot's banks
// checked against their frozen digests (a bank changed since is a stale
// asset), a derived wall for every auto-wall job kind, and its scratch
// folder.
func newTrialRunner(env Env, study string, snap *studies.Snapshot, exec receipts.Execution, workDir string, walls map[string]studies.WallDerivation) (*trialRunner, error) {
	env.Log = env.log()
	d, err := snap.DesignValue()
	if err != nil {
		return nil, err
	}
	for _, jk := range d.AutoWallJobKinds() {
		if _, ok := walls[jk]; !ok {
			return nil, fmt.Errorf("job kind %s: harness_caps.wall is %q and no derived wall was given to the runner (the machine that owns the study derives it from its validation runs: rig study validate, then rig study dry-run)", jk, studies.AutoWall)
		}
	}
	x := &trialRunner{env: env, study: study, design: d, snap: snap, exec: exec,
		installed: env.Installed, graders: env.Graders(), topK: d.TopK, workDir: workDir, walls: walls}
	if x.topK == 0 {
		x.topK = studies.DefaultTopK
	}
	if x.banks, err = LoadBanks(snap); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(workDir, 0o700); err != nil {
		return nil, err
	}
	return x, nil
}

// Trial runs one attempt of the trial key and leaves its receipt in sink.
// The arm's runtime is started, or kept from the trial before when that was
// the same arm; a runtime that was stopped, died or failed at the card is
// not kept for the next. Only an error that makes going on unsafe is
// returned: everything else is the attempt's receipt.
func (x *trialRunner) Trial(ctx context.Context, sink Sink, key studies.TrialKey) (receipts.Outcome, error) {
	arm := x.design.Arm(key.Arm)
	if arm == nil {
		return "", fmt.Errorf("trial %s: arm %s is not in the frozen design", key, key.Arm)
	}
	if outcome, started, err := x.keepArm(ctx, sink, *arm, key); err != nil || !started {
		return outcome, err
	}
	outcome, err := x.runTrial(ctx, sink, *arm, x.cur, key, nil, 0)
	if err != nil {
		return "", fmt.Errorf("trial %s: %w", key, err)
	}
	if outcome == receipts.Preempted || outcome == receipts.Error || outcome == receipts.FailedAtCard {
		// The runtime was stopped or died: the next trial gets a fresh one.
		x.release(ctx)
	}
	return outcome, nil
}

// keepArm makes x.cur the arm's runtime: the one kept from the trial before
// when that was the same arm, else a fresh one. A runtime that fails at the
// card is key's receipt (started false, its outcome returned).
func (x *trialRunner) keepArm(ctx context.Context, sink Sink, arm studies.Arm, key studies.TrialKey) (receipts.Outcome, bool, error) {
	if x.cur != nil && x.curArm == arm.Name {
		return "", true, nil
	}
	x.release(ctx)
	rt, err := x.startArm(ctx, arm)
	if x.failedAtCard(err) {
		// The card is too small even to load the model: a failure at
		// this card, recorded, never retried smaller.
		outcome, rerr := x.recordFailedAtCard(ctx, sink, arm, key, err)
		x.stopArm(ctx, nil)
		if rerr != nil {
			return "", false, fmt.Errorf("trial %s: %w", key, rerr)
		}
		return outcome, false, nil
	}
	if err != nil {
		x.stopArm(ctx, nil)
		return "", false, fmt.Errorf("arm %s: %w", arm.Name, err)
	}
	x.cur, x.curArm = rt, arm.Name
	return "", true, nil
}

// release stops the runtime kept between trials, and its reservation.
func (x *trialRunner) release(ctx context.Context) {
	x.stopArm(ctx, x.cur)
	x.cur, x.curArm = nil, ""
}

func (x *trialRunner) waitForGates(ctx context.Context) error {
	for {
		if x.env.Gates == nil {
			return fmt.Errorf("%w: no governor is wired", ErrGate)
		}
		if err := x.env.Gates.Ready(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func (x *trialRunner) startArm(ctx context.Context, arm studies.Arm) (runtimes.Runtime, error) {
	fa, ok := x.snap.Arm(arm.Name)
	if !ok {
		return nil, fmt.Errorf("arm %s is not in the snapshot", arm.Name)
	}
	if arm.Runtime.OpenAIServer() {
		return x.startServer(ctx, arm, fa)
	}
	kind, frozen := x.snap.ArmRuntime(arm)
	build, err := runtimes.BuildOf(x.installed, kind)
	if err != nil {
		return nil, err
	}
	if frozen != "" && frozen != build.BinarySHA256 {
		return nil, &studies.StaleAssetError{Asset: kind + " binary " + build.Binary, Want: frozen, Got: build.BinarySHA256}
	}
	cfg := runtimes.Config{Model: fa.ModelPath, ModelName: arm.Model.RegistryName, ModelSHA256: fa.ModelSHA256,
		Context: arm.Pins.Context, WorkDir: filepath.Join(x.workDir, "rt-"+arm.Name), NoSandbox: x.env.NoSandbox,
		Offload: arm.Pins.Offload, Slots: arm.Pins.SlotCount()}
	card := studies.CardOf(x.design, arm)
	if x.pool != nil {
		return x.startPooled(ctx, arm, build, cfg, card)
	}
	switch {
	case !card.Simulated || card.MemoryMiB <= 0:
	case arm.Pins.Offload.OnCard():
		// A smaller card simulated on the real one: the runtime is told its
		// size where it can be, and the governor holds the trial to it.
		cfg.CardBudget = studies.CardBytes(x.design, arm)
	default:
		// Each start gets a fresh reservation, made before the runtime
		// starts so its whole process tree is inside the card; its peak and
		// OOM counters then belong to this arm alone.
		res, err := cgroup.Reserve(ctx, uint64(preflight.Size(card.MemoryMiB)*preflight.MiB))
		if err != nil && !errors.Is(err, cgroup.ErrNoCgroup) {
			return nil, err
		}
		if res != nil {
			x.res = res
			cfg.CgroupDir = res.Dir()
		} else {
			x.env.Log.Warn("no writable memory cgroup: the simulated card is not enforced", "arm", arm.Name, "card", card.Name)
		}
	}
	return x.env.launch(ctx, build, cfg)
}

// stopArm stops a runtime (nil is fine) and removes its card reservation.
func (x *trialRunner) stopArm(ctx context.Context, rt runtimes.Runtime) {
	if rt != nil {
		rt.Stop(ctx)
	}
	if x.res != nil {
		if err := x.res.Close(); err != nil {
			x.env.Log.Error("removing a card reservation", "cgroup", x.res.Dir(), "err", err)
		}
		x.res = nil
	}
}

// runTrial runs one attempt of a trial under the governor's watch and stores
// its receipt. Only an error that makes the execution unsafe to continue is
// returned. peers, for a trial in flight beside others on the same runtime
// (inflight.go), preempts it when one of them is preempted; nil for a
// trial alone.
func (x *trialRunner) runTrial(ctx context.Context, sink Sink, arm studies.Arm, rt runtimes.Runtime, key studies.TrialKey, peers *slotRound, slot int) (receipts.Outcome, error) {
	attempt, parent, err := sink.NextAttempt(ctx, receiptTrial(key))
	if err != nil {
		return "", err
	}
	bank := x.banks[key.JobKind]
	task, ok := bank.Task(key.Task)
	if !ok {
		return "", fmt.Errorf("task %s is not in bank %s", key.Task, bank.File)
	}
	rp := rt.Pins()
	if attempt, parent, err = x.skipKeptAttempts(ctx, sink, arm, key, rp, attempt, parent); err != nil {
		return "", err
	}
	rec := x.newReceipt(arm, key, attempt, parent, rp)
	if arm.Runtime.Aider() {
		x.harnessPins(&rec, key.JobKind, task)
	}
	callID := fmt.Sprintf("%s#%d", key, attempt)
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	guard, err := x.watch(ctx, tctx, callID, rt, arm)
	if err != nil {
		return "", err
	}
	go func() {
		select {
		case <-guard.Preempted():
			cancel()
		case <-peers.preempted():
			cancel()
		case <-tctx.Done():
		}
	}()
	if x.res != nil && peers == nil {
		// Trials in flight together share the runtime's peak: the round
		// reset it when it began.
		x.res.ResetPeak()
	}
	stopFeed := feedSlotProgress(tctx, rt, guard, slot)
	start := time.Now()
	out, genErr := x.generate(tctx, arm, rt, key.JobKind, bank, task, callID, slot)
	stopFeed()
	if out.files != nil {
		if err := KeepRepo(sink.Records(), callID, out.files); err != nil {
			return "", fmt.Errorf("keeping the repository of %s: %w", callID, err)
		}
	}
	rec.WallMS = time.Since(start).Milliseconds()
	rec.FinishedAt = time.Now().UTC()
	preempted := guard.End()
	if why := peers.reason(); preempted == "" && genErr != nil && why != "" {
		// Cut short because a trial beside it on the runtime was.
		preempted = why
	}
	if em, ok := guard.(EnergyMeter); ok && arm.Pins.Offload.OnCard() {
		// The card's counter over the trial's own interval; beside others
		// it counted theirs too, and the analysis apportions the round's
		// energy by each trial's share of the tokens (analysis/load.go).
		if j, ok := em.TrialEnergy(); ok {
			rec.EnergyJoules, rec.EnergySource = j, receipts.EnergyMeasuredNVML
		}
	}
	measureCalls(&rec, arm, out)
	if err := x.settle(ctx, &rec, arm, out, genErr, preempted); err != nil {
		return "", err
	}
	if rec.Outcome == "" {
		if err := x.grade(ctx, &rec, task, callID, out); err != nil {
			return "", err
		}
	}
	if err := x.writeRows(sink, &rec, arm, rp, callID, out); err != nil {
		return "", err
	}
	if err := sink.PutReceipt(ctx, rec); err != nil {
		return "", err
	}
	return rec.Outcome, nil
}

// skipKeptAttempts steps past an attempt whose generation rows are already
// in the record with no receipt: the process was killed after it kept the
// rows and before it stored the receipt (with trials in flight, any of
// them can be there at the kill). Running that attempt again would write
// its rows twice, so it gets a preempted receipt (never counted) saying
// so, and the trial runs as the next attempt.
func (x *trialRunner) skipKeptAttempts(ctx context.Context, sink Sink, arm studies.Arm, key studies.TrialKey, rp runtimes.Pins, attempt, parent int) (int, int, error) {
	kr, ok := sink.(keptRows)
	if !ok {
		// A worker's spool entry is the attempt's own: nothing kept before it.
		return attempt, parent, nil
	}
	for {
		callID := key.CallID(attempt)
		kept, err := kr.keptRow(arm.Name, rp, callID)
		if err != nil {
			return 0, 0, err
		}
		if !kept {
			return attempt, parent, nil
		}
		rec := x.newReceipt(arm, key, attempt, parent, rp)
		rec.FinishedAt = rec.StartedAt
		rec.Outcome = receipts.Preempted
		rec.Detail = fmt.Sprintf("lost: the rows of call %s were kept and the process stopped before it stored this receipt (written on resume; the rows stay in the record, uncounted, and the trial runs again)", callID)
		if err := sink.PutReceipt(ctx, rec); err != nil {
			return 0, 0, err
		}
		x.env.Log.Info("recorded an attempt whose rows outlived its process", "call", callID)
		if attempt, parent, err = sink.NextAttempt(ctx, receiptTrial(key)); err != nil {
			return 0, 0, err
		}
	}
}

// harnessPins puts a harness trial's caps, and the test command it runs
// after each edit, on the receipt: they bound what the harness may do, so
// they belong with the pins.
func (x *trialRunner) harnessPins(rec *receipts.Receipt, jobKind string, task tasks.Task) {
	c := x.harnessCaps(jobKind)
	rec.Pins["harness_caps"] = studies.DescribeCaps(c)
	if w, ok := x.walls[jobKind]; ok {
		rec.Pins["harness_caps"] += fmt.Sprintf(" (auto: %.0f× the worst case %s of %s, measured on this machine)", w.Margin, w.WorstCase.Round(time.Second), w.Slowest)
	}
	if len(task.Input.TestCommand) > 0 {
		// Aider runs the task's tests after each edit: what its test-fix turns see.
		rec.Pins["harness_auto_test"] = runtimes.ShellJoin(task.Input.TestCommand)
	}
}

// watch puts the trial under the governor's guard (tctx is the trial's own
// context, which a preemption cancels). A held queue means nothing ran and
// nothing is recorded: it waits for the gates and tries once more.
func (x *trialRunner) watch(ctx, tctx context.Context, callID string, rt runtimes.Runtime, arm studies.Arm) (TrialGuard, error) {
	if x.env.Gates == nil {
		return nil, fmt.Errorf("%w: no governor is wired", ErrGate)
	}
	guard, err := x.env.Gates.Watch(tctx, callID, rt.Sandbox(), studies.CardBytes(x.design, arm))
	if err == nil {
		return guard, nil
	}
	if werr := x.waitForGates(ctx); werr != nil {
		return nil, werr
	}
	return x.env.Gates.Watch(tctx, callID, rt.Sandbox(), studies.CardBytes(x.design, arm))
}

// measureCalls adds the trial's calls up on its receipt: tokens, rates,
// first-token and per-token times, peak memory, truncation and effort.
func measureCalls(rec *receipts.Receipt, arm studies.Arm, out trialOutput) {
	if out.version != "" {
		rec.HarnessVersion = out.version
	}
	if out.aider != nil && out.aider.Containment.Sandboxed {
		// Aider ran in a sandbox of its own: its confinement is evidence too.
		rec.Pins["aider_containment"] = out.aider.Containment.Confinement.Summary()
	}
	var promptTok, outTok int
	var promptDur, outDur time.Duration
	for _, c := range out.calls {
		promptTok, promptDur = promptTok+c.Timings.PromptTokens, promptDur+c.Timings.PromptDuration
		outTok, outDur = outTok+c.Timings.OutputTokens, outDur+c.Timings.OutputDuration
		rec.InputTokens += c.PromptTokens
		rec.ThinkingTokens += c.ThinkingTokens
		rec.OutputTokens += c.OutputTokens
		rec.Truncated = rec.Truncated || c.Truncated
		rec.StopReason = c.StopReason
		rec.PeakMemoryBytes = max(rec.PeakMemoryBytes, c.PeakMemory)
		rec.Effort = receipts.Effort{RawParameter: c.Effort.Raw, Value: c.Effort.Label, Graded: c.Effort.Graded}
	}
	if promptDur > 0 {
		rec.PromptPerSecond = float64(promptTok) / promptDur.Seconds()
	}
	if outDur > 0 {
		rec.OutputPerSecond = float64(outTok) / outDur.Seconds()
	}
	if len(out.calls) > 0 && out.calls[0].Timings.PromptDuration > 0 {
		rec.TTFTMS = durMS(out.calls[0].Timings.PromptDuration)
	}
	if outTok > 0 && outDur > 0 {
		rec.TPOTMS = durMS(outDur) / float64(outTok)
	}
	if rec.Effort.Value == "" {
		rec.Effort = receipts.Effort{RawParameter: arm.Pins.Effort.RawParameter, Value: arm.Pins.Effort.Value, Graded: false}
	}
}

// settle sets the outcome of a trial that will not be graded: preempted,
// failed at the card, crashed, or failed. It leaves the outcome empty for a
// trial to grade, and returns an error only when the execution's own
// context ended (nothing is recorded then).
func (x *trialRunner) settle(ctx context.Context, rec *receipts.Receipt, arm studies.Arm, out trialOutput, genErr error, preempted string) error {
	switch {
	case preempted != "":
		rec.Outcome = receipts.Preempted
		rec.Detail = "preempted by the governor: " + preempted
	case genErr != nil && x.res != nil && x.oomKilled():
		rec.Outcome = receipts.FailedAtCard
		rec.Detail = fmt.Sprintf("blew the %d MiB card's memory budget (killed by the kernel's OOM killer): %v", studies.CardOf(x.design, arm).MemoryMiB, studies.FirstLine(genErr.Error()))
		rec.Grade = &receipts.Grade{Score: 0, Pass: false, Grader: "budget", GraderVersion: "1"}
	case genErr != nil && errors.Is(genErr, runtimes.ErrCrashed):
		rec.Outcome = receipts.Preempted
		rec.Detail = "runtime crashed mid-call (never scored against the model; rerun): " + studies.FirstLine(genErr.Error())
	case genErr != nil && ctx.Err() != nil:
		return ctx.Err()
	case genErr == nil && out.aider != nil && len(out.aider.CallErrors) > 0:
		// The arm failed a call the harness made: what the harness did
		// next was not the model's doing, so the trial is not scored.
		rec.Outcome = receipts.Error
		rec.Detail = "the arm did not answer a call the harness made, so the trial is not scored (rig study rerun retries it): " + strings.Join(out.aider.CallErrors, "; ")
	case genErr != nil:
		// One trial's failure (a prompt the runtime refuses, a harness that
		// would not start) is that trial's receipt: the execution goes on,
		// and the report names the task that produced no output.
		rec.Outcome = receipts.Error
		rec.Detail = "the trial failed and is not scored (rig study rerun retries it): " + studies.FirstLine(genErr.Error())
	}
	return nil
}

// grade grades the trial's output with the task's grader and sets the
// outcome: scored, capped, or an error when grading failed.
func (x *trialRunner) grade(ctx context.Context, rec *receipts.Receipt, task tasks.Task, callID string, out trialOutput) error {
	g, err := x.graders.Grade(ctx, task, tasks.Output{TrialID: callID, TaskID: task.ID, Text: out.text, Files: out.files})
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		rec.Outcome = receipts.Error
		rec.Detail = "grading failed, so the trial is not scored (rig study rerun retries it): " + studies.FirstLine(err.Error())
	default:
		rec.Grade = &receipts.Grade{Score: g.Score, Pass: g.Pass, Grader: g.Grader, GraderVersion: strconv.Itoa(g.Version)}
		rec.Outcome = receipts.Scored
		if out.capped {
			rec.Outcome = receipts.Capped
			rec.Detail = "capped: " + out.capHit
		}
	}
	if out.aider != nil {
		rec.Detail = strings.TrimSpace(rec.Detail + " aider: " + out.aider.Describe())
	}
	return nil
}

// writeRows appends the trial's calls to the arm's generation record and
// puts the record's sum on the receipt; a counted trial with no call gets
// the empty record's sum, as evidence that none was made.
func (x *trialRunner) writeRows(sink Sink, rec *receipts.Receipt, arm studies.Arm, rp runtimes.Pins, callID string, out trialOutput) error {
	// Held for the whole trial: its rows are contiguous, and the sum on its
	// receipt is the record cut right after them.
	x.rows.Lock()
	defer x.rows.Unlock()
	if len(out.calls) > 0 {
		w, err := sink.Writer(arm.Name, rp)
		if err != nil {
			return err
		}
		role := genrecord.RoleCandidate
		if out.harness == "aider" {
			role = genrecord.RoleAider
		}
		for i, c := range out.calls {
			if c.CallID == "" || out.harness == "aider" {
				c.CallID = fmt.Sprintf("%s/call-%d", callID, i+1)
			}
			if err := w.Append(generationRow(c.CallID, arm.Name, role, arm.Pins, x.topK, c)); err != nil {
				return err
			}
		}
		rec.GenerationSHA256 = w.Sum()
	}
	if rec.Outcome.Counted() && rec.GenerationSHA256 == "" {
		rec.GenerationSHA256 = genrecord.EmptySum
		rec.Detail = strings.TrimSpace(rec.Detail + " (no model call was made)")
	}
	return nil
}

func (x *trialRunner) oomKilled() bool {
	o, err := x.res.OOM()
	return err == nil && o.Kills > 0
}

// trialOutput is what one trial produced before it is graded and recorded.
type trialOutput struct {
	calls   []runtimes.Result // every kept model call, in order
	text    string            // the answer graded (non-code job kinds)
	files   map[string]string // the repository after the harness (code job kinds)
	aider   *runtimes.AiderResult
	capped  bool
	capHit  string
	harness string
	version string
}

// harnessCaps are the caps a harness run of the job kind gets in this
// execution: the validation's own in a validation run, else the design's,
// with an auto wall derived from this machine's measured speed.
func (x *trialRunner) harnessCaps(jobKind string) studies.AiderCaps {
	if x.validating {
		return studies.ValidationCaps
	}
	caps := x.design.AiderCapsFor(jobKind)
	if w, ok := x.walls[jobKind]; ok {
		caps.Wall = w.Wall
	}
	return caps
}

// taskRequest is the model call that puts task to arm, in the arm's prompt
// format: one user turn through the model's chat template, or the bank's
// few-shot prefix, the prompt and its answer cue as plain text.
func taskRequest(arm studies.Arm, bank *tasks.Bank, task tasks.Task, callID string, topK int) (runtimes.Request, error) {
	req := runtimes.Request{
		CallID:   callID,
		Sampling: samplingOf(arm.Pins), MaxTokens: arm.Pins.StopCap, TopK: topK,
		Effort: runtimes.Effort{Level: arm.Pins.Effort.Value},
	}
	if arm.Format() != studies.PromptCompletion {
		req.Messages = []runtimes.Message{{Role: "user", Content: task.Input.Prompt}}
		return req, nil
	}
	prompt, ok := bank.Header.CompletionPrompt(task)
	if !ok {
		// The freeze refuses this; a bank changed since would be stale.
		return req, fmt.Errorf("arm %s: prompt_format completion, but bank %s has no completion block", arm.Name, bank.File)
	}
	req.Prompt, req.Stop = prompt, bank.Header.Completion.Stop
	return req, nil
}

func samplingOf(p studies.Pins) runtimes.Sampling {
	return runtimes.Sampling{Temperature: p.Sampling.Temperature, TopK: p.Sampling.TopK, TopP: p.Sampling.TopP, MinP: p.Sampling.MinP, Seed: int(p.Sampling.Seed)}
}

// generate runs one trial's model work on a started runtime; slot, when
// above 0, is the runtime's slot the trial holds (inflight.go).
func (x *trialRunner) generate(ctx context.Context, arm studies.Arm, rt runtimes.Runtime, jobKind string, bank *tasks.Bank, task tasks.Task, callID string, slot int) (trialOutput, error) {
	out := trialOutput{harness: arm.Runtime.Harness()}
	if out.harness != "aider" {
		req, err := taskRequest(arm, bank, task, callID, x.topK)
		if err != nil {
			return out, err
		}
		if _, reports := rt.(slotReporter); reports {
			req.Slot = slot
		}
		res, err := rt.Generate(ctx, req)
		if err != nil {
			return out, err
		}
		out.calls, out.text = []runtimes.Result{res}, res.Text
		out.version = rt.Pins().RuntimeVersion
		return out, nil
	}
	// The code job kind: a scratch repository per trial, Aider pointed at the arm.
	scratch, err := os.MkdirTemp(x.workDir, "task-")
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(scratch)
	repo := filepath.Join(scratch, "repo")
	if err := tasks.Materialize(ctx, repo, task.Input.Files); err != nil {
		return out, err
	}
	var files []string
	for f := range task.Input.Files {
		files = append(files, f)
	}
	// In a fixed order: the order Aider is given the files is the order of
	// its prompt, which must be the same for every arm and every run.
	sort.Strings(files)
	// A run beside others on the arm's slots keeps its calls to its own
	// slot, as a single call does (slotprogress.go reads it).
	aiderSlot := 0
	if _, reports := rt.(slotReporter); reports {
		aiderSlot = slot
	}
	ar, err := runtimes.RunAider(ctx, runtimes.AiderConfig{
		Binary: x.installed.Aider, Arm: rt, WorkDir: scratch, Sampling: samplingOf(arm.Pins),
		MaxTokens: arm.Pins.StopCap, TopK: x.topK, Caps: runtimes.AiderCaps(x.harnessCaps(jobKind)), NoSandbox: x.env.NoSandbox, Slot: aiderSlot,
	}, runtimes.AiderTask{Repo: repo, Files: files, Message: task.Input.Prompt, TestCommand: task.Input.TestCommand})
	// Every call the runtime answered is kept, even when the run then failed
	// or was stopped: a later call's fate never erases an earlier answer.
	out.aider = &ar
	out.calls = ar.Calls
	out.capped, out.capHit = ar.Capped, ar.CapHit
	out.version = ar.Version
	if err != nil {
		return out, err
	}
	out.files, err = tasks.RepoState(repo)
	if err != nil {
		return out, err
	}
	if len(ar.Calls) > 0 {
		out.text = ar.Calls[len(ar.Calls)-1].Text
	}
	return out, nil
}

// generationRow is callrow.Row for a call made under an arm's pins.
func generationRow(rowID, arm string, role genrecord.Role, p studies.Pins, k int, r runtimes.Result) genrecord.Row {
	return callrow.Row(rowID, arm, role, callrow.Sampling(samplingOf(p), p.StopCap), k, r)
}

// newReceipt starts a trial's receipt from the arm and the runtime's pins.
func (x *trialRunner) newReceipt(arm studies.Arm, key studies.TrialKey, attempt, parent int, rp runtimes.Pins) receipts.Receipt {
	digest := rp.ModelSHA256
	if digest == "" {
		if fa, ok := x.snap.Arm(arm.Name); ok {
			digest = fa.ModelSHA256
		}
	}
	m := rp.Machine
	if m.Cores == 0 {
		// The runtime never started (the card was too small to load it).
		m = runtimes.ReadMachine()
	}
	return receipts.Receipt{
		SchemaVersion: receipts.SchemaVersion, StudyID: x.study, ExecutionID: x.exec.ID, DesignHash: x.snap.DesignHash,
		Arm: key.Arm, JobKind: key.JobKind, TaskID: key.Task, Repeat: key.Repeat, Attempt: attempt, ParentAttempt: parent,
		ModelName: arm.Model.RegistryName, ModelDigest: digest, Runtime: arm.Runtime.Engine(),
		Harness: arm.Runtime.Harness(), HarnessVersion: cmp.Or(rp.RuntimeVersion, "not started"),
		Pins: x.pinMap(arm, rp), Machine: m.String(), NoSandbox: x.env.NoSandbox,
		StartedAt: time.Now().UTC(),
	}
}

// pinMap is the receipt's pins, with the card the trial ran at.
func (x *trialRunner) pinMap(arm studies.Arm, rp runtimes.Pins) map[string]string {
	m := pinMap(arm, rp)
	card := studies.CardOf(x.design, arm)
	m["card"] = card.Name
	m["card_memory_mib"] = fmt.Sprint(card.MemoryMiB)
	m["card_simulated"] = fmt.Sprint(card.Simulated)
	if x.res != nil {
		m["card_cgroup"] = x.res.Name()
	}
	return m
}

// pinMap flattens an arm's pins for the receipt.
func pinMap(a studies.Arm, rp runtimes.Pins) map[string]string {
	m := map[string]string{
		"quant":              a.Pins.Quant,
		"context":            fmt.Sprint(a.Pins.Context),
		"temperature":        fmt.Sprint(a.Pins.Sampling.Temperature),
		"top_k":              fmt.Sprint(a.Pins.Sampling.TopK),
		"top_p":              fmt.Sprint(a.Pins.Sampling.TopP),
		"min_p":              fmt.Sprint(a.Pins.Sampling.MinP),
		"seed":               fmt.Sprint(a.Pins.Sampling.Seed),
		"stop_cap":           fmt.Sprint(a.Pins.StopCap),
		"slots":              fmt.Sprint(a.Pins.SlotCount()),
		"runtime_build":      a.Pins.RuntimeBuild,
		"pins_source":        a.PinsSource,
		"model_file":         rp.ModelFile,
		"binary_sha256":      rp.BinarySHA256,
		"build_flags":        rp.BuildFlags,
		"kv_cache_type":      rp.KVCacheType,
		"threads":            fmt.Sprint(rp.Threads),
		"weight_repack":      rp.WeightRepack,
		"prompt_checkpoints": rp.PromptCheckpoints,
		"netns":              rp.Containment.NetNS,
		"libraries_hash":     librariesHash(rp.Libraries),
	}
	if rp.OllamaDigest != "" {
		m["ollama_digest"] = rp.OllamaDigest
	}
	if rp.ServerCaps != "" {
		// A generic server's pins as it reported using them, or "not
		// reported" where it does not say.
		m["server_caps"] = rp.ServerCaps
	}
	if rp.ServerRequest != "" {
		// What the arm's server block added to every request.
		m["server_request"] = rp.ServerRequest
	}
	if rp.Slots > 0 {
		// The slots the runtime said it serves, checked at its start.
		m["runtime_slots"] = fmt.Sprint(rp.Slots)
	}
	if a.Format() == studies.PromptCompletion {
		// The chat_template the runtime reports was not applied: the
		// prompt went as plain text with the bank's few-shot prefix.
		m["prompt_format"] = studies.PromptCompletion
	}
	// The offload pin as the design holds it, and, on a card, where the
	// runtime said it put the model (it was checked against the pin).
	maps.Copy(m, a.Pins.Offload.PinFields())
	if rp.Load != nil {
		m["load_report"] = rp.Load.String()
	}
	if rp.CPU != nil {
		// The CPU backend that computed (the variant of the processor's
		// level the runtime loaded) and its log line of features.
		m["cpu_backend"] = strings.TrimSpace(rp.CPU.Variant + " " + rp.CPU.Library)
		m["cpu_features"] = strings.Join(rp.CPU.Features, " ")
	}
	if c := rp.Containment; c.Sandboxed {
		// The containment as read back inside the runtime's sandbox: the
		// network (interfaces and routes) and the rest (identity, writable
		// mounts, limits). A receipt is evidence of both.
		m["loopback_only"] = fmt.Sprint(c.LoopbackOnly)
		m["interfaces"] = strings.Join(c.Interfaces, "; ")
		m["routes"] = strings.Join(c.Routes, "; ")
		m["containment"] = c.Confinement.Summary()
	}
	return m
}

func librariesHash(libs map[string]string) string {
	h, err := studies.Hash(libs)
	if err != nil {
		return ""
	}
	return h
}

func receiptTrial(k studies.TrialKey) receipts.TrialKey {
	return receipts.TrialKey{Arm: k.Arm, TaskID: k.Task, Repeat: k.Repeat}
}

// failedAtCard says whether a runtime that failed to start failed at the
// card: the kernel killed it for memory while it loaded the model inside
// the card's reservation, or it placed the model otherwise than its offload
// pin says (partly on the host). Either is recorded, never retried smaller.
func (x *trialRunner) failedAtCard(startErr error) bool {
	if startErr == nil {
		return false
	}
	return x.res != nil && x.oomKilled() || errors.Is(startErr, runtimes.ErrOffloadNotHeld)
}

// recordFailedAtCard stores the receipt of a trial whose runtime failed at
// the card (failedAtCard).
func (x *trialRunner) recordFailedAtCard(ctx context.Context, sink Sink, arm studies.Arm, key studies.TrialKey, startErr error) (receipts.Outcome, error) {
	attempt, parent, err := sink.NextAttempt(ctx, receiptTrial(key))
	if err != nil {
		return "", err
	}
	rec := x.newReceipt(arm, key, attempt, parent, runtimes.Pins{})
	rec.FinishedAt = time.Now().UTC()
	rec.Outcome = receipts.FailedAtCard
	if errors.Is(startErr, runtimes.ErrOffloadNotHeld) {
		rec.Detail = fmt.Sprintf("doesn't fit at this card: the runtime did not hold the offload pin (never run as a partial offload): %s", studies.FirstLine(startErr.Error()))
	} else {
		rec.Detail = fmt.Sprintf("blew the %d MiB card's memory budget while loading the model (killed by the kernel's OOM killer; never retried at a smaller context): %s",
			studies.CardOf(x.design, arm).MemoryMiB, studies.FirstLine(startErr.Error()))
	}
	if x.res != nil {
		if p, err := x.res.Peak(); err == nil {
			rec.PeakMemoryBytes = int64(p)
		}
	}
	rec.Grade = &receipts.Grade{Score: 0, Pass: false, Grader: "budget", GraderVersion: "1"}
	rec.GenerationSHA256 = genrecord.EmptySum
	if err := sink.PutReceipt(ctx, rec); err != nil {
		return "", err
	}
	return rec.Outcome, nil
}
