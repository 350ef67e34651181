package inspectlog

// The types below are the part of Inspect AI's eval log schema (the
// pydantic models EvalLog, EvalSample and those they hold, as
// `inspect log schema` prints them) that rig fills. Fields Inspect marks
// required in its serialized form are never omitted, even when empty,
// because its schema requires them although its reader has defaults.

// Log is one eval log: EvalLog without its samples, which the .eval zip
// keeps one file each.
type Log struct {
	Version  int            `json:"version"`
	Status   string         `json:"status"`
	Eval     Spec           `json:"eval"`
	Plan     Plan           `json:"plan"`
	Results  *Results       `json:"results,omitempty"`
	Stats    Stats          `json:"stats"`
	Invalid  bool           `json:"invalidated"`
	Tags     []string       `json:"tags"`
	Metadata map[string]any `json:"metadata"`

	// Samples and Reductions are written as their own zip members.
	Samples    []Sample    `json:"-"`
	Reductions []Reduction `json:"-"`
}

// Spec is EvalSpec: what was evaluated, on what model, with which settings.
type Spec struct {
	EvalID              string            `json:"eval_id"`
	RunID               string            `json:"run_id"`
	Created             string            `json:"created"`
	Task                string            `json:"task"`
	TaskID              string            `json:"task_id"`
	TaskVersion         string            `json:"task_version"`
	TaskAttribs         map[string]any    `json:"task_attribs"`
	TaskArgs            map[string]any    `json:"task_args"`
	TaskArgsPassed      map[string]any    `json:"task_args_passed"`
	Dataset             Dataset           `json:"dataset"`
	Model               string            `json:"model"`
	ModelGenerateConfig map[string]any    `json:"model_generate_config"`
	ModelArgs           map[string]any    `json:"model_args"`
	Config              map[string]any    `json:"config"`
	Revision            *Revision         `json:"revision,omitempty"`
	Packages            map[string]string `json:"packages"`
	Metadata            map[string]any    `json:"metadata,omitempty"`
}

// Dataset is EvalDataset.
type Dataset struct {
	Name      string   `json:"name"`
	Location  string   `json:"location"`
	Samples   int      `json:"samples"`
	SampleIDs []string `json:"sample_ids"`
	Shuffled  bool     `json:"shuffled"`
}

// Revision is EvalRevision. Inspect knows only git revisions; rig's
// revision is the frozen design's hash, named as such in Origin.
type Revision struct {
	Type   string `json:"type"`
	Origin string `json:"origin"`
	Commit string `json:"commit"`
}

// Plan is EvalPlan.
type Plan struct {
	Name   string         `json:"name"`
	Steps  []PlanStep     `json:"steps"`
	Config map[string]any `json:"config"`
}

// PlanStep is EvalPlanStep.
type PlanStep struct {
	Solver       string         `json:"solver"`
	Params       map[string]any `json:"params"`
	ParamsPassed map[string]any `json:"params_passed"`
}

// Results is EvalResults.
type Results struct {
	TotalSamples     int            `json:"total_samples"`
	CompletedSamples int            `json:"completed_samples"`
	Scores           []Score        `json:"scores"`
	Metadata         map[string]any `json:"metadata,omitempty"`
}

// Score is EvalScore: one scorer's metrics over the log.
type Score struct {
	Name            string            `json:"name"`
	Scorer          string            `json:"scorer"`
	Reducer         string            `json:"reducer,omitempty"`
	ScoredSamples   int               `json:"scored_samples"`
	UnscoredSamples int               `json:"unscored_samples"`
	Params          map[string]any    `json:"params"`
	Metrics         map[string]Metric `json:"metrics"`
}

// Metric is EvalMetric.
type Metric struct {
	Name   string         `json:"name"`
	Value  float64        `json:"value"`
	Params map[string]any `json:"params"`
}

// Stats is EvalStats.
type Stats struct {
	StartedAt              string           `json:"started_at"`
	CompletedAt            string           `json:"completed_at"`
	ModelUsage             map[string]Usage `json:"model_usage"`
	RoleUsage              map[string]Usage `json:"role_usage"`
	ConnectionLimitHistory []any            `json:"connection_limit_history"`
}

// Usage is ModelUsage.
type Usage struct {
	InputTokens     int  `json:"input_tokens"`
	OutputTokens    int  `json:"output_tokens"`
	TotalTokens     int  `json:"total_tokens"`
	ReasoningTokens *int `json:"reasoning_tokens,omitempty"`
}

func (u *Usage) add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.TotalTokens += v.TotalTokens
	if v.ReasoningTokens != nil {
		n := *v.ReasoningTokens
		if u.ReasoningTokens != nil {
			n += *u.ReasoningTokens
		}
		u.ReasoningTokens = &n
	}
}

