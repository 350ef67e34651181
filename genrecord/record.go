package genrecord

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"rig/internal/offload"
)

// SchemaVersion is written in every header. Readers refuse a higher major
// version because a replay that silently ignores new fields proves nothing.
const SchemaVersion = 1

// DefaultK is the number of alternatives recorded per step unless a study
// configures another.
const DefaultK = 5

// Line kinds.
const (
	KindHeader = "header"
	KindRow    = "row"
)

// Role is why a call was made.
type Role string

// Roles of kept calls.
const (
	RoleWriter    Role = "writer"
	RoleCritic    Role = "critic"
	RoleJudge     Role = "judge"
	RoleCandidate Role = "candidate"
	RoleAider     Role = "aider"
)

func (r Role) valid() bool {
	switch r {
	case RoleWriter, RoleCritic, RoleJudge, RoleCandidate, RoleAider:
		return true
	}
	return false
}

// StopReason is why generation ended.
type StopReason string

// Stop reasons.
const (
	StopEOS    StopReason = "stop"
	StopLength StopReason = "length"
	StopError  StopReason = "error"
	// StopRepeatLimit is a generation the runtime ended by a rule of its
	// own: Ollama stops once the same token comes more than 30 times in a
	// row, and says so only in its debug log.
	StopRepeatLimit StopReason = "repeat_limit"
)

// Pins are the stack a record was made on. Replay compares the model,
// binary and library hashes to the replaying stack before any text.
type Pins struct {
	ModelSHA256    string `json:"model_sha256"`
	ModelName      string `json:"model_name"`
	OllamaDigest   string `json:"ollama_digest,omitempty"`
	Runtime        string `json:"runtime"`
	RuntimeVersion string `json:"runtime_version"`
	BinarySHA256   string `json:"binary_sha256"`
	// Libraries maps each shared library the server loaded to its sha256.
	// An empty map means "loaded none"; a missing one is an error.
	Libraries  map[string]string `json:"libraries"`
	BuildFlags string            `json:"build_flags"`
	// EnvSHA256 is the digest of a Python server's environment (an
	// openai-server arm's installed distributions): replay starts the
	// server only if its environment still has it. Absent for rig's own
	// runtimes and for records made before it was written.
	EnvSHA256 string `json:"env_sha256,omitempty"`
	// ServerRequest is the fields an openai-server arm's spec added to
	// every request (such as {"cache_prompt":false}): they decide how the
	// server evaluated each prompt, so replay sends the same. Absent for
	// rig's own runtimes and for a server whose spec adds none.
	ServerRequest string `json:"server_request,omitempty"`
	// WeightRepack is "off" when llama-server ran with its CPU backend's
	// weight repacking off (rig's default, so that a batched pass scores
	// what the decode steps computed) and "on" when it repacked. Records
	// written before rig pinned it have none; their server repacked.
	// Replay starts the server the record's way: the two give other
	// log-probs for the same tokens.
	WeightRepack string `json:"weight_repack,omitempty"`
	// PromptCheckpoints is "off" when llama-server ran with no context
	// checkpoints (rig's default), so that it took each prompt in one batch,
	// and "on" when it could cut a prompt to save them (its default, for
	// models with sliding-window attention). Records written before rig
	// pinned it have none; their server could cut prompts.
	PromptCheckpoints string `json:"prompt_checkpoints,omitempty"`
	// Offload is the arm's offload pin when the model ran on a card (backend
	// cuda): how many layers, flash attention, where the KV cache was. A
	// record without one ran on the CPU path, as every record before the
	// pin did. Replay starts the runtime with it, on the same backend's
	// build, because the card's kernels give other log-probs than the CPU's.
	Offload *offload.Pin `json:"offload,omitempty"`
	// Context is the context the runtime ran with (the arm's pin). Replay
	// runs at it, so a row as long as the arm allowed replays; a record
	// without one (made before it was written) replays at DefaultContext.
	Context int `json:"context,omitempty"`
	// Slots is how many requests the runtime served at once (the arm's
	// pins.slots) when above one: rows made in a batch differ slightly from
	// a lone sequence's, so replay holds them to the tolerance calibrated
	// at that slot count (rig replay calibrate --slots). Absent at one slot,
	// as every record before the pin.
	Slots       int    `json:"slots,omitempty"`
	MachineLine string `json:"machine_line"`
	DesignHash  string `json:"design_hash"`
	StudyID     string `json:"study_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
}

// Repacked reports whether the record's llama-server repacked its weights:
// every record that does not say "off".
func (p Pins) Repacked() bool { return p.WeightRepack != "off" }

// DefaultContext is the context a record that names none is replayed at.
const DefaultContext = 4096

// ReplayContext is the context to replay the record at: its own, or
// DefaultContext for a record made before rig wrote it.
func (p Pins) ReplayContext() int {
	if p.Context > 0 {
		return p.Context
	}
	return DefaultContext
}

// OffloadPin is the offload pin the record's runtime held: the zero pin
// (the CPU path) for a record that carries none.
func (p Pins) OffloadPin() offload.Pin {
	if p.Offload == nil {
		return offload.Pin{}
	}
	return *p.Offload
}

// Checkpointed reports whether the record's llama-server could cut prompts
// for context checkpoints: every record that does not say "off".
func (p Pins) Checkpointed() bool { return p.PromptCheckpoints != "off" }

// Header is the first line of a record.
type Header struct {
	Kind          string `json:"kind"`
	SchemaVersion int    `json:"schema_version"`
	Pins          Pins   `json:"pins"`
}

// Alt is one of the top-K alternatives at a step.
type Alt struct {
	ID      *int    `json:"id,omitempty"`
	Text    string  `json:"text"`
	Bytes   Bytes   `json:"bytes,omitempty"`
	Logprob float64 `json:"logprob"`
}

// Step is one generated token. Logprob is nil for a step whose log-prob the
// runtime did not return (a gap); such a step carries the text only and its
// Top is empty. Gaps are counted in Row.LogprobsMissingSteps, never padded.
type Step struct {
	ID      *int     `json:"id,omitempty"`
	Text    string   `json:"text"`
	Bytes   Bytes    `json:"bytes,omitempty"`
	Logprob *float64 `json:"logprob"`
	Top     []Alt    `json:"top"`
}

// Scored reports whether the runtime gave this step's log-prob.
func (s Step) Scored() bool { return s.Logprob != nil }

// Sampling holds the sampling parameters sent with the call. Extra keeps any
// other raw parameter the runtime was sent, by its runtime name.
type Sampling struct {
	Temperature   float64        `json:"temperature"`
	TopK          int            `json:"top_k"`
	TopP          float64        `json:"top_p"`
	MinP          float64        `json:"min_p"`
	Seed          int64          `json:"seed"`
	RepeatPenalty float64        `json:"repeat_penalty,omitempty"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Extra         map[string]any `json:"extra,omitempty"`
}

