package receipts

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// SchemaVersion is the receipt schema this package writes. Every stored
// receipt and every exported row carries it, so a later study reading old
// receipts knows which fields to expect.
const SchemaVersion = 1

// Outcome is a trial's outcome class. Only counted outcomes enter the
// analysis; the others are rerun or reported apart.
type Outcome string

// The outcome classes.
const (
	// Scored: the trial ran to the end and was graded.
	Scored Outcome = "scored"
	// Preempted: stopped by the governor or the host; never scored against the
	// model, and rerun.
	Preempted Outcome = "preempted"
	// FailedAtCard: blew its stated time or memory budget; scored as a failure
	// at that card size.
	FailedAtCard Outcome = "failed_at_card"
	// Capped: hit a turn or time cap; graded, but reported apart because a cap
	// one model hits first censors it.
	Capped Outcome = "capped"
	// Error: rig or the runtime failed; not scored, and rerun only by a new
	// execution (rig study rerun), never at once (see Rerun).
	Error Outcome = "error"
)

// Counted reports whether the outcome is a score for the trial. A trial has at
// most one counted receipt per execution.
func (o Outcome) Counted() bool {
	return o == Scored || o == FailedAtCard || o == Capped
}

// Rerun is the rerun rule, the one both the local runner and the
// scale-out workflow follow: only a preempted attempt (the governor, a
// crashed runtime or a lost worker stopped it, so nothing was scored) gets
// another attempt in the same execution. An error stays on record as the
// trial's last word until `rig study rerun`: the same task would most
// likely fail the same way, and retrying it at once would hide that.
func (o Outcome) Rerun() bool { return o == Preempted }

// Valid reports whether o is one of the outcome classes.
func (o Outcome) Valid() bool {
	switch o {
	case Scored, Preempted, FailedAtCard, Capped, Error:
		return true
	}
	return false
}

// TrialKey names one trial: an arm, a task and a repeat.
type TrialKey struct {
	Arm    string
	TaskID string
	Repeat int
}

// String gives "arm|task|repeat", the form used in messages and exports.
func (k TrialKey) String() string {
	return fmt.Sprintf("%s|%s|%d", k.Arm, k.TaskID, k.Repeat)
}

// Effort is the raw parameter actually sent. A level the model cannot take is
// a label, not a setting: Graded false records it as unsupported.
type Effort struct {
	RawParameter string `json:"raw_parameter"`
	Value        string `json:"value"`
	Graded       bool   `json:"graded"`
}

// Grade is the blind grader's verdict on the trial's output.
type Grade struct {
	Score         float64 `json:"score"`
	Pass          bool    `json:"pass"`
	Grader        string  `json:"grader"`
	GraderVersion string  `json:"grader_version"`
}

