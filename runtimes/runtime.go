package runtimes

import (
	"context"
	"fmt"
	"rig/internal/offload"
	"time"
)

// Runtime is one private server holding one model, started for an execution
// and stopped after it. Drivers: *LlamaServer and *Ollama.
type Runtime interface {
	// Name is the runtime's kind: "llama-server" or "ollama".
	Name() string
	Generate(ctx context.Context, req Request) (Result, error)
	// Pins are the runtime's side of an arm's pins and the machine line.
	Pins() Pins
	// Endpoint is the unix socket where the server answers (OpenAI-compatible
	// /v1 is served there by both runtimes); Aider is pointed at it.
	Endpoint() string
	// Sandbox is the contained process tree, for the governor (pid, signals).
	Sandbox() *Sandbox
	Stop(ctx context.Context) error
}

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Sampling holds the sampling pins. Temperature 0 is greedy.
type Sampling struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	MinP        float64 `json:"min_p"`
	Seed        int     `json:"seed"`
}

// Effort is what the design asks for; EffortRecord is what was actually sent.
type Effort struct {
	Level string `json:"level,omitempty"` // e.g. "high"; empty means none asked
}

// EffortRecord is the receipt's effort: the raw parameter actually sent, and
// whether the model takes graded levels. An unsupported level is a label only.
type EffortRecord struct {
	Label     string `json:"label,omitempty"`
	Raw       string `json:"raw,omitempty"` // exactly what went on the wire, e.g. `"think":"high"`; empty when nothing was sent
	Graded    bool   `json:"graded"`
	Supported bool   `json:"supported"`
}

// Request is one model call.
type Request struct {
	CallID   string    `json:"call_id"`
	Messages []Message `json:"messages,omitempty"` // rendered with the model's own chat template
	// Prompt, when set instead of Messages, is a plain completion: sent as
	// text with no template (see completion.go).
	Prompt string `json:"prompt,omitempty"`
	// PromptTokens, when set, is sent as token ids with no template (replay and raw scoring).
	PromptTokens []int    `json:"prompt_tokens,omitempty"`
	Sampling     Sampling `json:"sampling"`
	MaxTokens    int      `json:"max_tokens"` // the stop cap
	TopK         int      `json:"top_logprobs"`
	Effort       Effort   `json:"effort"`
	Stop         []string `json:"stop,omitempty"`
	// Grammar constrains generation (llama-server only); replay forces kept tokens with it.
	Grammar string `json:"grammar,omitempty"`
	// Slot, when above 0, asks llama-server to serve the call in its slot
	// Slot-1 (id_slot), so that the server's own slot report (SlotReport)
	// says how far this call alone has got; 0 lets the server choose, as
	// every other runtime does.
	Slot int `json:"slot,omitempty"`
}

// Candidate is one of the top-K alternatives at a step.
type Candidate struct {
	ID      int     `json:"id"` // -1 when the runtime gives no id
	Text    string  `json:"text"`
	Bytes   []byte  `json:"bytes,omitempty"`
	Logprob float64 `json:"logprob"`
}

// Step is one generated token with its log-probability and the top-K.
type Step struct {
	Candidate
	Top []Candidate `json:"top"`
}

// Timings are the runtime's own measurements.
type Timings struct {
	PromptTokens    int           `json:"prompt_tokens"`
	PromptDuration  time.Duration `json:"prompt_ns"`
	OutputTokens    int           `json:"output_tokens"`
	OutputDuration  time.Duration `json:"output_ns"`
	LoadDuration    time.Duration `json:"load_ns,omitempty"`
	PromptPerSecond float64       `json:"prompt_per_second"`
	OutputPerSecond float64       `json:"output_per_second"`
}

// Result is what one call produced, with everything a receipt and a generation
// record need.
type Result struct {
	CallID         string        `json:"call_id"`
	Text           string        `json:"text"`
	Thinking       string        `json:"thinking,omitempty"`
	RenderedPrompt string        `json:"rendered_prompt"`
	PromptTokenIDs []int         `json:"prompt_token_ids,omitempty"`
	PromptTokens   int           `json:"prompt_tokens"`
	ThinkingTokens int           `json:"thinking_tokens"`
	OutputTokens   int           `json:"output_tokens"`
	Steps          []Step        `json:"steps"`
	StopReason     string        `json:"stop_reason"` // "stop" or "length"
	Truncated      bool          `json:"truncated"`   // stopped by the cap
	Wall           time.Duration `json:"wall_ns"`
	Timings        Timings       `json:"timings"`
	PeakMemory     int64         `json:"peak_memory_bytes"`
	PeakSource     string        `json:"peak_memory_source"` // "cgroup" or "vmhwm-sum"
	// LogprobsMissing counts output tokens the runtime gave no log-probability
	// for; they are never padded.
	LogprobsMissing int          `json:"logprobs_missing"`
	Effort          EffortRecord `json:"effort"`
}

