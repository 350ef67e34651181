package daemon

import (
	"context"
	"io"

	"rig/api"
)

// Reports serves the requests that read an execution's evidence: the
// analysis and the report, the replay sample, the Director's decision, a
// re-grade, and the workspace (rig ui).
type Reports struct{ s *Service }

// Reports is the daemon's reports resource.
func (s *Service) Reports() Reports { return Reports{s} }

// methods, by name: reports, decisions, re-grades and the workspace.
func (rp Reports) methods() map[string]handler {
	return map[string]handler{
		api.MethodReport: method(func(ctx context.Context, r api.ReportRequest, _ io.Writer) (any, error) {
			f, err := rp.Report(ctx, r.Name, r.ReportOptions)
			return api.ReportFiles(f), err
		}),
		api.MethodDecide: method(func(ctx context.Context, r api.DecideRequest, _ io.Writer) (any, error) {
			return rp.Decide(ctx, r)
		}),
		api.MethodAmendDecision: method(func(ctx context.Context, r api.AmendDecisionRequest, _ io.Writer) (any, error) {
			return rp.AmendDecision(ctx, r)
		}),
		api.MethodGrade: method(func(ctx context.Context, r api.RegradeRequest, _ io.Writer) (any, error) {
			return regradeReply(rp.Regrade(ctx, r))
		}),
		api.MethodUI: method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) { return rp.UI(ctx) }),
	}
}
