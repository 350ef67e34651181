package studies

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"rig/internal/jsonerr"
	"rig/internal/offload"
	"rig/internal/serverspec"
	"rig/internal/sizecap"
	"rig/internal/textcheck"
)

// Design is a study's design file: everything written down before any run.
// Field names are the JSON keys of the file; see DesignSchema for the
// published schema and ExampleDesign for a commented example.
type Design struct {
	Name         string       `json:"name"`
	Sentences    Sentences    `json:"sentences"`
	JobKinds     []JobKind    `json:"job_kinds"`
	Arms         []Arm        `json:"arms"`
	Items        []Item       `json:"items"`
	Pairs        []Pair       `json:"pairs,omitempty"`
	Repeats      int          `json:"repeats"`
	DecisionRule DecisionRule `json:"decision_rule"`
	Power        Power        `json:"power"`
	PBestBar     float64      `json:"p_best_bar"`
	Budget       Budget       `json:"budget"`
	CardProfile  CardProfile  `json:"card_profile"`
	// Guardrails are metrics watched against the incumbent: each may block
	// a winner, none can make one (see guardrail.go).
	Guardrails []Guardrail `json:"guardrails,omitempty"`
	// WinnerPolicy, when set, is what a challenger must also meet before
	// "switch to the challenger" stands; left out, the rule alone decides.
	WinnerPolicy *WinnerPolicy `json:"winner_policy,omitempty"`
	// Stopping, when set, lets an execution stop between blocks once every
	// monitored pair is settled (see stopping.go); left out, every planned
	// trial runs.
	Stopping *Stopping `json:"stopping,omitempty"`
	// Kind is "comparison" (the default when empty) or "card": a card
	// sub-study, where the card profile is the treatment. Its arms run at
	// card_profile (the reference) and at each of CardProfiles; see
	// ExpandCards.
	Kind         string        `json:"kind,omitempty"`
	CardProfiles []CardProfile `json:"card_profiles,omitempty"`
	// ConfirmDoesntFit runs, in a card sub-study, the first trial of every
	// cell the preflight says does not fit, inside its memory reservation,
	// as evidence for the verdict. The cell stays "doesn't fit" whatever
	// happens; it is never retried at a smaller context.
	ConfirmDoesntFit bool `json:"confirm_doesnt_fit,omitempty"`
	// TopK is how many log-probabilities per step the generation record
	// keeps; zero means DefaultTopK.
	TopK int `json:"top_k,omitempty"`
	// LicenceRegistry is the studio's licence registry file the items are
	// checked against, relative to the design file's folder; empty leaves
	// the choice to --registry, $RIG_LICENCE_REGISTRY or the bundled one
	// (see ChooseLicenceRegistry).
	LicenceRegistry string `json:"licence_registry,omitempty"`
	// AllowPathsOutside lets task_bank and licence_registry name files
	// outside the design's folder and the repository holding it (see
	// AllowedRoot); left out, such a path is refused.
	AllowPathsOutside bool `json:"allow_paths_outside,omitempty"`

	// ExcludeTasks are tasks of a bank this study leaves out, each with the
	// reason: part of the design (and so of its hash and the snapshot), left
	// out of the plan, and listed with the reason in the report. Nothing is
	// ever left out without one.
	ExcludeTasks []ExcludedTask `json:"exclude_tasks,omitempty"`
}

// ExcludedTask is one task left out of a study, and why.
type ExcludedTask struct {
	JobKind string `json:"job_kind"`
	Task    string `json:"task"`
	Why     string `json:"why"`
}

// DefaultTopK is the generation record's top-K when the design leaves it out.
const DefaultTopK = 5

// Sentences are the three sentences the Director reads before anything else.
type Sentences struct {
	JobKindsAndDecisions string `json:"job_kinds_and_decisions"`
	CandidatesAndHowRun  string `json:"candidates_and_how_run"`
	WhyTheMeasure        string `json:"why_the_measure"`
}