// Sample is EvalSample: one trial.
type Sample struct {
	ID           string                 `json:"id"`
	Epoch        int                    `json:"epoch"`
	Input        string                 `json:"input"`
	Target       string                 `json:"target"`
	Messages     []Message              `json:"messages"`
	Output       Output                 `json:"output"`
	Scores       map[string]SampleScore `json:"scores,omitempty"`
	Metadata     map[string]any         `json:"metadata"`
	Store        map[string]any         `json:"store"`
	Events       []any                  `json:"events"`
	ModelUsage   map[string]Usage       `json:"model_usage"`
	RoleUsage    map[string]Usage       `json:"role_usage"`
	StartedAt    string                 `json:"started_at,omitempty"`
	CompletedAt  string                 `json:"completed_at,omitempty"`
	TotalTime    float64                `json:"total_time"`
	WorkingTime  float64                `json:"working_time"`
	UUID         string                 `json:"uuid"`
	Error        *Error                 `json:"error,omitempty"`
	ErrorRetries []Error                `json:"error_retries,omitempty"`
	Attachments  map[string]string      `json:"attachments"`
}

// Message is a ChatMessage (user or assistant) with plain text content.
type Message struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Content string `json:"content"`
	Source  string `json:"source,omitempty"`
	Model   string `json:"model,omitempty"`
}

// Output is ModelOutput.
type Output struct {
	Model      string   `json:"model"`
	Choices    []Choice `json:"choices"`
	Completion string   `json:"completion"`
	Usage      *Usage   `json:"usage,omitempty"`
	Time       *float64 `json:"time,omitempty"`
}

// Choice is ChatCompletionChoice.
type Choice struct {
	Message    Message   `json:"message"`
	StopReason string    `json:"stop_reason"`
	Logprobs   *Logprobs `json:"logprobs,omitempty"`
}

// Logprobs is OpenAI's shape, which Inspect keeps: one entry per generated
// token with its top alternatives.
type Logprobs struct {
	Content []Logprob `json:"content"`
}

// Logprob is one generated token.
type Logprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes,omitempty"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative at a step.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes,omitempty"`
}

// SampleScore is Score: a grade of one sample.
type SampleScore struct {
	Value       float64        `json:"value"`
	Answer      string         `json:"answer,omitempty"`
	Explanation string         `json:"explanation,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	History     []any          `json:"history"`
}

// Error is EvalError (and EvalRetryError): an attempt that gave no score.
type Error struct {
	Message       string `json:"message"`
	Traceback     string `json:"traceback"`
	TracebackANSI string `json:"traceback_ansi"`
}

// Summary is EvalSampleSummary, the row the viewer lists before it opens a
// sample.
type Summary struct {
	ID          string                 `json:"id"`
	Epoch       int                    `json:"epoch"`
	Input       string                 `json:"input"`
	Target      string                 `json:"target"`
	Metadata    map[string]any         `json:"metadata"`
	Scores      map[string]SampleScore `json:"scores,omitempty"`
	ModelUsage  map[string]Usage       `json:"model_usage"`
	RoleUsage   map[string]Usage       `json:"role_usage"`
	StartedAt   string                 `json:"started_at,omitempty"`
	CompletedAt string                 `json:"completed_at,omitempty"`
	TotalTime   float64                `json:"total_time"`
	WorkingTime float64                `json:"working_time"`
	UUID        string                 `json:"uuid"`
	Error       string                 `json:"error,omitempty"`
	Retries     int                    `json:"retries,omitempty"`
	Completed   bool                   `json:"completed"`
}

// Reduction is EvalSampleReductions: each task's score over its epochs.
type Reduction struct {
	Scorer  string         `json:"scorer"`
	Reducer string         `json:"reducer"`
	Samples []ReducedScore `json:"samples"`
}

// ReducedScore is EvalSampleScore.
type ReducedScore struct {
	Value    float64 `json:"value"`
	SampleID string  `json:"sample_id"`
	History  []any   `json:"history"`
}

func (s Sample) summary() Summary {
	var msg string
	if s.Error != nil {
		msg = s.Error.Message
	}
	return Summary{ID: s.ID, Epoch: s.Epoch, Input: s.Input, Target: s.Target, Metadata: s.Metadata, Scores: s.Scores,
		ModelUsage: s.ModelUsage, RoleUsage: s.RoleUsage, StartedAt: s.StartedAt, CompletedAt: s.CompletedAt,
		TotalTime: s.TotalTime, WorkingTime: s.WorkingTime, UUID: s.UUID, Error: msg, Retries: len(s.ErrorRetries), Completed: true}
}
