package daemon

import (
	"context"
	"io"

	"rig/api"
)

// Proposals serves the requests about publish proposals (the ones a
// decision opens): list, show, approve or reject, and the baseline an
// approved one sets.
type Proposals struct{ s *Service }

// Proposals is the daemon's proposals resource.
func (s *Service) Proposals() Proposals { return Proposals{s} }

// methods, by name: publish proposals and the baseline they set.
func (pr Proposals) methods() map[string]handler {
	return map[string]handler{
		api.MethodProposalList: method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) { return pr.List() }),
		api.MethodProposalShow: method(func(ctx context.Context, r api.ProposalRequest, _ io.Writer) (any, error) { return pr.Get(r.ID) }),
		api.MethodProposalApprove: method(func(ctx context.Context, r api.ProposalRequest, _ io.Writer) (any, error) {
			return pr.Decide(ctx, r, ProposalApproved)
		}),
		api.MethodProposalReject: method(func(ctx context.Context, r api.ProposalRequest, _ io.Writer) (any, error) {
			return pr.Decide(ctx, r, ProposalRejected)
		}),
		api.MethodBaseline: method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) {
			p, ok, err := pr.Baseline()
			if !ok || err != nil {
				return nil, err
			}
			return p, nil
		}),
	}
}