// JobKind is one kind of job a decision is for, with its own task bank,
// ranking measure and grader.
type JobKind struct {
	Name           string  `json:"name"`
	Decision       string  `json:"decision"`
	TaskBank       string  `json:"task_bank"`
	RankingMeasure Measure `json:"ranking_measure"`
	Grader         Grader  `json:"grader"`
	// Judge names the arm (role "judge") that grades the job kind when its
	// grader is {"name": "judge"}: it sees each task's outputs blind, after
	// the candidates have run, and its grades are the job kind's scores.
	Judge string `json:"judge,omitempty"`
	// Reference names the arm whose kept outputs every other arm of the job
	// kind is held to token by token (the fidelity measure, docs/fidelity.md):
	// a ranked arm with the same tokenizer as each of them. Left out, a
	// design hashes as it did before the field (reference.go).
	Reference string `json:"reference,omitempty"`
	// IncludeHoldout runs the bank's hold-out tasks too; reports say so.
	IncludeHoldout bool `json:"include_holdout,omitempty"`
	// SampleTasks, when set, runs that many of the bank's tasks, taken in
	// turn from each template (sorted by template, then task id) so every
	// template is covered before any is taken twice. The sample is fixed at
	// freeze; zero runs every task.
	SampleTasks int `json:"sample_tasks,omitempty"`
	// HarnessCaps are the harness's caps for this job kind (Aider's turns,
	// output tokens and wall time), held equal across its arms; unset ones
	// keep rig's defaults. A capped trial is reported apart.
	HarnessCaps *HarnessCaps `json:"harness_caps,omitempty"`
}

// HarnessCaps caps a harness run (one trial of an Aider arm).
type HarnessCaps struct {
	Turns  int    `json:"turns,omitempty"`  // model calls
	Tokens int    `json:"tokens,omitempty"` // output tokens over all calls
	Wall   string `json:"wall,omitempty"`   // a duration, e.g. "5m"
}

// Measure is the one pre-registered ranking measure of a job kind.
type Measure struct {
	Name      string `json:"name"`
	Direction string `json:"direction"` // "higher" or "lower" is better
}

// Grader names a versioned grader; changing what it returns is a version bump.
type Grader struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// Arm is one candidate (or the incumbent, or a judge) at its pins in its runtime.
type Arm struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// JobKinds lists the job kinds the arm runs; empty means all of them.
	JobKinds []string `json:"job_kinds,omitempty"`
	Model    Model    `json:"model"`
	Runtime  Runtime  `json:"runtime"`
	// Server describes the OpenAI-compatible server an "openai-server" arm
	// runs on (see package serverspec); nil for every other runtime.
	Server *serverspec.Spec `json:"server,omitempty"`
	// Guest marks a model inside a runtime built for another family: it may
	// answer how well that runtime drives models, and never ranks them.
	Guest      bool   `json:"guest,omitempty"`
	Pins       Pins   `json:"pins"`
	PinsSource string `json:"pins_source"`
	// PromptFormat is how a task's prompt reaches the model: "chat" (the
	// default when empty: one user turn through the model's chat template)
	// or "completion" (the bank's few-shot prefix, the prompt and its answer
	// cue as plain text, for a pretrained base model). See promptformat.go.
	PromptFormat string `json:"prompt_format,omitempty"`
	// Card and BaseArm are written by rig, never by hand: in a card
	// sub-study each arm becomes one cell per card profile (see expandCards).
	Card    *CardProfile `json:"card,omitempty"`
	BaseArm string       `json:"base_arm,omitempty"`
}

// Model identifies the weights an arm runs.
type Model struct {
	RegistryName string `json:"registry_name"`
	// File is a path to the GGUF or a reference such as "${SMOLLM2_GGUF}".
	File         string `json:"file"`
	SHA256       string `json:"sha256,omitempty"`
	OllamaDigest string `json:"ollama_digest,omitempty"`
	// OllamaTag names the model by its tag in the caller's own Ollama
	// library, in place of File: the command line resolves it to the tag's
	// GGUF blob (File) and its digest (SHA256) before the daemon sees the
	// design (see ollamatag.go). The arm still runs in rig's own Ollama.
	OllamaTag string `json:"ollama_tag,omitempty"`
}

