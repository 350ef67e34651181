package runtimes

import (
	"context"
	"encoding/json"
)

// SlotState is one of llama-server's slots as the server itself reports it
// (GET /slots): its context, whether it is serving a request now, and how
// far that request has got.
type SlotState struct {
	ID         int  `json:"id"`
	Context    int  `json:"n_ctx"`
	Processing bool `json:"is_processing"`
	// PromptProcessed is how many of the request's prompt tokens the slot
	// has evaluated, Decoded how many tokens it has generated: the call's
	// own progress, apart from the other slots'.
	PromptProcessed int `json:"n_prompt_tokens_processed"`
	Decoded         int `json:"-"`
}

// UnmarshalJSON reads the slot and its next_token list, whose first entry
// holds n_decoded.
func (s *SlotState) UnmarshalJSON(b []byte) error {
	type plain SlotState
	var raw struct {
		plain
		Next []struct {
			Decoded int `json:"n_decoded"`
		} `json:"next_token"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = SlotState(raw.plain)
	if len(raw.Next) > 0 {
		s.Decoded = raw.Next[0].Decoded
	}
	return nil
}

// Progress is the slot's request's progress in tokens: prompt tokens
// evaluated and tokens generated.
func (s SlotState) Progress() int { return s.PromptProcessed + s.Decoded }

// SlotReport reads the server's own report of its slots, for a check that
// N requests really were in flight at once, each with the pinned context,
// and for each request's own progress while it runs.
func (s *LlamaServer) SlotReport(ctx context.Context) ([]SlotState, error) {
	var slots []SlotState
	err := s.call(ctx, "GET", "/slots", nil, &slots)
	return slots, err
}
