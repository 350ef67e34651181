package daemon

// Access is the policy resource: which policy is in force, read by every
// request's authorization, and putting a new one in force (the daemon's
// start and its SIGHUP reload). It serves no socket method: the policy is
// a file the governed users cannot change, not a request.
type Access struct{ s *Service }

// Access is the daemon's policy resource.
func (s *Service) Access() Access { return Access{s} }

// Policy is the policy in force.
func (ac Access) Policy() *Policy { return ac.s.policy.Load() }

// SetPolicy puts a policy in force for the requests that follow.
func (ac Access) SetPolicy(p *Policy) { ac.s.policy.Store(p) }
