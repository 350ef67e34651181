package daemon

import (
	"context"
	"io"
	"time"

	"rig/api"
)

// Budget serves the requests about the monthly budget across studies: its
// state this month and setting it; a run is checked against it first.
type Budget struct{ s *Service }

// Budget is the daemon's budget resource.
func (s *Service) Budget() Budget { return Budget{s} }

// methods, by name: the monthly budget across studies.
func (bg Budget) methods() map[string]handler {
	return map[string]handler{
		api.MethodBudget: method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) { return bg.Month(ctx, time.Now()) }),
		api.MethodBudgetSet: method(func(ctx context.Context, r api.BudgetRequest, _ io.Writer) (any, error) {
			return bg.SetMonthly(ctx, r)
		}),
	}
}