// Row is one kept model call.
type Row struct {
	Kind           string `json:"kind"`
	RowID          string `json:"row_id"`
	Arm            string `json:"arm"`
	Prompt         string `json:"prompt"`
	Role           Role   `json:"role"`
	RenderedPrompt string `json:"rendered_prompt"`
	PromptTokenIDs []int  `json:"prompt_token_ids,omitempty"`
	// Text is the output text as the study kept it, when it differs from or
	// is not recoverable from the steps (for example after a gap).
	Text                 string     `json:"text,omitempty"`
	Output               []Step     `json:"output"`
	K                    int        `json:"k"`
	Sampling             Sampling   `json:"sampling"`
	StopReason           StopReason `json:"stop_reason"`
	RuntimeTokenCount    int        `json:"runtime_token_count"`
	LogprobsMissingSteps int        `json:"logprobs_missing_steps"`
	// WallMS is the original call's wall time, so replay can report its cost
	// relative to the generation it re-scores.
	WallMS float64 `json:"wall_ms,omitempty"`
}

// TokenIDs returns the output token ids, and false if any step lacks one.
func (r Row) TokenIDs() ([]int, bool) {
	ids := make([]int, 0, len(r.Output))
	for _, s := range r.Output {
		if s.ID == nil {
			return nil, false
		}
		ids = append(ids, *s.ID)
	}
	return ids, true
}

