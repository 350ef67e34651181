package api

import (
	"time"

	"rig/internal/licencename"
	"rig/internal/offload"
)

// The parts of a study's data that cross the socket, as the protocol's own
// types. Each has the JSON names of the type in package studies it is made
// from, field for field, so the bytes on the wire are what they were when the
// protocol sent studies' types; the daemon converts at its boundary, and its
// tests fail when the two differ (daemon/api_pairing_test.go). They are
// copies, not aliases, so that a client links none of studies' dependencies
// (the card probe, the statistics, the task banks and licence registry).

// State is where a study is in its life (the lifecycle is docs/design.md's).
type State string

// States of a study.
const (
	Draft     State = "draft"
	Reviewed  State = "reviewed"
	Approved  State = "approved"
	Frozen    State = "frozen"
	Running   State = "running"
	Decided   State = "decided"
	Withdrawn State = "withdrawn"
)

// Review is an outside review's verdict on the design.
type Review struct {
	Reviewer string `json:"reviewer"`
	// ReviewerUID is the reviewer's uid as the daemon read it from the
	// socket; whatever a request puts here, the daemon overwrites it.
	ReviewerUID *int   `json:"reviewer_uid,omitempty"`
	Verdict     string `json:"verdict"` // "pass" or "fail"
	// LicenceLine is the reviewer's statement on the licence check.
	LicenceLine string `json:"licence_line"`
	DesignHash  string `json:"design_hash"`
	Notes       string `json:"notes,omitempty"`
}

// AuditEntry records a transition: who, when, why, from and to.
type AuditEntry struct {
	Event string `json:"event"`
	Actor string `json:"actor"`
	// UID is the actor's uid; Actor is the name, for people. Entries written
	// before uids were kept have only Actor.
	UID    *int      `json:"uid,omitempty"`
	At     time.Time `json:"at"`
	Why    string    `json:"why,omitempty"`
	From   State     `json:"from"`
	To     State     `json:"to"`
	Detail string    `json:"detail,omitempty"`
}

// LicenceTerm is one registry entry a study's items rest on, as a reviewer
// reads it before writing the review's licence line.
type LicenceTerm struct {
	EntryID    string `json:"entry_id"`
	Item       string `json:"item"`
	Licence    string `json:"licence"`
	SourcePage string `json:"source_page"`
	Clause     string `json:"clause"`
	DateRead   string `json:"date_read"`
	Registry   string `json:"registry"`
	// Allows is the entry's verdict per use, every use it rules on.
	Allows []LicenceAllow `json:"allows"`
	// Study is the uses this study puts the entry to, with the verdict.
	Study []LicenceAllow `json:"study"`
	// Restricted is true when any of the study's uses is restricted: the
	// terms a reviewer must read and the licence line must name.
	Restricted bool `json:"restricted"`
}

// LicenceAllow is one use and the entry's verdict on it.
type LicenceAllow struct {
	Use     string `json:"use"`
	Role    string `json:"role,omitempty"` // the study's item's role, for Study
	Verdict string `json:"verdict"`
	Reading string `json:"reading,omitempty"`
	Clause  string `json:"clause,omitempty"`
}

// Names is how a licence line may name the entry: its registry id, or its
// licence's name, with or without a trailing note in parentheses ("Gemma
// Terms of Use (last modified 2025-03-24)" is named by "Gemma Terms of Use").
// The command line tells a reviewer with it what the daemon's check will
// accept, without linking studies: both answer by internal/licencename.
func (t LicenceTerm) Names() []string {
	return licencename.Of(t.EntryID, t.Licence)
}

// Speed is how fast an arm runs, from a pilot or measured on this machine.
type Speed struct {
	GenTokensPerSec    float64 `json:"gen_tokens_per_sec"`
	PromptTokensPerSec float64 `json:"prompt_tokens_per_sec"`
	LoadSeconds        float64 `json:"load_seconds"`     // one model load
	OverheadSeconds    float64 `json:"overhead_seconds"` // per trial: harness start, grading
	Watts              float64 `json:"watts"`            // mean draw while running
	// MeanOutputTokens prices output from the pilot; 0 prices every trial
	// at its stop cap, the worst case.
	MeanOutputTokens float64 `json:"mean_output_tokens,omitempty"`
	// PromptTokens is a harness's first prompt as measured.
	PromptTokens float64 `json:"prompt_tokens,omitempty"`
	Source       string  `json:"source"`
}

