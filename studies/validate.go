package studies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"rig/internal/jsonerr"
	"rig/internal/layout"
	"rig/internal/offload"
	"slices"
	"strings"
	"time"
)

// ErrInvalidDesign classifies every *ValidationError.
var ErrInvalidDesign = errors.New("invalid design")

// ProblemKind classifies a Problem so callers and tests can tell them apart.
type ProblemKind string

// Kinds of design problems.
const (
	KindUnknownField  ProblemKind = "unknown_field"
	KindWrongType     ProblemKind = "wrong_type"
	KindMissing       ProblemKind = "missing"
	KindInvalid       ProblemKind = "invalid"
	KindUnknownRef    ProblemKind = "unknown_reference"
	KindDuplicate     ProblemKind = "duplicate"
	KindUnknownRT     ProblemKind = "unknown_runtime"
	KindPinsDiffer    ProblemKind = "pins_differ"
	KindQuantMismatch ProblemKind = "quant_mismatch"
	KindUnreadable    ProblemKind = "unreadable_asset"
	KindOutsideRoot   ProblemKind = "path_outside"
	// KindBaseModel is an arm that would apply a chat template to a
	// pretrained base model (see ModelFormat.Instruct).
	KindBaseModel ProblemKind = "base_model_in_chat"
)

// Problem is one thing wrong with a design, located by its JSON path.
type Problem struct {
	File string
	Path string
	Kind ProblemKind
	Msg  string // says what is wrong and what to do
}