// Bytes is a token's raw bytes. It is written as base64 and read from either
// base64 or a JSON array of integers (what llama-server and Ollama send).
type Bytes []byte

// MarshalJSON writes base64.
func (b Bytes) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.StdEncoding.EncodeToString(b))
}

// UnmarshalJSON accepts a base64 string or an array of 0..255 integers.
func (b *Bytes) UnmarshalJSON(data []byte) error {
	s := strings.TrimSpace(string(data))
	if s == "null" {
		*b = nil
		return nil
	}
	if strings.HasPrefix(s, "[") {
		var ints []int
		if err := json.Unmarshal(data, &ints); err != nil {
			return fmt.Errorf("bytes: %w", err)
		}
		out := make([]byte, len(ints))
		for i, v := range ints {
			if v < 0 || v > 255 {
				return fmt.Errorf("bytes[%d]: %d is not a byte (0..255)", i, v)
			}
			out[i] = byte(v)
		}
		*b = out
		return nil
	}
	var str string
	if err := json.Unmarshal(data, &str); err != nil {
		return fmt.Errorf("bytes: want base64 string or integer array: %w", err)
	}
	dec, err := base64.StdEncoding.DecodeString(str)
	if err != nil {
		return fmt.Errorf("bytes: %w", err)
	}
	*b = dec
	return nil
}

// maxLogprob allows for float rounding above log(1) = 0.
const maxLogprob = 1e-6

// Validate checks one row on its own. The error is a *LineError whose
// Field names the JSON path ("output[3].top").
func (r Row) Validate() error {
	if le := r.validate(); le != nil {
		return le
	}
	return nil
}

func (r Row) validate() *LineError {
	bad := func(field, format string, args ...any) *LineError {
		return &LineError{Field: field, Err: fmt.Errorf("%w: "+format, append([]any{ErrBadRow}, args...)...)}
	}
	if r.Kind != KindRow {
		return bad("kind", "%q, want %q", r.Kind, KindRow)
	}
	if r.RowID == "" {
		return bad("row_id", "empty (every row needs a unique id)")
	}
	if r.Arm == "" {
		return bad("arm", "empty (the model's registry name)")
	}
	if r.Prompt == "" {
		return bad("prompt", "empty (the call id)")
	}
	if !r.Role.valid() {
		return bad("role", "%q is not one of writer, critic, judge, candidate, aider", r.Role)
	}
	switch r.StopReason {
	case StopEOS, StopLength, StopError, StopRepeatLimit:
	default:
		return bad("stop_reason", "%q is not one of stop, length, error, repeat_limit", r.StopReason)
	}
	for i, id := range r.PromptTokenIDs {
		if id < 0 {
			return bad(fmt.Sprintf("prompt_token_ids[%d]", i), "%d is negative", id)
		}
	}
	if r.K < 1 {
		return bad("k", "%d, want at least 1", r.K)
	}
	if r.RuntimeTokenCount < 0 || r.LogprobsMissingSteps < 0 {
		return bad("runtime_token_count", "counts must not be negative (%d, %d)", r.RuntimeTokenCount, r.LogprobsMissingSteps)
	}
	if r.Output == nil {
		return bad("output", "missing (write [] for an empty output)")
	}
	scored := 0
	for i, s := range r.Output {
		field := fmt.Sprintf("output[%d]", i)
		if s.ID != nil && *s.ID < 0 {
			return bad(field+".id", "%d is negative", *s.ID)
		}
		if s.Logprob == nil {
			if len(s.Top) != 0 {
				return bad(field+".top", "a step without logprob must not list alternatives")
			}
			continue
		}
		scored++
		if err := checkLogprob(*s.Logprob); err != nil {
			return bad(field+".logprob", "%v", err)
		}
		if len(s.Top) != r.K {
			return &LineError{Field: field + ".top", Err: fmt.Errorf("%w: has %d entries, row k is %d (every scored step lists exactly k alternatives; rerecord the call or correct k)", ErrWrongK, len(s.Top), r.K)}
		}
		for j, a := range s.Top {
			af := fmt.Sprintf("%s.top[%d]", field, j)
			if a.ID != nil && *a.ID < 0 {
				return bad(af+".id", "%d is negative", *a.ID)
			}
			if err := checkLogprob(a.Logprob); err != nil {
				return bad(af+".logprob", "%v", err)
			}
		}
	}
	if scored+r.LogprobsMissingSteps != r.RuntimeTokenCount {
		return &LineError{Field: "runtime_token_count", Err: fmt.Errorf("%w: %d scored steps + logprobs_missing_steps %d != runtime_token_count %d (a runtime that drops log-probs must be recorded in logprobs_missing_steps; never pad)",
			ErrTokenCount, scored, r.LogprobsMissingSteps, r.RuntimeTokenCount)}
	}
	return nil
}