// Receipt is the record of one trial (seed spec §7) in the shared schema. Its
// Attempt counts tries of the same trial inside one execution: a preempted
// trial is rerun as attempt n+1 with ParentAttempt n.
type Receipt struct {
	SchemaVersion int    `json:"schema_version"`
	StudyID       string `json:"study_id"`
	ExecutionID   string `json:"execution_id"`
	DesignHash    string `json:"design_hash"`

	Arm           string  `json:"arm"`
	JobKind       string  `json:"job_kind"`
	TaskID        string  `json:"task_id"`
	Repeat        int     `json:"repeat"`
	Attempt       int     `json:"attempt"`
	ParentAttempt int     `json:"parent_attempt"`
	Outcome       Outcome `json:"outcome"`

	ModelName      string            `json:"model_name"`
	ModelDigest    string            `json:"model_digest"`
	Runtime        string            `json:"runtime"`
	Harness        string            `json:"harness"`
	HarnessVersion string            `json:"harness_version"`
	Pins           map[string]string `json:"pins"`
	Effort         Effort            `json:"effort"`

	InputTokens    int    `json:"input_tokens"`
	ThinkingTokens int    `json:"thinking_tokens"`
	OutputTokens   int    `json:"output_tokens"`
	Truncated      bool   `json:"truncated"`
	StopReason     string `json:"stop_reason"`

	// PromptPerSecond and OutputPerSecond are the runtime's own token rates
	// over the trial's calls; zero when the runtime did not report them.
	PromptPerSecond float64 `json:"prompt_tok_s,omitempty"`
	OutputPerSecond float64 `json:"output_tok_s,omitempty"`
	// TTFTMS is the runtime's own prompt time of the trial's first call, in
	// milliseconds: its first output token is sampled from the prompt's last
	// logits, so this is the time to first token less the HTTP round trip.
	// TPOTMS is the runtime's generation time per output token over the
	// trial's calls. Zero when the runtime did not time them.
	TTFTMS float64 `json:"ttft_ms,omitempty"`
	TPOTMS float64 `json:"tpot_ms,omitempty"`

	WallMS             int64   `json:"wall_ms"`
	PeakMemoryBytes    int64   `json:"peak_memory_bytes"`
	PeakGPUMemoryBytes int64   `json:"peak_gpu_memory_bytes"`
	EnergyJoules       float64 `json:"energy_joules"`
	// EnergySource says how EnergyJoules was had: EnergyMeasuredNVML for
	// the card's energy counter over the trial (model load left out);
	// empty when nothing measured it (the report then estimates it).
	EnergySource string `json:"energy_source,omitempty"`

	Grade   *Grade `json:"grade"`
	Machine string `json:"machine"`
	// NoSandbox is true when the trial ran with --no-sandbox; such a receipt
	// is evidence of the model, not of containment.
	NoSandbox bool `json:"no_sandbox"`
	// GenerationSHA256 is the sha256 of the trial's generation records.
	GenerationSHA256 string `json:"generation_sha256"`
	Detail           string `json:"detail"`

	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
}

// EnergyMeasuredNVML is Receipt.EnergySource for energy read off the card's
// NVML energy counter.
const EnergyMeasuredNVML = "nvml"