func (p Problem) Error() string {
	if p.Path == "" {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", p.File, p.Path, p.Msg)
}

// ValidationError carries every problem found, so one edit fixes them all.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalidDesign) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidDesign }

// Has reports whether a problem of the kind sits at the path.
func (e *ValidationError) Has(kind ProblemKind, path string) bool {
	for _, p := range e.Problems {
		if p.Kind == kind && p.Path == path {
			return true
		}
	}
	return false
}

// QuantReader reads the quant a model file actually holds, e.g. "Q4_1".
// The preflight package's GGUF reader provides it.
type QuantReader func(path string) (string, error)

// ValidateOptions carries what validation needs from outside the design.
type ValidateOptions struct {
	// File names the design in messages; "design.json" when empty.
	File string
	// Lookup expands "${NAME}" references in model files (os.LookupEnv, or
	// provision.Lookup: the environment, then installed.env under
	// $RIG_CACHE). Nil: references are not expanded and the quant check
	// skips them.
	Lookup func(name string) (string, bool)
	// BaseDir resolves relative model paths; the design file's folder.
	BaseDir string
	// Quant, when set, checks every arm's pinned quant against its file.
	Quant QuantReader
	// Format, when set, reads every chat-format arm's model metadata and
	// refuses a base model given a chat template (GGUFFormat).
	Format FormatReader
	// Vocab, when set, reads the tokenizer of every arm measured against a
	// job kind's reference, and of the reference (reference.go).
	Vocab VocabReader
}

// Bounds on design values: past them no run can honour the value, so it is
// a typo or a hostile file. The schema states the same bounds.
const (
	MaxRepeats      = 100
	MaxSampleTasks  = 100000
	MaxTaskCount    = 100000
	MaxArms         = 64
	MaxJobKinds     = 32
	MaxCardProfiles = 16
	MaxContext      = 1 << 20
	MaxSamplingTopK = 1 << 20
	MaxTopK         = 20
	MaxTurns        = 1000
	MaxTokens       = 10_000_000
	MaxGraderVer    = 1000
	MaxOffloadLayer = 1024
	MaxCostRatio    = 1000
	MaxEnergyWh     = 1_000_000
	MaxWallTime     = 30 * 24 * time.Hour
	MaxHarnessWall  = 24 * time.Hour
	// MaxSeed is the largest sampling seed both runtimes honour: llama.cpp
	// (llama-server, and Ollama's runner) keeps a seed in 32 bits and reads
	// 0xFFFFFFFF (and Ollama -1) as "pick one at random", so a larger or a
	// negative seed is cut or thrown away and the pin would not hold.
	MaxSeed = 1<<32 - 2
)

var (
	// nameRE is layout's study name rule: a design's name becomes its
	// folder, and the daemon checks a name from a request by the same rule.
	nameRE   = regexp.MustCompile(layout.StudyNameRule)
	sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
	refRE    = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// Validate checks a parsed design and returns a *ValidationError listing
// every problem, or nil. It reads model files only through opts.Quant.
func Validate(ctx context.Context, d *Design, opts ValidateOptions) error {
	v := validator{file: opts.File, d: d}
	if v.file == "" {
		v.file = "design.json"
	}
	v.top()
	v.jobKinds()
	v.arms()
	v.promptFormats()
	v.sharedPins()
	v.items()
	v.pairs()
	v.judges()
	v.references()
	v.rule()
	v.power()
	v.guardrails()
	v.winnerPolicy()
	v.stopping()
	v.excludeTasks()
	v.paths(opts)
	if opts.Quant != nil {
		v.quants(ctx, opts)
	}
	if opts.Format != nil {
		v.baseModels(ctx, opts)
	}
	if opts.Vocab != nil {
		v.referenceVocabs(ctx, opts)
	}
	if len(v.probs) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.probs}
}

type validator struct {
	file  string
	d     *Design
	probs []Problem
}

func (v *validator) add(kind ProblemKind, path, format string, args ...any) {
	for i, a := range args {
		// Any string kind (a Runtime too) but rig's own lists.
		if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
			if _, own := a.(nameList); !own {
				args[i] = echo(rv.String())
			}
		}
	}
	v.probs = append(v.probs, Problem{File: v.file, Path: path, Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

// echo is a string from the design as a message shows it: %q quotes it
// with jsonerr.Quote, which cuts a long one to its first characters and
// says its length, and %s and %v cut one longer than maxEcho the same way,
// so a megabyte arm name costs a line, not a megabyte, in every message.
type echo string

// maxEcho is the longest text %s shows whole: rig's own lists of names
// (runtimes, arms, job kinds) fit; a value pasted by mistake does not.
const maxEcho = 512

func (e echo) Format(f fmt.State, verb rune) {
	s := string(e)
	switch {
	case verb == 'q':
		s = jsonerr.Quote(s)
	case len(s) > maxEcho:
		cut := []rune(s)
		if len(cut) > jsonerr.MaxSpan {
			cut = cut[:jsonerr.MaxSpan]
		}
		s = fmt.Sprintf("%s… (%d bytes)", string(cut), len(s))
	}
	io.WriteString(f, s)
}

func (v *validator) need(path, value, fix string) bool {
	if strings.TrimSpace(value) == "" {
		v.add(KindMissing, path, "missing (%s)", fix)
		return false
	}
	return true
}

func (v *validator) top() {
	d := v.d
	if v.need("name", d.Name, "name the study; it names the study's store") && !nameRE.MatchString(d.Name) {
		v.add(KindInvalid, "name", "%q: use lowercase letters, digits, '.', '-' or '_', at most 64 (it names the study's store file)", d.Name)
	}
	v.need("sentences.job_kinds_and_decisions", d.Sentences.JobKindsAndDecisions,
		"write the job kinds and the decision each one feeds, e.g. \"which local model writes apply items\"")
	v.need("sentences.candidates_and_how_run", d.Sentences.CandidatesAndHowRun,
		"write the candidates and the incumbent, with how each is run")
	v.need("sentences.why_the_measure", d.Sentences.WhyTheMeasure,
		"write why the ranking measure answers the decision; if it is hard to write, the measure is wrong")
	if d.Repeats < 1 || d.Repeats > MaxRepeats {
		v.add(KindInvalid, "repeats", "%d: must be at least 1 and at most %d (repeats are the seed policy; start at 1 for screening)", d.Repeats, MaxRepeats)
	}
	if !(d.PBestBar > 0 && d.PBestBar < 1) {
		v.add(KindInvalid, "p_best_bar", "%v: must be between 0 and 1, e.g. 0.8 (a best model under it is reported as a tie)", d.PBestBar)
	}
	if d.TopK < 0 || d.TopK > MaxTopK {
		v.add(KindInvalid, "top_k", "%d: must be 0..%d (0 or left out means %d)", d.TopK, MaxTopK, DefaultTopK)
	}
	if v.need("budget.wall_time", d.Budget.WallTime, "cap the execution's wall time, e.g. \"2h\"") {
		if dur, err := time.ParseDuration(d.Budget.WallTime); err != nil || dur <= 0 {
			v.add(KindInvalid, "budget.wall_time", "%q: write a positive duration such as \"90m\" or \"2h30m\"", d.Budget.WallTime)
		} else if dur > MaxWallTime {
			v.add(KindInvalid, "budget.wall_time", "%q is more than %s: cap one execution at 720h (30 days) or less, e.g. \"2h30m\"", d.Budget.WallTime, "720h")
		}
	}
	if !(d.Budget.EnergyWh > 0 && d.Budget.EnergyWh <= MaxEnergyWh) {
		v.add(KindInvalid, "budget.energy_wh", "%v: cap the energy in watt-hours, above 0 and at most %d (1 MWh)", d.Budget.EnergyWh, MaxEnergyWh)
	}
	v.cards()
}

func (v *validator) jobKinds() {
	if len(v.d.JobKinds) == 0 {
		v.add(KindMissing, "job_kinds", "no job kinds (add at least one, with its task bank, ranking measure and grader)")
	}
	if n := len(v.d.JobKinds); n > MaxJobKinds {
		v.add(KindInvalid, "job_kinds", "%d job kinds: at most %d (split the decisions into several studies)", n, MaxJobKinds)
	}
	seen := map[string]int{}
	for i, jk := range v.d.JobKinds {
		p := fmt.Sprintf("job_kinds[%d]", i)
		if v.need(p+".name", jk.Name, "name the job kind") {
			if j, dup := seen[jk.Name]; dup {
				v.add(KindDuplicate, p+".name", "%q is already job_kinds[%d] (names must be unique)", jk.Name, j)
			}
			seen[jk.Name] = i
		}
		v.need(p+".decision", jk.Decision, "say which decision this job kind feeds")
		v.need(p+".task_bank", jk.TaskBank, "give the path of the job kind's task bank (JSONL)")
		v.need(p+".ranking_measure.name", jk.RankingMeasure.Name, "name the one pre-registered ranking measure, e.g. \"pass_rate\"")
		if d := jk.RankingMeasure.Direction; d != "higher" && d != "lower" {
			v.add(KindInvalid, p+".ranking_measure.direction", "%q: write \"higher\" or \"lower\" (which way is better)", d)
		}
		v.fidelityMeasure(p, jk)
		v.need(p+".grader.name", jk.Grader.Name, "name the grader")
		if jk.Grader.Version < 1 || jk.Grader.Version > MaxGraderVer {
			v.add(KindInvalid, p+".grader.version", "%d: give the grader's version, 1..%d (changing what a grader returns is a version bump)", jk.Grader.Version, MaxGraderVer)
		}
		if jk.SampleTasks < 0 || jk.SampleTasks > MaxSampleTasks {
			v.add(KindInvalid, p+".sample_tasks", "%d: must be 0..%d (0 or left out runs every task of the bank)", jk.SampleTasks, MaxSampleTasks)
		}
		if c := jk.HarnessCaps; c != nil {
			if c.Turns < 0 || c.Turns > MaxTurns {
				v.add(KindInvalid, p+".harness_caps.turns", "%d: give the most model calls per trial, 1 or more and at most %d (leave it out for the default %d)", c.Turns, MaxTurns, defaultAiderCaps.Turns)
			}
			if c.Tokens < 0 || c.Tokens > MaxTokens {
				v.add(KindInvalid, p+".harness_caps.tokens", "%d: give the most output tokens per trial, 1 or more and at most %d (leave it out for the default %d)", c.Tokens, MaxTokens, defaultAiderCaps.Tokens)
			}
			if c.Wall != "" && c.Wall != AutoWall {
				if d, err := time.ParseDuration(c.Wall); err != nil || d <= 0 || d > MaxHarnessWall {
					v.add(KindInvalid, p+".harness_caps.wall", "%q: write %q (derived from this machine's measured speed) or a positive duration up to 24h such as \"5m\" or \"90s\" (leave it out for the default %s)", c.Wall, AutoWall, defaultAiderCaps.Wall)
				}
			}
		}
	}
}

func (v *validator) knownJobKind(name string) bool {
	return slices.ContainsFunc(v.d.JobKinds, func(j JobKind) bool { return j.Name == name })
}

// nameList is rig's own list of the design's names, each cut as
// jsonerr.Quote cuts it; add shows it whole.
type nameList string

func (v *validator) jobKindNames() nameList {
	names := make([]string, len(v.d.JobKinds))
	for i, j := range v.d.JobKinds {
		names[i] = jsonerr.Quote(j.Name)
	}
	return nameList(strings.Join(names, ", "))
}

func (v *validator) armNames() nameList {
	names := make([]string, len(v.d.Arms))
	for i, a := range v.d.Arms {
		names[i] = jsonerr.Quote(a.Name)
	}
	return nameList(strings.Join(names, ", "))
}

func (v *validator) arms() {
	if len(v.d.Arms) < 2 {
		v.add(KindMissing, "arms", "%d arms: a comparison needs at least an incumbent and one candidate", len(v.d.Arms))
	}
	if n := v.writtenArms(); n > MaxArms {
		v.add(KindInvalid, "arms", "%d arms: at most %d (screen the candidates in several studies, each against the incumbent)", n, MaxArms)
	}
	seen := map[string]int{}
	for i, a := range v.d.Arms {
		p := v.armPath(i)
		if v.need(p+".name", a.Name, "name the arm") {
			if base, _, _ := cellName(a.Name); a.Card != nil && !nameRE.MatchString(base) {
				v.add(KindInvalid, p+".name", "%q: use lowercase letters, digits, '.', '-' or '_' (it appears in trial keys)", base)
			} else if a.Card == nil && !nameRE.MatchString(a.Name) {
				v.add(KindInvalid, p+".name", "%q: use lowercase letters, digits, '.', '-' or '_' (it appears in trial keys)", a.Name)
			}
			if j, dup := seen[a.Name]; dup {
				v.add(KindDuplicate, p+".name", "%q is already arms[%d] (names must be unique)", a.Name, j)
			}
			seen[a.Name] = i
		}
		switch a.Role {
		case RoleCandidate, RoleIncumbent, RoleJudge:
		default:
			v.add(KindInvalid, p+".role", "%q: write \"candidate\", \"incumbent\" or \"judge\"", a.Role)
		}
		if !slices.Contains(runtimeNames, string(a.Runtime)) {
			v.add(KindUnknownRT, p+".runtime", "%q is not a runtime rig drives (use one of %s)", a.Runtime, strings.Join(runtimeNames, ", "))
		}
		if a.Guest && a.Role == RoleIncumbent {
			v.add(KindInvalid, p+".guest", "a guest arm cannot be the incumbent (a guest never ranks; run the incumbent in its native runtime)")
		}
		for j, k := range a.JobKinds {
			if !v.knownJobKind(k) {
				v.add(KindUnknownRef, fmt.Sprintf("%s.job_kinds[%d]", p, j), "%q is not a job kind of this design (known: %s)", k, v.jobKindNames())
			}
		}
		v.need(p+".model.registry_name", a.Model.RegistryName, "give the model's registry name")
		if strings.TrimSpace(a.Model.OllamaTag) == "" {
			v.need(p+".model.file", a.Model.File, "give the GGUF path, a reference such as \"${SMOLLM2_GGUF}\", or an Ollama tag as ollama_tag")
		}
		if s := a.Model.SHA256; s != "" && !sha256RE.MatchString(s) {
			v.add(KindInvalid, p+".model.sha256", "%q: write 64 lowercase hex digits, or leave it out and freeze will record it", s)
		}
		v.pins(p+".pins", a.Pins)
		v.server(p, a)
		if o := a.Pins.Offload; o.Backend == offload.BackendCUDA && a.Runtime.Engine() == "ollama" {
			// Ollama's settings reach less far than llama-server's flags.
			if o.KVOnHost {
				v.add(KindInvalid, p+".pins.offload.kv_on_host", "Ollama has no setting that keeps the KV cache on the host while its layers sit on the card; remove kv_on_host, or run the arm on llama-server")
			}
		}
		if a.PinsSource != PinsShared && a.PinsSource != PinsProduction {
			v.add(KindInvalid, p+".pins_source", "%q: write \"shared\" (same context, sampling and stop cap across the job kind) or \"production-values\" (the model's documented values)", a.PinsSource)
		}
	}
	for _, jk := range v.d.JobKinds {
		var inc, cand []int
		for _, i := range v.d.ArmsFor(jk.Name) {
			switch v.d.Arms[i].Role {
			case RoleIncumbent:
				inc = append(inc, i)
			case RoleCandidate:
				cand = append(cand, i)
			}
		}
		switch {
		case len(inc) == 0:
			v.add(KindMissing, "arms", "job kind %q has no incumbent arm (mark what runs today with role \"incumbent\")", jk.Name)
		case len(inc) > 1:
			v.add(KindInvalid, fmt.Sprintf("arms[%d].role", inc[1]), "job kind %q has a second incumbent, arms[%d] is the first (one incumbent per job kind; limit arms with job_kinds)", jk.Name, inc[0])
		}
		if len(cand) == 0 {
			v.add(KindMissing, "arms", "job kind %q has no candidate arm", jk.Name)
		}
	}
}

func (v *validator) pins(p string, pins Pins) {
	v.need(p+".quant", pins.Quant, "pin the quant, e.g. \"Q4_K_M\"")
	if pins.Context <= 0 || pins.Context > MaxContext {
		v.add(KindInvalid, p+".context", "%d: pin the context length in tokens, 1..%d", pins.Context, MaxContext)
	}
	if pins.StopCap <= 0 {
		v.add(KindInvalid, p+".stop_cap", "%d: pin the stop cap (maximum output tokens)", pins.StopCap)
	}
	if pins.StopCap > 0 && pins.Context > 0 && pins.StopCap >= pins.Context {
		v.add(KindInvalid, p+".stop_cap", "%d is not below the context %d (leave room for the prompt)", pins.StopCap, pins.Context)
	}
	if pins.Slots < 0 || pins.Slots > MaxSlots {
		v.add(KindInvalid, p+".slots", "%d: run 1..%d trials at once (0 or left out means 1)", pins.Slots, MaxSlots)
	}
	if err := pins.Offload.Validate(); err != nil {
		v.add(KindInvalid, p+".offload", "%v", err)
	}
	s := pins.Sampling
	if s.Temperature < 0 || s.Temperature > 5 {
		v.add(KindInvalid, p+".sampling.temperature", "%v: must be 0..5", s.Temperature)
	}
	if s.TopK < 0 || s.TopK > MaxSamplingTopK {
		v.add(KindInvalid, p+".sampling.top_k", "%d: must be 0 (off) to %d", s.TopK, MaxSamplingTopK)
	}
	if s.Seed < 0 || s.Seed > MaxSeed {
		v.add(KindInvalid, p+".sampling.seed", "%d: pin a seed from 0 to %d (the runtimes keep 32 bits of it and read 4294967295 or -1 as a random seed, so the pin would not hold)", s.Seed, MaxSeed)
	}
	if s.TopP < 0 || s.TopP > 1 {
		v.add(KindInvalid, p+".sampling.top_p", "%v: must be 0..1", s.TopP)
	}
	if s.MinP < 0 || s.MinP > 1 {
		v.add(KindInvalid, p+".sampling.min_p", "%v: must be 0..1", s.MinP)
	}
	v.need(p+".effort.raw_parameter", pins.Effort.RawParameter,
		"write the raw parameter actually sent, or \"none\" when the model takes no effort setting")
	if pins.Effort.Graded && strings.TrimSpace(pins.Effort.Value) == "" {
		v.add(KindMissing, p+".effort.value", "a graded effort needs the level sent")
	}
	v.need(p+".runtime_build", pins.RuntimeBuild, "pin the runtime build, e.g. \"llama.cpp b6123\" or \"ollama v0.17.4\"")
}

// sharedPins holds context, sampling, stop cap and slots equal across the
// arms of a job kind that say pins_source "shared"; quant, effort and
// runtime build belong to the model and runtime and may differ.
func (v *validator) sharedPins() {
	for _, jk := range v.d.JobKinds {
		first := -1
		for _, i := range v.d.ArmsFor(jk.Name) {
			a := v.d.Arms[i]
			if a.PinsSource != PinsShared {
				continue
			}
			if first < 0 {
				first = i
				continue
			}
			if a.Card != nil && v.d.Arms[first].Card != nil && a.Card.Name != v.d.Arms[first].Card.Name {
				// A card sub-study's step-down profile may change the
				// context: pins are shared within one card.
				continue
			}
			f := v.d.Arms[first].Pins
			diff := func(field string, got, want any) {
				v.add(KindPinsDiffer, fmt.Sprintf("arms[%d].pins.%s", i, field),
					"%v differs from arms[%d].pins.%s %v in job kind %q (pins_source \"shared\" holds context, sampling, stop cap and slots equal across a job kind; make them equal, or set pins_source \"production-values\" for documented values)",
					got, first, field, want, jk.Name)
			}
			if a.Pins.Context != f.Context {
				diff("context", a.Pins.Context, f.Context)
			}
			if a.Pins.StopCap != f.StopCap {
				diff("stop_cap", a.Pins.StopCap, f.StopCap)
			}
			if a.Pins.SlotCount() != f.SlotCount() {
				// Arms compared at different loads measure the load.
				diff("slots", a.Pins.SlotCount(), f.SlotCount())
			}
			if a.Pins.Sampling != f.Sampling {
				// As the design writes it, not as Go prints the struct.
				got, _ := json.Marshal(a.Pins.Sampling)
				want, _ := json.Marshal(f.Sampling)
				diff("sampling", string(got), string(want))
			}
		}
	}
}

func (v *validator) items() {
	if len(v.d.Items) == 0 {
		v.add(KindMissing, "items", "no items: list every model, runtime, tool, grader and data source the design puts to work, with its licence registry id and use")
	}
	for i, it := range v.d.Items {
		p := fmt.Sprintf("items[%d]", i)
		v.need(p+".role", it.Role, "say what the item does here, e.g. \"writer\", \"runtime\", \"grader\"")
		v.need(p+".name", it.Name, "name the item")
		v.need(p+".registry_id", it.RegistryID, "give its licence registry id (add the entry to the studio's registry first if there is none)")
		v.need(p+".use", it.Use, "say the use made of it, e.g. \"inference\" or \"evaluation\"")
	}
	for i, a := range v.d.Arms {
		name := a.Model.RegistryName
		if name == "" {
			continue
		}
		if !slices.ContainsFunc(v.d.Items, func(it Item) bool { return strings.EqualFold(it.Name, name) }) {
			v.add(KindUnknownRef, fmt.Sprintf("arms[%d].model.registry_name", i),
				"%q is not listed in items (add an item with role, name %q, its licence registry_id and the use)", name, name)
		}
	}
}

func (v *validator) pairs() {
	for i, p := range v.d.Pairs {
		path := fmt.Sprintf("pairs[%d]", i)
		c, in := v.d.Arm(p.Challenger), v.d.Arm(p.Incumbent)
		if c == nil {
			v.add(KindUnknownRef, path+".challenger", "%q is not an arm of this design (known: %s)", p.Challenger, v.armNames())
		}
		if in == nil {
			v.add(KindUnknownRef, path+".incumbent", "%q is not an arm of this design (known: %s)", p.Incumbent, v.armNames())
		}
		if p.JobKind != "" && !v.knownJobKind(p.JobKind) {
			v.add(KindUnknownRef, path+".job_kind", "%q is not a job kind of this design (known: %s)", p.JobKind, v.jobKindNames())
		}
		if c == nil || in == nil {
			continue
		}
		if p.Challenger == p.Incumbent {
			v.add(KindInvalid, path, "pairs %q with itself", p.Challenger)
		}
		for _, a := range []*Arm{c, in} {
			if a.Guest {
				v.add(KindInvalid, path, "%q is a guest arm: it may describe its runtime but never ranks, so it cannot be in a pair", a.Name)
			}
			if a.Role == RoleJudge {
				v.add(KindInvalid, path, "%q is a judge, not a ranked arm", a.Name)
			}
		}
		if p.JobKind != "" && (!c.RunsJobKind(p.JobKind) || !in.RunsJobKind(p.JobKind)) {
			v.add(KindInvalid, path+".job_kind", "both arms must run job kind %q", p.JobKind)
		}
		shared := false
		for _, jk := range v.d.JobKinds {
			shared = shared || (c.RunsJobKind(jk.Name) && in.RunsJobKind(jk.Name))
		}
		if !shared {
			v.add(KindInvalid, path, "%q and %q share no job kind, so they cannot be compared", p.Challenger, p.Incumbent)
		}
	}
}

// judges checks that a judged job kind names a judge arm that can read its
// outputs, and that nothing else names a judge.
func (v *validator) judges() {
	for i, jk := range v.d.JobKinds {
		p := fmt.Sprintf("job_kinds[%d]", i)
		if jk.Grader.Name != JudgeGrader {
			if jk.Judge != "" {
				v.add(KindInvalid, p+".judge", "%q names a judge but grader.name is %q (set grader to {\"name\": %q, \"version\": %d}, or remove judge)", jk.Judge, jk.Grader.Name, JudgeGrader, JudgeGraderVersion)
			}
			continue
		}
		if jk.Grader.Version != JudgeGraderVersion {
			v.add(KindInvalid, p+".grader.version", "%d: the judge grader is at version %d (write %d)", jk.Grader.Version, JudgeGraderVersion, JudgeGraderVersion)
		}
		if !v.need(p+".judge", jk.Judge, "name the arm with role \"judge\" that grades this job kind") {
			continue
		}
		j := v.d.Arm(jk.Judge)
		switch {
		case j == nil:
			v.add(KindUnknownRef, p+".judge", "%q is not an arm of this design (known: %s)", jk.Judge, v.armNames())
			continue
		case j.Role != RoleJudge:
			v.add(KindInvalid, p+".judge", "arm %q has role %q; a judge is an arm with role \"judge\" (add one, or set that arm's role to \"judge\")", j.Name, j.Role)
		case j.Runtime.Aider():
			v.add(KindInvalid, p+".judge", "arm %q runs %q; a judge answers in its runtime directly (use \"llama-server\" or \"ollama\")", j.Name, j.Runtime)
		}
		for _, a := range v.d.ArmsFor(jk.Name) {
			if arm := v.d.Arms[a]; arm.Runtime.Aider() {
				v.add(KindInvalid, p+".grader.name", "arms[%d] (%q) runs %q: its output is a repository, which a judge does not read (grade the code job kind with the \"code\" grader)", a, arm.Name, arm.Runtime)
			}
		}
	}
}

var knownConditions = []string{WhenUnderpowered, WhenPBestBelowBar, WhenChallengerBetter, WhenChallengerWorse, WhenChallengerCostMore, WhenNotShown}

func (v *validator) rule() {
	r := v.d.DecisionRule
	v.need("decision_rule.text", r.Text, "write the decision rule in full before any run: what each outcome assigns")
	if !(r.Alpha > 0 && r.Alpha < 1) {
		v.add(KindInvalid, "decision_rule.alpha", "%v: write the family-wise alpha, e.g. 0.05", r.Alpha)
	}
	if r.Correction != "holm" {
		v.add(KindInvalid, "decision_rule.correction", "%q: write \"holm\" (Holm across job kinds and pairs)", r.Correction)
	}
	if len(r.Clauses) == 0 {
		v.add(KindMissing, "decision_rule.clauses", "write the rule as ordered clauses {when, assign}; the first that holds decides")
	}
	outcomes := []string{r.Otherwise}
	for i, c := range r.Clauses {
		p := fmt.Sprintf("decision_rule.clauses[%d]", i)
		if !slices.Contains(knownConditions, c.When) {
			v.add(KindInvalid, p+".when", "%q: use one of %s", c.When, strings.Join(knownConditions, ", "))
		}
		v.need(p+".assign", c.Assign, "say what this outcome assigns")
		if c.When == WhenChallengerCostMore && c.MaxCostRatio <= 0 {
			v.add(KindMissing, p+".max_cost_ratio", "give the wall-time ratio above which a challenger costs too much, e.g. 2")
		} else if c.MaxCostRatio < 0 || c.MaxCostRatio > MaxCostRatio {
			v.add(KindInvalid, p+".max_cost_ratio", "%v: give a wall-time ratio above 0 and at most %d, e.g. 2", c.MaxCostRatio, MaxCostRatio)
		}
		outcomes = append(outcomes, c.Assign)
	}
	v.need("decision_rule.otherwise", r.Otherwise, fmt.Sprintf("say what holds when no clause does, usually %q", OutcomeKeepIncumbent))
	for _, must := range []string{OutcomeKeepIncumbent, OutcomeNoDecision} {
		if !slices.Contains(outcomes, must) {
			v.add(KindMissing, "decision_rule", "no clause assigns %q (the rule must say when it keeps the incumbent and when the sample cannot decide)", must)
		}
	}
}

func (v *validator) power() {
	p := v.d.Power
	if !(p.SmallestDetectableDifference > 0 && p.SmallestDetectableDifference <= 1) {
		v.add(KindInvalid, "power.smallest_detectable_difference", "%v: state the smallest difference (a fraction of tasks, 0..1) the task count detects with 80%% power", p.SmallestDetectableDifference)
	}
	if !(p.PilotDiscordance > 0 && p.PilotDiscordance <= 1) {
		v.add(KindInvalid, "power.pilot_discordance", "%v: give the discordance estimated from the pilot (0..1)", p.PilotDiscordance)
	}
	if p.TaskCount < 1 || p.TaskCount > MaxTaskCount {
		v.add(KindInvalid, "power.task_count", "%d: give the task count the power was computed for, 1..%d", p.TaskCount, MaxTaskCount)
	}
	if p.Power != 0 && !(p.Power > 0 && p.Power < 1) {
		v.add(KindInvalid, "power.power", "%v: must be between 0 and 1, or left out for 0.8", p.Power)
	}
}

func (v *validator) quants(ctx context.Context, opts ValidateOptions) {
	for i, a := range v.d.Arms {
		if ctx.Err() != nil {
			return
		}
		if a.Model.File == "" || a.Pins.Quant == "" {
			continue
		}
		path, err := ModelPath(a.Model.File, opts.Lookup, opts.BaseDir)
		if err != nil {
			if opts.Lookup != nil {
				v.add(KindUnreadable, fmt.Sprintf("arms[%d].model.file", i), "%v", err)
			}
			continue
		}
		got, err := opts.Quant(path)
		if err != nil {
			fix := "check the path"
			if looksLikeOllamaTag(a.Model.File) {
				fix = fmt.Sprintf("%q looks like an Ollama tag: name it as \"model\": {\"ollama_tag\": %q}", a.Model.File, a.Model.File)
			}
			v.add(KindUnreadable, fmt.Sprintf("arms[%d].model.file", i), "cannot read the quant of %s: %v (%s)", path, err, nameList(fix))
			continue
		}
		if !strings.EqualFold(got, a.Pins.Quant) {
			v.add(KindQuantMismatch, fmt.Sprintf("arms[%d].pins.quant", i),
				"%q differs from the model file's %q (pins hold for the whole run; add a separate arm for another quant)", a.Pins.Quant, got)
		}
	}
}

// writtenArms counts the arms as the user wrote them: a card sub-study's
// cells of one arm count once.
func (v *validator) writtenArms() int {
	n := 0
	seen := map[string]bool{}
	for _, a := range v.d.Arms {
		if a.Card == nil || a.BaseArm == "" {
			n++
		} else if !seen[a.BaseArm] {
			seen[a.BaseArm] = true
			n++
		}
	}
	return n
}

// paths keeps every file a design reads (task banks, the licence registry)
// inside AllowedRoot of the design's folder, unless the design sets
// allow_paths_outside. Model files are exempt: they are large, live in the
// model cache, and are pinned by hash. Without a BaseDir there is no folder
// to hold them to, and the check is skipped.
func (v *validator) paths(opts ValidateOptions) {
	if opts.BaseDir == "" || v.d.AllowPathsOutside {
		return
	}
	base, err := filepath.Abs(opts.BaseDir)
	if err != nil {
		return
	}
	root := AllowedRoot(base)
	check := func(field, written, path string) {
		if !filepath.IsAbs(path) {
			if path, err = filepath.Abs(path); err != nil {
				return
			}
		}
		if Inside(root, path) {
			return
		}
		v.add(KindOutsideRoot, field, "%q resolves to %s, outside %s (a design reads files only inside its folder or the repository holding it, the nearest folder above it with go.mod or .git); move the file inside %s, or set \"allow_paths_outside\": true in the design to read it where it is",
			written, path, root, root)
	}
	for i, jk := range v.d.JobKinds {
		if strings.TrimSpace(jk.TaskBank) != "" {
			check(fmt.Sprintf("job_kinds[%d].task_bank", i), jk.TaskBank, BankPath(jk.TaskBank, base))
		}
	}
	if lr := v.d.LicenceRegistry; strings.TrimSpace(lr) != "" {
		if p, err := ModelPath(lr, opts.Lookup, base); err == nil {
			check("licence_registry", lr, p)
		}
	}
}

// AllowedRoot is the folder a design's paths must stay in: the nearest
// folder at or above dir holding go.mod or .git (the repository the study
// lives in, so a study may read the repository's shared banks), else dir.
func AllowedRoot(dir string) string {
	for d := dir; ; {
		for _, marker := range []string{"go.mod", ".git"} {
			if _, err := os.Lstat(filepath.Join(d, marker)); err == nil {
				return d
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// Inside reports whether path is root or below it, after symbolic links are
// resolved on both (lexically, when path does not exist yet).
func Inside(root, path string) bool {
	r, p := filepath.Clean(root), filepath.Clean(path)
	if rr, err := filepath.EvalSymlinks(r); err == nil {
		if pp, err := filepath.EvalSymlinks(p); err == nil {
			r, p = rr, pp
		}
	}
	rel, err := filepath.Rel(r, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// ErrUnsetReference is a model file reference naming an unset variable.
var ErrUnsetReference = errors.New("unset reference")

// ModelPath expands "${NAME}" references with lookup and makes a relative
// path absolute against baseDir. A reference with a nil lookup, or naming
// an unset variable, is an ErrUnsetReference.
func ModelPath(ref string, lookup func(string) (string, bool), baseDir string) (string, error) {
	var missing []string
	out := refRE.ReplaceAllStringFunc(ref, func(m string) string {
		name := refRE.FindStringSubmatch(m)[1]
		if lookup != nil {
			if val, ok := lookup(name); ok && val != "" {
				return val
			}
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%w: %s in %q is not set (run make setup, which records it in installed.env under $RIG_CACHE, or write the file's path)", ErrUnsetReference, strings.Join(missing, ", "), ref)
	}
	if strings.HasPrefix(out, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			out = filepath.Join(home, out[2:])
		}
	}
	if !filepath.IsAbs(out) && baseDir != "" {
		out = filepath.Join(baseDir, out)
	}
	return out, nil
}