func checkLogprob(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%v is not finite", v)
	}
	if v > maxLogprob {
		return fmt.Errorf("%v is positive (a log-probability is at most 0)", v)
	}
	return nil
}

// requiredPins lists header pins that must be non-empty, with the fix.
func (p Pins) missing() []string {
	var out []string
	check := func(name, v string) {
		if strings.TrimSpace(v) == "" {
			out = append(out, name)
		}
	}
	check("model_sha256", p.ModelSHA256)
	check("model_name", p.ModelName)
	check("runtime", p.Runtime)
	check("runtime_version", p.RuntimeVersion)
	check("binary_sha256", p.BinarySHA256)
	check("machine_line", p.MachineLine)
	check("design_hash", p.DesignHash)
	if p.Libraries == nil {
		out = append(out, "libraries")
	}
	return out
}

// Validate checks that every required pin is present and every hash is a
// sha256 in hex.
func (p Pins) Validate() error {
	if m := p.missing(); len(m) > 0 {
		return fmt.Errorf("%w: %s (the record must name the stack it was made on; set them from the runtime's pins before writing)", ErrPinsMissing, strings.Join(prefixed("pins.", m), ", "))
	}
	if !isSHA256(p.ModelSHA256) {
		return fmt.Errorf("%w: pins.model_sha256: %q is not 64 hex digits", ErrPinsMissing, p.ModelSHA256)
	}
	if !isSHA256(p.BinarySHA256) {
		return fmt.Errorf("%w: pins.binary_sha256: %q is not 64 hex digits", ErrPinsMissing, p.BinarySHA256)
	}
	for path, sum := range p.Libraries {
		if !isSHA256(sum) {
			return fmt.Errorf("%w: pins.libraries[%q]: %q is not 64 hex digits", ErrPinsMissing, path, sum)
		}
	}
	for field, v := range map[string]string{"weight_repack": p.WeightRepack, "prompt_checkpoints": p.PromptCheckpoints} {
		if v != "" && v != "on" && v != "off" {
			return fmt.Errorf("%w: pins.%s: %q is not on or off (leave it out for a record made before rig pinned it)", ErrPinsMissing, field, v)
		}
	}
	if p.Context < 0 {
		return fmt.Errorf("%w: pins.context: %d is not a context size (leave it out for a record made before rig wrote it)", ErrPinsMissing, p.Context)
	}
	if p.Offload != nil {
		if err := p.Offload.Validate(); err != nil {
			return fmt.Errorf("%w: pins.offload: %v", ErrPinsMissing, err)
		}
	}
	return nil
}

func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Validate checks a header line; the error is a *LineError for line 1.
func (h Header) Validate() error {
	if le := h.validate(); le != nil {
		return le
	}
	return nil
}

func (h Header) validate() *LineError {
	if h.Kind != KindHeader {
		return &LineError{Line: 1, Field: "kind", Err: fmt.Errorf("%w: first line has kind %q, want %q (a record starts with its header)", ErrNoHeader, h.Kind, KindHeader)}
	}
	if h.SchemaVersion < 1 || h.SchemaVersion > SchemaVersion {
		return &LineError{Line: 1, Field: "schema_version", Err: fmt.Errorf("%w: %d, this reader knows 1..%d (use a newer rig)", ErrNoHeader, h.SchemaVersion, SchemaVersion)}
	}
	if err := h.Pins.Validate(); err != nil {
		return &LineError{Line: 1, Field: "pins", Err: err}
	}
	return nil
}