// Model identifies the weights an arm runs.
type Model struct {
	RegistryName string `json:"registry_name"`
	// File is a path to the GGUF or a reference such as "${SMOLLM2_GGUF}".
	File         string `json:"file"`
	SHA256       string `json:"sha256,omitempty"`
	OllamaDigest string `json:"ollama_digest,omitempty"`
	// OllamaTag is the tag the arm named its model by, in the caller's
	// Ollama library (File is then the tag's blob).
	OllamaTag string `json:"ollama_tag,omitempty"`
}

// Binary is a runtime component resolved to the file that will run.
type Binary struct {
	Component string `json:"component"` // "llama-server", "ollama" or "aider"
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	Version   string `json:"version,omitempty"`
	// PythonEnv and EnvSHA256 are, for an openai-server arm's server in a
	// Python environment, that environment and the digest of its
	// installed distributions.
	PythonEnv string `json:"python_env,omitempty"`
	EnvSHA256 string `json:"env_sha256,omitempty"`
}

// Pins are what an arm holds for the whole confirmatory run.
type Pins struct {
	Quant        string   `json:"quant"`
	Context      int      `json:"context"`
	Sampling     Sampling `json:"sampling"`
	StopCap      int      `json:"stop_cap"`
	Effort       Effort   `json:"effort"`
	RuntimeBuild string   `json:"runtime_build"`
	// Offload is where the runtime puts the model; the zero value (omitted)
	// is the CPU path. internal/offload is data only, so it is used as is.
	Offload offload.Pin `json:"offload,omitzero"`
	// Slots is how many requests the arm's runtime serves at once and how
	// many of its trials are kept in flight; 0 (omitted) is one.
	Slots int `json:"slots,omitempty"`
}

// Sampling is the sampler configuration sent with every call.
type Sampling struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	MinP        float64 `json:"min_p"`
	Seed        int64   `json:"seed"`
}

// Effort is the raw parameter actually sent; Graded false records a level
// the model cannot take as a label, not a setting.
type Effort struct {
	RawParameter string `json:"raw_parameter"`
	Value        string `json:"value"`
	Graded       bool   `json:"graded"`
}

// Estimate is a dry run's price of a plan against the design's caps.
type Estimate struct {
	Arms        []ArmCost     `json:"arms"`
	Trials      int           `json:"trials"`
	Loads       int           `json:"loads"`
	WallTime    time.Duration `json:"wall_time"`
	EnergyWh    float64       `json:"energy_wh"`
	CapWallTime time.Duration `json:"cap_wall_time"`
	CapEnergyWh float64       `json:"cap_energy_wh"`
	// Stopping is the expected price with the design's stopping rule; nil
	// without one (the whole plan always runs).
	Stopping *StoppingPrice `json:"stopping,omitempty"`
}

// ArmCost is one arm's share of the priced plan.
type ArmCost struct {
	Arm       string        `json:"arm"`
	Source    string        `json:"source"`
	Trials    int           `json:"trials"`
	Loads     int           `json:"loads"`
	WallTime  time.Duration `json:"wall_time"`
	EnergyWh  float64       `json:"energy_wh"`
	AtStopCap bool          `json:"at_stop_cap"` // output priced at the stop cap
	// Slots is the arm's pins.slots; SlotSpeedup the speed-up its trials
	// in flight were priced at (studies.SlotSpeedup).
	Slots       int     `json:"slots,omitempty"`
	SlotSpeedup float64 `json:"slot_speedup,omitempty"`
}

// StoppingPrice is a dry run's price of a design with a stopping rule: the
// expected trials and wall time under each simulated truth, beside the
// whole plan, which a study that never settles runs.
type StoppingPrice struct {
	Scenarios []StoppingScenario `json:"scenarios"`
	// MaxTrials and MaxWallTime are the whole plan's.
	MaxTrials   int           `json:"max_trials"`
	MaxWallTime time.Duration `json:"max_wall_time"`
	// Model says what was simulated, in words.
	Model string `json:"model"`
}

// StoppingScenario is one simulated truth.
type StoppingScenario struct {
	Name string `json:"name"`
	// Lead is the first challenger's true lead (share of tasks).
	Lead float64 `json:"lead"`
	// Share is the mean share of each pair's planned paired tasks run;
	// Stopped the share of simulated studies that stopped early.
	Share    float64       `json:"share"`
	Stopped  float64       `json:"stopped"`
	Trials   float64       `json:"trials"`
	WallTime time.Duration `json:"wall_time"`
	// Power is the share with the challenger Holm-significant its way.
	Power float64 `json:"power,omitempty"`
}