// Pins are held for the whole confirmatory run.
type Pins struct {
	Quant        string   `json:"quant"`
	Context      int      `json:"context"`
	Sampling     Sampling `json:"sampling"`
	StopCap      int      `json:"stop_cap"`
	Effort       Effort   `json:"effort"`
	RuntimeBuild string   `json:"runtime_build"`
	// Offload is where the runtime puts the model: the build's backend,
	// the layers on the card, flash attention and the KV cache's place. The
	// zero value (omitted) is the CPU path. It is held like the other pins:
	// on every receipt, and checked against the runtime's load report.
	Offload offload.Pin `json:"offload,omitzero"`
	// Slots is how many requests the arm's runtime serves at once and how
	// many of the arm's trials rig keeps in flight; 0 (left out) is 1. Left
	// out, a design hashes as it did before slots were a pin.
	Slots int `json:"slots,omitempty"`
}

// MaxSlots bounds pins.slots: each slot holds a whole pinned context of KV
// cache, so more would rarely fit, and llama.cpp's own evaluations stop
// gaining well before it.
const MaxSlots = 64

// SlotCount is how many trials of the arm run at once: 1 when unset.
func (p Pins) SlotCount() int { return max(p.Slots, 1) }

// Sampling is the sampler configuration sent with every call.
type Sampling struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	MinP        float64 `json:"min_p"`
	Seed        int64   `json:"seed"`
}

// Effort is the raw parameter actually sent. A level the model cannot take
// is a label, not a setting: Graded false records it as unsupported.
type Effort struct {
	RawParameter string `json:"raw_parameter"`
	Value        string `json:"value"`
	Graded       bool   `json:"graded"`
}

// Item is anything the design puts to work, with its licence registry id and
// the use made of it.
type Item struct {
	Role       string `json:"role"`
	Name       string `json:"name"`
	RegistryID string `json:"registry_id"`
	Use        string `json:"use"`
}

// Pair is a pairwise comparison named in advance. Empty JobKind means every
// job kind both arms run.
type Pair struct {
	Challenger string `json:"challenger"`
	Incumbent  string `json:"incumbent"`
	JobKind    string `json:"job_kind,omitempty"`
}

// DecisionRule is the rule written in full before any run: the text the
// Director read, and the same rule as ordered clauses where the first clause
// whose condition holds assigns the outcome.
type DecisionRule struct {
	Text       string   `json:"text"`
	Alpha      float64  `json:"alpha"`
	Correction string   `json:"correction"`
	Clauses    []Clause `json:"clauses"`
	Otherwise  string   `json:"otherwise"`
}

// Clause is one ordered step of the decision rule.
type Clause struct {
	When   string `json:"when"`
	Assign string `json:"assign"`
	// MaxCostRatio bounds a challenger's wall time against the incumbent's
	// for the "challenger_costs_more" condition.
	MaxCostRatio float64 `json:"max_cost_ratio,omitempty"`
}

// Conditions a decision clause may name; analysis evaluates them.
const (
	WhenUnderpowered       = "underpowered"          // task count cannot see the stated difference
	WhenPBestBelowBar      = "p_best_below_bar"      // the best model's P(best) is under p_best_bar: a tie
	WhenChallengerBetter   = "challenger_better"     // Holm-adjusted exact test significant, challenger ahead
	WhenChallengerWorse    = "challenger_worse"      // Holm-adjusted exact test significant, incumbent ahead
	WhenChallengerCostMore = "challenger_costs_more" // wall time ratio above max_cost_ratio
	WhenNotShown           = "difference_not_shown"  // no significant difference
)

// Outcomes every decision rule must be able to assign.
const (
	OutcomeKeepIncumbent = "keep the incumbent"
	OutcomeNoDecision    = "no decision at this sample size"
)

// Power is the stated power of the study, sized from a pilot.
type Power struct {
	SmallestDetectableDifference float64 `json:"smallest_detectable_difference"`
	PilotDiscordance             float64 `json:"pilot_discordance"`
	TaskCount                    int     `json:"task_count"`
	Power                        float64 `json:"power,omitempty"` // default 0.8
}

// Budget caps the whole execution; a plan priced over either cap is refused.
type Budget struct {
	WallTime string  `json:"wall_time"` // a Go duration, e.g. "2h30m"
	EnergyWh float64 `json:"energy_wh"`
}