// Trial returns the receipt's trial key.
func (r Receipt) Trial() TrialKey {
	return TrialKey{Arm: r.Arm, TaskID: r.TaskID, Repeat: r.Repeat}
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validID accepts the ids that make up keys: printable, no '|' (the key
// separator), at most 200 bytes.
func validID(s string) bool {
	if s == "" || len(s) > 200 || strings.ContainsRune(s, '|') {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// Validate checks the receipt on its own, naming the first field at fault.
func (r Receipt) Validate() error {
	bad := func(field, msg, fix string) error {
		return &FieldError{Record: "receipt " + r.Trial().String(), Field: field, Msg: msg, Fix: fix}
	}
	switch {
	case r.SchemaVersion != SchemaVersion:
		return bad("schema_version", fmt.Sprintf("%d is not the schema this rig writes", r.SchemaVersion), fmt.Sprintf("write version %d", SchemaVersion))
	case !validID(r.StudyID):
		return bad("study_id", "is empty or holds '|' or control characters", "set the study's id")
	case !validID(r.ExecutionID):
		return bad("execution_id", "is empty or holds '|' or control characters", "set the execution's id")
	case strings.TrimSpace(r.DesignHash) == "":
		return bad("design_hash", "is empty", "set the frozen design's hash")
	case !validID(r.Arm):
		return bad("arm", "is empty or holds '|' or control characters", "use the arm's id from the design")
	case !validID(r.TaskID):
		return bad("task_id", "is empty or holds '|' or control characters", "use the task's id from its bank")
	case r.Repeat < 0:
		return bad("repeat", "is negative", "number repeats from 0")
	case r.Attempt < 1:
		return bad("attempt", fmt.Sprintf("%d is below 1", r.Attempt), "the first try of a trial is attempt 1")
	case r.ParentAttempt < 0 || r.ParentAttempt >= r.Attempt:
		return bad("parent_attempt", fmt.Sprintf("%d is not an earlier attempt than %d", r.ParentAttempt, r.Attempt), "use 0 for a first try, else the attempt this one reruns")
	case r.Attempt > 1 && r.ParentAttempt == 0:
		return bad("parent_attempt", "is 0 on a rerun", "name the attempt this one reruns")
	case !r.Outcome.Valid():
		return bad("outcome", fmt.Sprintf("%q is not an outcome class", r.Outcome), "use scored, preempted, failed_at_card, capped or error")
	case strings.TrimSpace(r.ModelDigest) == "":
		return bad("model_digest", "is empty", "record the model file's sha256 or the runtime's digest")
	case strings.TrimSpace(r.Harness) == "" || strings.TrimSpace(r.HarnessVersion) == "":
		return bad("harness", "harness or harness_version is empty", "record the harness and its version")
	case len(r.Pins) == 0:
		return bad("pins", "is empty", "record every pin the arm holds (quant, context, sampling, stop cap, runtime build)")
	case strings.TrimSpace(r.Machine) == "":
		return bad("machine", "is empty", "record the machine line (GPU, driver, runtime and versions)")
	case r.InputTokens < 0 || r.ThinkingTokens < 0 || r.OutputTokens < 0:
		return bad("tokens", "a token count is negative", "record counts as reported by the runtime")
	case r.WallMS < 0 || r.PeakMemoryBytes < 0 || r.PeakGPUMemoryBytes < 0 || r.EnergyJoules < 0 || r.PromptPerSecond < 0 || r.OutputPerSecond < 0 || r.TTFTMS < 0 || r.TPOTMS < 0:
		return bad("wall_ms", "a time, memory or energy reading is negative", "record the measured value, or 0 when not measured")
	case r.GenerationSHA256 != "" && !hexSHA256.MatchString(r.GenerationSHA256):
		return bad("generation_sha256", fmt.Sprintf("%q is not a sha256", r.GenerationSHA256), "write 64 lower-case hex digits")
	case !r.StartedAt.IsZero() && !r.FinishedAt.IsZero() && r.FinishedAt.Before(r.StartedAt):
		return bad("finished_at", "is before started_at", "record both from the same clock")
	}
	for k := range r.Pins {
		if strings.TrimSpace(k) == "" {
			return bad("pins", "has an empty name", "name every pin")
		}
	}
	switch r.Outcome {
	case Scored, Capped:
		if r.Grade == nil {
			return bad("grade", "is missing on a "+string(r.Outcome)+" trial", "grade the output before writing the receipt")
		}
		if r.Outcome == Scored && r.GenerationSHA256 == "" {
			return bad("generation_sha256", "is empty on a scored trial", "write the generation records first and put their sha256 here")
		}
	case FailedAtCard:
		if r.Grade != nil && r.Grade.Pass {
			return bad("grade.pass", "is true on a failed_at_card trial", "a trial that blew its budget scores as a failure")
		}
	case Preempted, Error:
		if r.Grade != nil {
			return bad("grade", "is set on a "+string(r.Outcome)+" trial", "a preempted or failed run is never scored against the model; leave grade null")
		}
	}
	if r.Grade != nil && (strings.TrimSpace(r.Grade.Grader) == "" || strings.TrimSpace(r.Grade.GraderVersion) == "") {
		return bad("grade.grader", "grader or grader_version is empty", "name the grader and its version")
	}
	return nil
}

// normalize puts times in UTC so the same receipt always encodes to the same
// bytes, which is what makes PutReceipt idempotent.
func (r Receipt) normalize() Receipt {
	r.StartedAt = r.StartedAt.UTC()
	r.FinishedAt = r.FinishedAt.UTC()
	if r.Pins != nil {
		p := make(map[string]string, len(r.Pins))
		for k, v := range r.Pins {
			p[k] = v
		}
		r.Pins = p
	}
	if r.Grade != nil {
		g := *r.Grade
		r.Grade = &g
	}
	return r
}

func (r Receipt) encode() ([]byte, error) {
	return json.Marshal(r.normalize())
}

// receiptKey is the bbolt key inside an execution's bucket; numbers are padded
// so keys sort in trial order.
func receiptKey(k TrialKey, attempt int) []byte {
	return []byte(fmt.Sprintf("%s|%s|%08d|%06d", k.Arm, k.TaskID, k.Repeat, attempt))
}

func trialIndexKey(k TrialKey) []byte {
	return []byte(fmt.Sprintf("%s|%s|%08d", k.Arm, k.TaskID, k.Repeat))
}
