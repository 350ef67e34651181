package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"rig/internal/jsonerr"
)

// Output is what a finished trial produced: the model's text, and for code
// tasks the repository files it changed or created (path → content). Arm
// and Model say who produced it; graders ignore them and Blind removes them.
type Output struct {
	TrialID string            `json:"trial_id,omitempty"`
	TaskID  string            `json:"task_id"`
	Arm     string            `json:"arm,omitempty"`
	Model   string            `json:"model,omitempty"`
	Text    string            `json:"text,omitempty"`
	Files   map[string]string `json:"files,omitempty"`
}

// Grade is a grader's numbers for one output. It carries the grader name and
// version so stored grades can be re-graded with a newer version and both
// kept side by side.
type Grade struct {
	TaskID   string         `json:"task_id"`
	TrialID  string         `json:"trial_id,omitempty"`
	Grader   string         `json:"grader"`
	Version  int            `json:"version"`
	Score    float64        `json:"score"`
	Pass     bool           `json:"pass"`
	Details  map[string]any `json:"details,omitempty"`
	GradedAt time.Time      `json:"graded_at"`
}

// Grader maps a task and a finished trial's output to numbers. Changing what
// Grade returns for the same input is a new Version. A grader never applies
// a decision threshold: Pass is the task's own notion of a correct answer.
type Grader interface {
	Name() string
	Version() int
	// CheckKey decodes the task's key strictly; lint and bank validation
	// call it so a malformed key is caught before any run.
	CheckKey(t Task) error
	// KeyOutput turns the key into the output a perfect trial would give,
	// so an audit can check that the key passes itself.
	KeyOutput(t Task) (Output, error)
	Grade(ctx context.Context, t Task, out Output) (Grade, error)
}

// Registry holds graders by name and version. It is built by the caller;
// there is no package-level registry.
type Registry struct {
	graders map[GraderRef]Grader
}

// NewRegistry returns a registry holding the given graders.
func NewRegistry(gs ...Grader) *Registry {
	r := &Registry{graders: map[GraderRef]Grader{}}
	for _, g := range gs {
		r.Register(g)
	}
	return r
}

// DefaultRegistry returns the built-in graders; runner executes code-task
// tests (nil means ExecRunner with no extra environment).
func DefaultRegistry(runner Runner) *Registry {
	if runner == nil {
		runner = ExecRunner{}
	}
	return NewRegistry(
		Exact{}, Normalized{}, Regex{}, Numeric{}, JSONMatch{}, JSONValid{},
		&Code{Runner: runner, Limit: 30 * time.Second},
	)
}

// Register adds or replaces a grader at its name and version.
func (r *Registry) Register(g Grader) {
	r.graders[GraderRef{Name: g.Name(), Version: g.Version()}] = g
}

// Get returns the grader for a reference or an *UnknownGraderError.
func (r *Registry) Get(ref GraderRef) (Grader, error) {
	g, ok := r.graders[ref]
	if !ok {
		return nil, &UnknownGraderError{Name: ref.Name, Version: ref.Version, Known: r.Known()}
	}
	return g, nil
}

// Latest returns the highest registered version of a grader name.
func (r *Registry) Latest(name string) (Grader, error) {
	var best Grader
	for ref, g := range r.graders {
		if ref.Name == name && (best == nil || ref.Version > best.Version()) {
			best = g
		}
	}
	if best == nil {
		return nil, &UnknownGraderError{Name: name, Known: r.Known()}
	}
	return best, nil
}

// Known lists registered graders as name@vN, sorted.
func (r *Registry) Known() []string {
	out := make([]string, 0, len(r.graders))
	for ref := range r.graders {
		out = append(out, ref.String())
	}
	sort.Strings(out)
	return out
}

// Grade grades an output with the task's own grader.
func (r *Registry) Grade(ctx context.Context, t Task, out Output) (Grade, error) {
	g, err := r.Get(t.Grader)
	if err != nil {
		return Grade{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	return stamp(ctx, g, t, out)
}

// Regrade grades a stored output with the given version of the task's
// grader. It returns a new Grade and never touches the old one; the caller
// stores both.
func (r *Registry) Regrade(ctx context.Context, t Task, out Output, version int) (Grade, error) {
	g, err := r.Get(GraderRef{Name: t.Grader.Name, Version: version})
	if err != nil {
		return Grade{}, fmt.Errorf("regrade task %s: %w", t.ID, err)
	}
	return stamp(ctx, g, t, out)
}

func stamp(ctx context.Context, g Grader, t Task, out Output) (Grade, error) {
	gr, err := g.Grade(ctx, t, out)
	if err != nil {
		return Grade{}, fmt.Errorf("task %s: grader %s@v%d: %w", t.ID, g.Name(), g.Version(), err)
	}
	gr.TaskID, gr.TrialID = t.ID, out.TrialID
	gr.Grader, gr.Version = g.Name(), g.Version()
	if gr.GradedAt.IsZero() {
		gr.GradedAt = time.Now().UTC()
	}
	return gr, nil
}

// Validate checks that every task names a registered grader and that its
// key decodes for that grader. Errors name file:line and the field.
func (r *Registry) Validate(b *Bank) error {
	for _, t := range b.Tasks {
		g, err := r.Get(t.Grader)
		if err != nil {
			return &ParseError{File: b.File, Line: t.line, Field: "grader", Msg: err.Error(), Fix: "use a registered grader name and version", Err: err}
		}
		if err := g.CheckKey(t); err != nil {
			// No Field: the grader's message starts at the key already.
			return &ParseError{File: b.File, Line: t.line, Msg: err.Error(), Fix: "write the key in the shape grader " + t.Grader.String() + " reads", Err: err}
		}
	}
	return nil
}

// decodeKey decodes a task key strictly into v.
func decodeKey(t Task, v any) error {
	dec := json.NewDecoder(bytes.NewReader(t.Key))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		// In the key's JSON words: the decoder's own name the grader's Go
		// type ("Go value of type tasks.jsonKey").
		return fmt.Errorf("key: %s", jsonerr.Message(err))
	}
	return nil
}

func jsonUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