// CardProfile is the card the runs are held to.
type CardProfile struct {
	Name          string `json:"name"`
	MemoryMiB     int    `json:"memory_mib"`
	GPU           string `json:"gpu,omitempty"`
	OffloadLayers *int   `json:"offload_layers,omitempty"`
	Simulated     bool   `json:"simulated,omitempty"`
	// Context, in a card sub-study's step-down profile, replaces the arms'
	// context pin at this card; zero keeps the arm's pin.
	Context int `json:"context,omitempty"`
}

// Roles of an arm.
const (
	RoleCandidate = "candidate"
	RoleIncumbent = "incumbent"
	RoleJudge     = "judge"
)

// Runtimes an arm may name.
var runtimeNames = []string{"ollama", "llama-server", "aider+ollama", "aider+llama-server", serverspec.Kind, HarnessAider + "+" + serverspec.Kind}

// Pin sources.
const (
	PinsShared     = "shared"
	PinsProduction = "production-values"
)

// ParseError is a design file that cannot be read as JSON or YAML.
type ParseError struct {
	File string
	Line int // 1-based; 0 when unknown
	Col  int
	Err  error
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %v", e.File, e.Line, e.Col, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// ParseDesign reads a design file. file names it in errors and picks the
// format: ".yaml"/".yml" is YAML, anything else is JSON unless the first
// non-space byte says otherwise. YAML is converted to JSON and both are
// decoded strictly: an unknown field or a value of the wrong type is a
// *ValidationError with the field's JSON path. Bytes that are not UTF-8 are
// a *ParseError at their line and column (errors.Is textcheck.ErrInvalidUTF8).
func ParseDesign(file string, data []byte) (*Design, error) {
	return parseDesign(file, data, false)
}

// ParseStoredDesign reads a design rig wrote itself (a registration's or a
// snapshot's): as ParseDesign, except that null is read as an absent list.
// encoding/json writes a list it holds empty as null (items or
// decision_rule.clauses of a design built in code), and stores written
// before a user's null was refused hold them. A user's file is read by
// ParseDesign, which refuses null as the published schema does.
func ParseStoredDesign(file string, data []byte) (*Design, error) {
	return parseDesign(file, data, true)
}

func parseDesign(file string, data []byte, stored bool) (*Design, error) {
	if file == "" {
		file = "design.json"
	}
	if int64(len(data)) > DesignCap.Limit {
		return nil, &sizecap.Error{Path: file, What: DesignCap.What, Size: int64(len(data)), Limit: DesignCap.Limit, Fix: DesignCap.Fix, Exact: true}
	}
	var ue *textcheck.Error
	if errors.As(textcheck.UTF8(file, data), &ue) {
		return nil, &ParseError{File: file, Line: ue.Line, Col: ue.Col, Err: ue.Unlocated()}
	}
	jsonData, err := toJSON(file, data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, jsonSyntaxError(file, jsonData, err)
	}
	if dec.More() {
		return nil, &ParseError{File: file, Err: errors.New("more than one JSON value (a design file holds exactly one object)")}
	}
	if probs := countProblems(file, tree); len(probs) > 0 {
		return nil, &ValidationError{Problems: probs}
	}
	if err := duplicateKeys(jsonData); err != nil {
		return nil, &ParseError{File: file, Err: err}
	}
	if tree == nil {
		return nil, &ParseError{File: file, Err: errors.New("the design is null (a design file holds one object; run `rig study init` for an example)")}
	}
	var probs []Problem
	tree = checkShape(file, stored, tree, reflect.TypeFor[Design](), "", &probs)
	if len(probs) > 0 {
		return nil, &ValidationError{Problems: probs}
	}
	// checkShape wrote whole numbers spelt with a fraction or an exponent
	// (1.0, 1e2) as integers, which encoding/json alone refuses.
	if jsonData, err = json.Marshal(tree); err != nil {
		return nil, &ParseError{File: file, Err: err}
	}
	var d Design
	if err := json.Unmarshal(jsonData, &d); err != nil {
		// checkShape accepts exactly what Unmarshal does; reaching here is a bug
		// in checkShape, still reported with the file name.
		return nil, &ParseError{File: file, Err: err}
	}
	expandCards(&d)
	return &d, nil
}

func toJSON(file string, data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, &ParseError{File: file, Err: errors.New("empty file (run `rig study init` for a commented example)")}
	}
	ext := strings.ToLower(filepath.Ext(file))
	isYAML := ext == ".yaml" || ext == ".yml"
	if !isYAML && trimmed[0] != '{' && trimmed[0] != '[' {
		isYAML = ext != ".json"
	}
	if !isYAML {
		return data, nil
	}
	var node yaml.Node
	if err := yaml.Unmarshal(data, &node); err != nil {
		return nil, &ParseError{File: file, Err: err}
	}
	v, err := yamlValue(&node, 0)
	if err != nil {
		return nil, &ParseError{File: file, Line: err.line, Col: err.col, Err: err}
	}
	out, merr := json.Marshal(v)
	if merr != nil {
		return nil, &ParseError{File: file, Err: merr}
	}
	return out, nil
}

