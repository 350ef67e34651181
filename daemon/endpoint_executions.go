package daemon

import (
	"context"
	"io"

	"rig/api"
)

// Executions serves the requests about runs of a frozen study: run, cancel,
// wait, resume after a restart, the engine's merge and replay, and the
// study store's check and export; it also records the governor's events
// beside the running execution's receipts.
type Executions struct{ s *Service }

// Executions is the daemon's executions resource.
func (s *Service) Executions() Executions { return Executions{s} }

// methods, by name: runs, their stores and their spools.
func (ex Executions) methods() map[string]handler {
	return map[string]handler{
		api.MethodRun: method(func(ctx context.Context, r api.RunRequest, _ io.Writer) (any, error) {
			return execReply(ex.Run(ctx, r))
		}),
		api.MethodCancel: method(func(ctx context.Context, r api.NameRequest, _ io.Writer) (any, error) {
			return execReply(ex.Cancel(ctx, r.Name))
		}),
		api.MethodCheck: method(func(ctx context.Context, r api.NameRequest, _ io.Writer) (any, error) {
			sum, err := ex.CheckStore(ctx, r.Name)
			return api.StoreSummary(sum), err
		}),
		api.MethodMerge: method(func(ctx context.Context, r api.MergeRequest, _ io.Writer) (any, error) {
			sum, err := ex.Remerge(ctx, MergeRequest(r))
			return api.MergeSummary(sum), err
		}),
		api.MethodEngineReplay: method(func(ctx context.Context, r api.EngineReplayRequest, _ io.Writer) (any, error) {
			res, err := ex.EngineReplay(ctx, EngineReplayRequest(r))
			return apiReplays(res), err
		}),
		api.MethodExport: method(func(ctx context.Context, r api.NameRequest, w io.Writer) (any, error) {
			if r.Audit {
				return nil, ex.ExportAudit(ctx, r.Name, w)
			}
			format := r.Format
			if format == "" {
				format = "jsonl"
			}
			return nil, ex.Export(ctx, r.Name, format, w)
		}),
	}
}
