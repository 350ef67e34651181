package daemon

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"rig/studies"
)

// Separation of duties: who did one step of a study (or a proposal) may not
// do certain later ones. People are compared by uid, as the kernel named
// them on the socket; the name beside it is for people to read, and an
// account renamed keeps its uid and so its part.

// duty is a step separation of duties governs.
type duty string

const (
	dutyReview   duty = "review"
	dutyApprove  duty = "approve"
	dutyDecide   duty = "decide"
	dutyAmend    duty = "amend the decision on"
	dutyProposal duty = "approve or reject"
)

// part is what someone did earlier.
type part string

const (
	partRegistered part = "registered"
	partReviewed   part = "reviewed"
	partProposed   part = "proposed"
)

// barredBy is the rule, in one place: the earlier parts that bar each duty.
// A new duty is a row here and a call to separateDuties.
var barredBy = map[duty][]part{
	dutyReview:   {partRegistered},
	dutyApprove:  {partRegistered, partReviewed},
	dutyDecide:   {partRegistered, partReviewed},
	dutyAmend:    {partRegistered, partReviewed},
	dutyProposal: {partProposed},
}

// who must do each duty instead, for the refusal's last words.
var dutyInstead = map[duty]string{
	dutyReview:   "another reviewer and the Director must",
	dutyApprove:  "the Director approves",
	dutyDecide:   "a Director with no other part in the study decides",
	dutyAmend:    "a Director with no other part in the study amends the decision",
	dutyProposal: "another Director must",
}

// party is someone who had a part: the name as recorded and, when known,
// the uid.
type party struct {
	part part
	who  string
	uid  int
	// known is false for a record that names its actor without a uid (the
	// daemon's own in-process steps): compared by name.
	known bool
}

// legacyUID is the uid inside an actor's display string ("name (uid N)",
// Caller.String), as records made before the uid was stored beside it have.
var legacyUID = regexp.MustCompile(`\(uid (\d+)\)$`)

// recordedParty is the one reader of a recorded actor: the uid stored beside
// the name, or, in a record written before uids were stored, the uid its
// display string carries.
func recordedParty(p part, who string, uid *int) party {
	if uid != nil {
		return party{part: p, who: who, uid: *uid, known: true}
	}
	if m := legacyUID.FindStringSubmatch(who); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return party{part: p, who: who, uid: n, known: true}
		}
	}
	return party{part: p, who: who}
}

// studyParties are the registrant (every register entry of the audit) and
// the reviewer whose passing review the study's approval rests on.
func studyParties(l *studies.Lifecycle) []party {
	var out []party
	for _, e := range l.Audit {
		if e.Event == "register" {
			out = append(out, recordedParty(partRegistered, e.Actor, e.UID))
		}
	}
	for i := len(l.Reviews) - 1; i >= 0; i-- {
		if r := l.Reviews[i]; r.Verdict == "pass" {
			out = append(out, recordedParty(partReviewed, r.Reviewer, r.ReviewerUID))
			break
		}
	}
	return out
}

// proposalParties is who proposed it: the decider of its study.
func proposalParties(p Proposal) []party {
	return []party{recordedParty(partProposed, p.ProposedBy, p.ProposedByUID)}
}

// separateDuties refuses the caller a duty on subject ("study NAME",
// "proposal ID") when they had a part among parties that bars it. Under the
// single-user policy one person holds every role, so it cannot apply; the
// daemon says so when it starts. A call inside the daemon's process has no
// caller and is not refused.
func (s *Service) separateDuties(ctx context.Context, d duty, subject string, parties []party) error {
	c, ok := CallerFrom(ctx)
	if !ok || s.Access().Policy().Single() {
		return nil
	}
	for _, p := range parties {
		if !slices.Contains(barredBy[d], p.part) {
			continue
		}
		same := p.known && p.uid == c.UID || !p.known && (p.who == c.String() || p.who == c.User)
		if same {
			return fmt.Errorf("%w: %s %s %s (recorded as %s), so may not %s it (separation of duties: %s)", ErrForbidden, c, p.part, subject, p.who, d, dutyInstead[d])
		}
	}
	return nil
}

// callerUID is the uid a step is recorded under: the socket's caller; nil
// for a step the daemon's process takes itself.
func callerUID(ctx context.Context) *int {
	c, ok := CallerFrom(ctx)
	if !ok {
		return nil
	}
	uid := c.UID
	return &uid
}