type yamlError struct {
	line, col int
	msg       string
}

func (e *yamlError) Error() string { return e.msg }

// yamlValue converts a YAML node to JSON-compatible values while keeping
// numbers as json.Number so that JSON and YAML decode the same way.
func yamlValue(n *yaml.Node, depth int) (any, *yamlError) {
	if depth > 64 {
		return nil, &yamlError{n.Line, n.Column, "nesting deeper than 64 levels"}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0], depth+1)
	case yaml.AliasNode:
		return nil, &yamlError{n.Line, n.Column, "YAML aliases are not accepted in a design file (write the value out)"}
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, &yamlError{k.Line, k.Column, "a mapping key must be a plain string"}
			}
			if _, dup := m[k.Value]; dup {
				return nil, &yamlError{k.Line, k.Column, fmt.Sprintf("key %s appears twice", jsonerr.Quote(k.Value))}
			}
			val, err := yamlValue(v, depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := yamlValue(c, depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, &yamlError{n.Line, n.Column, err.Error()}
			}
			return b, nil
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, &yamlError{n.Line, n.Column, err.Error()}
			}
			num := json.Number(strings.ReplaceAll(n.Value, "_", ""))
			if _, err := num.Float64(); err != nil {
				// YAML spellings JSON lacks (0x10, .inf): keep the value, not the spelling.
				b, merr := json.Marshal(f)
				if merr != nil {
					return nil, &yamlError{n.Line, n.Column, fmt.Sprintf("number %s has no JSON form", jsonerr.Quote(n.Value))}
				}
				num = json.Number(b)
			}
			return num, nil
		default:
			return n.Value, nil
		}
	}
	return nil, &yamlError{n.Line, n.Column, "unsupported YAML node"}
}

func jsonSyntaxError(file string, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(data, se.Offset)
		return &ParseError{File: file, Line: line, Col: col, Err: err}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &ParseError{File: file, Err: fmt.Errorf("file ends inside a value (a brace or quote is missing): %w", err)}
	}
	return &ParseError{File: file, Err: err}
}

func lineCol(data []byte, off int64) (int, int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line, col := 1, 1
	for _, b := range data[:off] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

// checkShape walks the decoded tree beside the Go type and records every
// unknown field and wrongly typed value with its JSON path, so the user sees
// arms[2].pins.quant rather than encoding/json's field name alone. It
// accepts what the published schema does: null is no value of any field
// (leave the field out instead), and a whole number may be written with a
// fraction or an exponent (1.0, 1e2), as JSON Schema's "integer" allows and
// YAML users write; it returns v with such numbers in integer form.
//
// stored says the design is rig's own writing, where a null list is an
// empty one (ParseStoredDesign).
func checkShape(file string, stored bool, v any, t reflect.Type, path string, probs *[]Problem) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	bad := func(want string) {
		*probs = append(*probs, Problem{File: file, Path: path, Kind: KindWrongType,
			Msg: fmt.Sprintf("is %s, want %s", jsonKind(v), want)})
	}
	if v == nil {
		if path == "" {
			bad("an object") // ParseDesign says so first; kept for other callers
			return v
		}
		if stored && (t.Kind() == reflect.Slice || t.Kind() == reflect.Map) {
			return v
		}
		bad(jsonerr.Kind(t.Kind()) + " (null is no value: write one, or leave the field out)")
		return v
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			bad("an object")
			return v
		}
		checkFields(file, stored, m, t, path, probs)
	case reflect.Slice:
		s, ok := v.([]any)
		if !ok {
			bad("a list")
			return v
		}
		for i, e := range s {
			s[i] = checkShape(file, stored, e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), probs)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			bad("a string (quote it)")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			bad("true or false")
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return checkWhole(v, t, bad)
	case reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			bad("a number")
			return v
		}
		if _, err := n.Float64(); err != nil {
			bad("a number in range")
		}
	}
	return v
}

