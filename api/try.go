package api

import (
	"context"
	"time"
)

// TryRequest is `rig try DESIGN`: a draft design's arms on a few tasks now,
// nothing counted.
type TryRequest struct {
	// DesignFile and Design are as in RegisterRequest: the file's absolute
	// path and its content, read by the command line with the caller's
	// rights.
	DesignFile string `json:"design_file"`
	Design     []byte `json:"design,omitempty"`
	// Tasks is how many tasks of each job kind (0: the daemon's default);
	// Task names tasks instead; Arms limits the arms (all when empty).
	Tasks int      `json:"tasks,omitempty"`
	Task  []string `json:"task,omitempty"`
	Arms  []string `json:"arms,omitempty"`
	Actor string   `json:"actor,omitempty"`
	// Registry and ConfiguredRegistry choose the licence registry as for
	// register.
	Registry           string `json:"registry,omitempty"`
	ConfiguredRegistry string `json:"configured_registry,omitempty"`
}

// TryPruneRequest is `rig try prune`: the tries older than OlderThan, or
// the one named, or every one.
type TryPruneRequest struct {
	ID        string        `json:"id,omitempty"`
	OlderThan time.Duration `json:"older_than,omitempty"`
	All       bool          `json:"all,omitempty"`
}

// TryTrial is one arm's answer to one task in a try.
type TryTrial struct {
	Arm          string  `json:"arm"`
	JobKind      string  `json:"job_kind"`
	Task         string  `json:"task"`
	Outcome      string  `json:"outcome"`
	Graded       bool    `json:"graded"`
	Pass         bool    `json:"pass"`
	Score        float64 `json:"score"`
	Prompt       string  `json:"prompt,omitempty"`
	Output       string  `json:"output,omitempty"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	WallMS       int64   `json:"wall_ms"`
	Capped       bool    `json:"capped,omitempty"`
	OffTask      string  `json:"off_task,omitempty"`
	Detail       string  `json:"detail,omitempty"`
	// Grader is the judge ("judge:ARM") when a judge arm graded the
	// trial; "" for the bank's grader.
	Grader string `json:"grader,omitempty"`
}

// TryRuntime is the runtime one arm of a try ran on: its pid, and whether it
// was kept warm from an earlier try.
type TryRuntime struct {
	Arm     string `json:"arm"`
	Runtime string `json:"runtime"`
	PID     int    `json:"pid"`
	Reused  bool   `json:"reused"`
	Build   string `json:"build"`
	Model   string `json:"model"`
	ReadyMS int64  `json:"ready_ms"`
}

// PilotPair is one named pair's pilot figures from a try.
type PilotPair struct {
	JobKind       string  `json:"job_kind"`
	Candidate     string  `json:"candidate"`
	Baseline      string  `json:"baseline"`
	Tasks         int     `json:"tasks"`
	Discordant    int     `json:"discordant"`
	Discordance   float64 `json:"discordance"`
	Lo            float64 `json:"lo"`
	Hi            float64 `json:"hi"`
	PlannedTasks  int     `json:"planned_tasks"`
	Power         float64 `json:"power"`
	MinDetectable float64 `json:"min_detectable,omitempty"`
	Detectable    bool    `json:"detectable"`
}

// PilotArm is one arm's answers in a try.
type PilotArm struct {
	Arm     string `json:"arm"`
	Trials  int    `json:"trials"`
	Passed  int    `json:"passed"`
	Capped  int    `json:"capped"`
	OffTask int    `json:"off_task"`
}

// RuleFate is what the design alone says about its rule's outcome.
type RuleFate struct {
	Certain bool   `json:"certain"`
	Outcome string `json:"outcome,omitempty"`
	Clause  int    `json:"clause,omitempty"`
	Warning string `json:"warning,omitempty"`
}

// TryPilot is a try's pilot figures and the sentences they call for.
type TryPilot struct {
	Pairs []PilotPair `json:"pairs,omitempty"`
	Arms  []PilotArm  `json:"arms,omitempty"`
	Fate  RuleFate    `json:"fate"`
	Notes []string    `json:"notes,omitempty"`
}

// TryRecord is one try as kept under its id until pruned: what was tried
// (the design's hash and the digests of its banks, models, runtime builds
// and licence registries, as register would record them) and what it gave.
type TryRecord struct {
	ID         string    `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor,omitempty"`
	Study      string    `json:"study"` // the design's name
	DesignFile string    `json:"design_file"`
	DesignHash string    `json:"design_hash"`
	// Assets are the digests by asset key ("model:PATH", "runtime:NAME",
	// "bank:JOBKIND", "licences:…"): the expected hashes of a study
	// registered --from-try.
	Assets   map[string]string   `json:"assets"`
	Tasks    map[string][]string `json:"tasks"`
	Trials   []TryTrial          `json:"trials"`
	Runtimes []TryRuntime        `json:"runtimes"`
	Pilot    TryPilot            `json:"pilot"`
	// ElapsedMS is the try's time from request to answer.
	ElapsedMS int64  `json:"elapsed_ms"`
	Dir       string `json:"dir"`
	// KeepWarm is how long the daemon keeps the try's runtimes up for the
	// next try.
	KeepWarm time.Duration `json:"keep_warm"`
	// Status is TryRunning while the try runs (rig ui's matrix fills in
	// from it), TryDone once kept, TryFailed when it ended in Error and
	// kept nothing.
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
	// Arms are the arms tried, in the design's order: the matrix's
	// columns.
	Arms []string `json:"arms,omitempty"`
}

// A try's Status.
const (
	TryRunning = "running"
	TryDone    = "done"
	TryFailed  = "failed"
)

// TrySummary is a try as rig try list shows it.
type TrySummary struct {
	ID         string    `json:"id"`
	At         time.Time `json:"at"`
	Study      string    `json:"study"`
	DesignHash string    `json:"design_hash"`
	Trials     int       `json:"trials"`
	Passed     int       `json:"passed"`
	Status     string    `json:"status,omitempty"`
}

// Try runs a draft design's arms on a few tasks now, nothing counted.
func (c Client) Try(ctx context.Context, req TryRequest) (TryRecord, error) {
	return call[TryRecord](ctx, c, MethodTry, req, nil)
}

// Tries lists the kept tries, newest first.
func (c Client) Tries(ctx context.Context) ([]TrySummary, error) {
	return call[[]TrySummary](ctx, c, MethodTryList, struct{}{}, nil)
}

// PruneTries removes kept tries and says which.
func (c Client) PruneTries(ctx context.Context, req TryPruneRequest) ([]string, error) {
	return call[[]string](ctx, c, MethodTryPrune, req, nil)
}
