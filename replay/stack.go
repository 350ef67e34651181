package replay

import (
	"context"

	"rig/genrecord"
	"rig/internal/provision"
	"rig/runtimes"
)

// Stack is one provisioned model running on one runtime, started as
// replay's own studies start one (calibration, goals) rather than as a
// trial: its rows carry replay's pins, and it replays them by the paths
// `rig replay` takes. It is exported for `rig bench replay`
// (bench/replaycost), which generates rows on a Stack and prices their
// replay against generating them; a study never starts one.
type Stack struct{ s *replayStack }

// StartStack starts kind with the provisioned model (its registry name),
// the runtime working under work.
func StartStack(ctx context.Context, in provision.Installed, kind, model, work string, noSandbox bool) (*Stack, error) {
	s, err := startReplayStack(ctx, in, kind, model, work, noSandbox)
	if err != nil {
		return nil, err
	}
	return &Stack{s: s}, nil
}

// WithPrefill starts the stack's prefill scorer on the model file, with
// the server's context, KV cache type and weight repacking; from then on
// Rescorer scores in one batched pass.
func (s *Stack) WithPrefill(ctx context.Context, in provision.Installed, model, work string, noSandbox bool) error {
	return s.s.withPrefill(ctx, in, model, work, noSandbox)
}

// Runtime is the running runtime, to generate on.
func (s *Stack) Runtime() runtimes.Runtime { return s.s.rt }

// Pins are the pins a record of rows generated on the stack carries.
func (s *Stack) Pins() genrecord.Pins { return s.s.header.Pins }

// Exact re-scores rows by decode steps (forced token ids, or Ollama's
// raw-mode regeneration): `rig replay`'s exact mode.
func (s *Stack) Exact() genrecord.Rescorer { return s.s.rescorer() }

// Rescorer re-scores rows in one prefill pass when the stack has a prefill
// scorer (WithPrefill), else as Exact does.
func (s *Stack) Rescorer() genrecord.Rescorer { return s.s.rs() }

// PrefillThreads is the prefill scorer's thread count; 0 without one.
func (s *Stack) PrefillThreads() int {
	if s.s.scorer == nil {
		return 0
	}
	return s.s.scorer.threads
}

// Stop stops the prefill scorer, if any, and the runtime.
func (s *Stack) Stop() { s.s.stop() }

// RowPlan says how row i of a replay study is asked: even rows greedy, odd
// rows sampled with their own seed; ask, a format with one %s, is filled
// with a topic (when empty, one of the built-in questions is used).
func RowPlan(i int, ask string) ([]runtimes.Message, runtimes.Sampling) { return rowPlan(i, ask) }