// checkFields checks an object's fields in key order: an unknown field is
// named with the fields known there, a known one is checked by its type.
func checkFields(file string, stored bool, m map[string]any, t reflect.Type, path string, probs *[]Problem) {
	fields := jsonFields(t)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := fields[k]
		if !ok {
			*probs = append(*probs, Problem{File: file, Path: join(path, k), Kind: KindUnknownField,
				Msg: fmt.Sprintf("unknown field (known fields here: %s)", strings.Join(sortedKeys(fields), ", "))})
			continue
		}
		m[k] = checkShape(file, stored, m[k], f.Type, join(path, k), probs)
	}
}

// checkWhole checks a value for an integer field of type t, and returns a
// whole number written with a fraction or an exponent in integer form.
func checkWhole(v any, t reflect.Type, bad func(string)) any {
	lo, hi := intRange(t)
	want := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	n, ok := v.(json.Number)
	if !ok {
		bad(want)
		return v
	}
	i, ok := wholeNumber(n, lo, hi)
	if !ok {
		bad(want)
		return v
	}
	return json.Number(strconv.FormatInt(i, 10))
}

// intRange is the range a Go integer kind holds.
func intRange(t reflect.Type) (lo, hi int64) {
	bits := t.Bits()
	return -1 << (bits - 1), 1<<(bits-1) - 1
}

