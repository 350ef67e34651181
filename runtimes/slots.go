package runtimes

import "context"

// SlotState is one of llama-server's slots as the server itself reports it
// (GET /slots): its context and whether it is serving a request now.
type SlotState struct {
	ID         int  `json:"id"`
	Context    int  `json:"n_ctx"`
	Processing bool `json:"is_processing"`
}

// SlotReport reads the server's own report of its slots, for a check that
// N requests really were in flight at once, each with the pinned context.
func (s *LlamaServer) SlotReport(ctx context.Context) ([]SlotState, error) {
	var slots []SlotState
	err := s.call(ctx, "GET", "/slots", nil, &slots)
	return slots, err
}