// Config is what every driver needs to start a private server. Binary and
// BuildFlags are filled by Build.Start (and Launch) from the provisioned
// build; a caller leaves them empty.
type Config struct {
	Binary    string // runtime executable
	Model     string // GGUF path
	ModelName string // registry name, e.g. "smollm2-135m-instruct"
	// ModelSHA256 is the pinned digest; the file is verified before loading.
	ModelSHA256 string
	// Context is the pinned context of one request: every slot gets all of it.
	Context int
	Threads int
	// Slots is how many requests the server serves at once (the arm's
	// pins.slots); 0 or 1 means one, today's single slot. llama-server gets
	// --parallel Slots and a KV cache of Slots × Context, which it divides
	// evenly, so each slot holds the whole pinned context; Ollama gets
	// OLLAMA_NUM_PARALLEL=Slots, and it sizes its cache as num_ctx × that.
	Slots       int
	KVCacheType string // f16 (default), q8_0, q4_0
	WorkDir     string // private HOME, logs, socket; created if missing
	CgroupDir   string // memory cgroup to run in (a simulated card), optional
	NoSandbox   bool
	BuildFlags  string // recorded on the pins
	ReadyWithin time.Duration
	// VerboseLog makes llama-server log its buffer allocations (-lv 4),
	// which the preflight bench reads from the log; it changes nothing the
	// pins hold. Ollama logs them anyway.
	VerboseLog bool
	// WeightRepack lets llama-server's CPU backend repack the weights into
	// its interleaved layout (the server's own default). rig leaves it off:
	// repacked weights are multiplied by one kernel for a batch and another
	// for a single row, so a batched pass (prefill replay) would not score
	// what the decode steps computed. Replay sets it when a record says its
	// server repacked (records made before rig pinned it). Ollama's engine
	// decides this itself.
	WeightRepack bool
	// PromptCheckpoints lets llama-server cut a prompt into several batches
	// to save context checkpoints in between (its default, for models with
	// sliding-window attention: before the last user message and 4 tokens
	// before the end). rig keeps no prompt cache (--cache-reuse 0), so the
	// checkpoints are never used, and a prompt in one batch is what a
	// batched re-scoring can compute again. Replay sets it for records made
	// before rig pinned it.
	PromptCheckpoints bool
	// Offload is the arm's offload pin (the zero value is the CPU path).
	// The runtime is held to it after loading: see CheckOffload.
	Offload offload.Pin
	// CardBudget is a simulated smaller card on the real one, in bytes (0:
	// the whole card). Ollama is told it (its GPU overhead is the rest of
	// the card), so its scheduler places layers as on that card and a pin
	// it cannot hold there is refused like a real card's. llama-server has
	// no such setting for a pinned layer count (its --fit adjusts only
	// unset arguments); the preflight and the governor hold it instead.
	CardBudget uint64
	// ModelStore is, for Ollama, a models directory to import into and run
	// from instead of a private one under WorkDir: the preflight bench
	// imports each model once, outside the memory reservations it measures
	// in, since the import's copy of the file is not part of running it.
	ModelStore string
	// binarySHA256 is the build's digest of Binary, set by Build.Start: the
	// pins refuse a binary that changed while it started.
	binarySHA256 string
	// libDirs are the build's library folders outside its own (Build.LibDirs).
	libDirs []string
}

// start starts a private server of the named kind ("llama-server" or
// "ollama") from cfg.Binary, recording cfg.BuildFlags. Only Build.Start calls
// it, so that the binary and its flags come from the one place that decides
// them (BuildOf).
func start(ctx context.Context, kind string, cfg Config) (Runtime, error) {
	switch kind {
	case "llama-server":
		return StartLlamaServer(ctx, cfg)
	case "ollama":
		return StartOllama(ctx, cfg)
	}
	return nil, fmt.Errorf("unknown runtime %q (known: llama-server, ollama; Aider runs on top of one of them)", kind)
}

// slots is the number of requests the server serves at once: Slots, or one.
func (c Config) slots() int { return max(c.Slots, 1) }