// wholeNumber reads n as an integer in lo..hi. A whole number written with a
// fraction or an exponent ("1.0", "2e3") counts; a fraction or a value out
// of range does not. The literal comes from a file, so an exponent too long
// to be a real value is judged by its float reading before any exact
// arithmetic sized by it.
func wholeNumber(n json.Number, lo, hi int64) (int64, bool) {
	if i, err := n.Int64(); err == nil {
		return i, i >= lo && i <= hi
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || f < -0x1p63 || f > 0x1p63 {
		return 0, false
	}
	if len(n) > 64 {
		return 0, false // no int64 needs 64 characters, however written
	}
	mant, exp, _ := strings.Cut(strings.ToLower(string(n)), "e")
	if e, err := strconv.Atoi(exp); exp != "" && (err != nil || e < -200 || e > 200) {
		// 64 characters of mantissa cannot bring such an exponent back
		// into int64's range: only a zero is whole here.
		if strings.Trim(mant, "+-0.") == "" {
			return 0, lo <= 0 && hi >= 0
		}
		return 0, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	i := r.Num().Int64()
	return i, i >= lo && i <= hi
}

func jsonKind(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "the string " + jsonerr.Quote(x)
	case bool:
		return fmt.Sprintf("%v", x)
	case json.Number:
		return "the number " + jsonerr.Span(x.String())
	}
	return fmt.Sprintf("%T", v)
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := make(map[string]reflect.StructField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = f
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// join is the JSON path of key under path. The key is the file's own text,
// and shows only as jsonerr.Span allows: a file that is not a design (a
// password file named as one) has its lines read as keys.
func join(path, key string) string {
	key = jsonerr.Span(key)
	if path == "" {
		return key
	}
	return path + "." + key
}

// EffectiveTopK is the design's top-K with the default applied.
func (d *Design) EffectiveTopK() int {
	if d.TopK == 0 {
		return DefaultTopK
	}
	return d.TopK
}

// RunsJobKind reports whether the arm takes part in the named job kind.
func (a *Arm) RunsJobKind(name string) bool {
	if len(a.JobKinds) == 0 {
		return true
	}
	for _, k := range a.JobKinds {
		if k == name {
			return true
		}
	}
	return false
}

// ArmsFor returns the indexes of the arms that run the job kind, judges excluded.
func (d *Design) ArmsFor(jobKind string) []int {
	var out []int
	for i := range d.Arms {
		if d.Arms[i].Role != RoleJudge && d.Arms[i].RunsJobKind(jobKind) {
			out = append(out, i)
		}
	}
	return out
}

// SlotsDiffer names, for the report, each job kind whose arms run at
// different slot counts: under pins_source "shared" validation refuses
// that, so these are production-values arms, and their speed and cost
// compare loads as well as models.
func (d *Design) SlotsDiffer() []string {
	var out []string
	for _, jk := range d.JobKinds {
		var parts []string
		seen := map[int]bool{}
		for _, i := range d.ArmsFor(jk.Name) {
			a := d.Arms[i]
			seen[a.Pins.SlotCount()] = true
			parts = append(parts, fmt.Sprintf("%s %d", a.Name, a.Pins.SlotCount()))
		}
		if len(seen) > 1 {
			out = append(out, fmt.Sprintf("job kind %s: the arms run at different slot counts (%s; pins_source production-values), so their speed and cost compare loads as well as models.",
				jk.Name, strings.Join(parts, ", ")))
		}
	}
	return out
}

// Arm returns the named arm, or nil.
func (d *Design) Arm(name string) *Arm {
	for i := range d.Arms {
		if d.Arms[i].Name == name {
			return &d.Arms[i]
		}
	}
	return nil
}

// ResolvedPairs returns the pairs named in advance, one per job kind. When
// the design names none, each ranking challenger is paired with the job
// kind's incumbent; guests never rank and so are never paired.
func (d *Design) ResolvedPairs() []Pair {
	var out []Pair
	for _, jk := range d.JobKinds {
		if len(d.Pairs) > 0 {
			for _, p := range d.Pairs {
				if p.JobKind != "" && p.JobKind != jk.Name {
					continue
				}
				c, in := d.Arm(p.Challenger), d.Arm(p.Incumbent)
				if c == nil || in == nil || !c.RunsJobKind(jk.Name) || !in.RunsJobKind(jk.Name) {
					continue
				}
				out = append(out, Pair{Challenger: p.Challenger, Incumbent: p.Incumbent, JobKind: jk.Name})
			}
			continue
		}
		var inc string
		for _, i := range d.ArmsFor(jk.Name) {
			if d.Arms[i].Role == RoleIncumbent {
				inc = d.Arms[i].Name
			}
		}
		if inc == "" {
			continue
		}
		for _, i := range d.ArmsFor(jk.Name) {
			a := d.Arms[i]
			if a.Role == RoleCandidate && !a.Guest {
				out = append(out, Pair{Challenger: a.Name, Incumbent: inc, JobKind: jk.Name})
			}
		}
	}
	return out
}

// duplicateKeys finds an object key given twice, which encoding/json would
// silently resolve to the last value.
func duplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		path  string
		keys  map[string]bool // nil for arrays
		index int
		key   string // the key whose value comes next
		inVal bool   // key has been read and its value not yet ("" is a key too)
	}
	var stack []*frame
	child := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if f.keys == nil {
			p := fmt.Sprintf("%s[%d]", f.path, f.index)
			f.index++
			return p
		}
		return join(f.path, f.key)
	}
	expectKey := func() bool {
		if len(stack) == 0 {
			return false
		}
		f := stack[len(stack)-1]
		return f.keys != nil && !f.inVal
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil // syntax errors are reported by the decoder proper
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				f := &frame{path: child()}
				if d == '{' {
					f.keys = map[string]bool{}
				}
				if len(stack) > 0 && stack[len(stack)-1].keys != nil {
					stack[len(stack)-1].inVal = false
				}
				stack = append(stack, f)
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		}
		if expectKey() {
			f := stack[len(stack)-1]
			k := tok.(string)
			if f.keys[k] {
				return fmt.Errorf("%s: key appears twice (keep one)", join(f.path, k))
			}
			f.keys[k] = true
			f.key, f.inVal = k, true
			continue
		}
		child()
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].inVal = false
		}
	}
}
