package daemon

import (
	"context"
	"io"

	"rig/api"
	"rig/studies"
)

// Studies serves the requests about a study as data and its gates before a
// run: register, review, approve, withdraw, freeze, status, list, and the
// preflight, validation and dry-run that a counted run needs first.
type Studies struct{ s *Service }

// Studies is the daemon's studies resource.
func (s *Service) Studies() Studies { return Studies{s} }

// methods, by name: registration, the lifecycle and the gates before a run.
func (sr Studies) methods() map[string]handler {
	return map[string]handler{
		api.MethodRegister: method(func(ctx context.Context, r api.RegisterRequest, _ io.Writer) (any, error) {
			return studyReply(sr.Register(ctx, r))
		}),
		api.MethodReview: method(func(ctx context.Context, r api.ReviewRequest, _ io.Writer) (any, error) {
			return studyReply(sr.Review(ctx, r.Name, studies.Review(r.Review), r.Why))
		}),
		api.MethodApprove: method(func(ctx context.Context, r api.NameRequest, _ io.Writer) (any, error) {
			return studyReply(sr.Approve(ctx, r.Name, r.Actor, r.Why))
		}),
		api.MethodWithdraw: method(func(ctx context.Context, r api.NameRequest, _ io.Writer) (any, error) {
			return studyReply(sr.Withdraw(ctx, r.Name, r.Actor, r.Why))
		}),
		api.MethodFreeze: method(func(ctx context.Context, r api.NameRequest, _ io.Writer) (any, error) {
			return studyReply(sr.Freeze(ctx, r.Name, r.Actor))
		}),
		api.MethodStatus: method(func(ctx context.Context, r api.NameRequest, _ io.Writer) (any, error) {
			return studyReply(sr.Status(ctx, r.Name))
		}),
		api.MethodList: method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) { return sr.List() }),
		// The whole stored verdict goes out; api.PreflightVerdict is the
		// part the protocol promises.
		api.MethodPreflight: method(func(ctx context.Context, r api.NameRequest, w io.Writer) (any, error) {
			return sr.Preflight(ctx, r.Name, w)
		}),
		api.MethodValidate: method(func(ctx context.Context, r api.NameRequest, w io.Writer) (any, error) {
			recs, err := sr.Validate(ctx, r.Name, w)
			return apiValidations(recs), err
		}),
		api.MethodDryRun: method(func(ctx context.Context, r api.DryRunRequest, w io.Writer) (any, error) {
			est, err := sr.DryRun(ctx, r.Name, r.Speeds, w)
			return apiEstimate(est), err
		}),
	}
}
