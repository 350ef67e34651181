package studies

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// State is where a study is in its life.
//
//	draft ──review(pass + licence line)──▶ reviewed ──approve(Director)──▶ approved
//	  ▲  ◀──────────── revise (design changed; review and approval lapse) ───┘
//	approved ──freeze──▶ frozen ──run──▶ running ──finish | cancel──▶ frozen
//	frozen ──decide (a finished execution)──▶ decided
//	decided ──amend-decision (a correction appended; the decision stays)──▶ decided
//	draft | reviewed | approved | frozen (no counted run yet) ──withdraw──▶ withdrawn
//
// running returns to frozen when an execution ends, cancelled or not: the
// snapshot is still frozen, finished trials stay as evidence, and a rerun is
// a new execution of the same snapshot. decided is final; newer inputs make a
// new study. withdrawn is final too: the study keeps its name and its record,
// and nothing more is done under it (the same design goes again under a new
// name).
type State string

// States of a study.
const (
	Draft    State = "draft"
	Reviewed State = "reviewed"
	Approved State = "approved"
	Frozen   State = "frozen"
	Running  State = "running"
	Decided  State = "decided"
	// Withdrawn is a study its registrant or a Director took back before any
	// counted run started: kept as a record, never run.
	Withdrawn State = "withdrawn"
)

// Event kinds.
const (
	EventReview   = "review"
	EventApprove  = "approve"
	EventRevise   = "revise"
	EventFreeze   = "freeze"
	EventRun      = "run"
	EventFinish   = "finish"
	EventCancel   = "cancel"
	EventDecide   = "decide"
	EventWithdraw = "withdraw"
	// EventAmend appends a correction to the recorded decision; the
	// decision itself, and the state, stay as they are.
	EventAmend = "amend-decision"
)

// ErrTransition classifies every refused transition; see *TransitionError.
var ErrTransition = errors.New("transition refused")

// ErrNoLicenceLine is a passing review without a licence line: it does not count.
var ErrNoLicenceLine = errors.New("review has no licence line")

// TransitionError says why an event cannot apply in the current state.
type TransitionError struct {
	From  State
	Event string
	Msg   string
	Err   error // a more specific sentinel, if any
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s from %s: %s", e.Event, e.From, e.Msg)
}

// Is matches ErrTransition and the specific sentinel.
func (e *TransitionError) Is(target error) bool {
	return target == ErrTransition || (e.Err != nil && target == e.Err)
}

// Review is an outside review's verdict on the design.
type Review struct {
	Reviewer string `json:"reviewer"`
	// ReviewerUID is the reviewer's uid as the daemon read it from the
	// socket; separation of duties compares it, not the name.
	ReviewerUID *int   `json:"reviewer_uid,omitempty"`
	Verdict     string `json:"verdict"` // "pass" or "fail"
	// LicenceLine is the reviewer's statement on the licence check.
	LicenceLine string `json:"licence_line"`
	DesignHash  string `json:"design_hash"`
	Notes       string `json:"notes,omitempty"`
}

// Event is one requested change of state. Actor and At are always needed;
// the other fields belong to particular kinds.
type Event struct {
	Kind  string
	Actor string
	// ActorUID is the actor's uid as the kernel named the caller; nil for a
	// step the daemon takes itself. The audit keeps it beside Actor.
	ActorUID *int
	At       time.Time
	Why      string

	Review       *Review // review
	DesignHash   string  // revise: the new design's hash
	SnapshotHash string  // freeze
	Execution    string  // run, finish, cancel, decide; amend-decision: the decided execution
	Outcome      string  // decide: what the decision rule assigned
}

// AuditEntry records a transition: who, when, why, from and to.
type AuditEntry struct {
	Event string `json:"event"`
	Actor string `json:"actor"`
	// UID is the actor's uid (Event.ActorUID): who did it, for separation of
	// duties; Actor is the name, for people. Entries written before uids
	// were kept have only Actor.
	UID    *int      `json:"uid,omitempty"`
	At     time.Time `json:"at"`
	Why    string    `json:"why,omitempty"`
	From   State     `json:"from"`
	To     State     `json:"to"`
	Detail string    `json:"detail,omitempty"`
}

// Lifecycle is a study's state and what each step recorded. The store
// persists it; Apply is the only way it changes.
type Lifecycle struct {
	State        State        `json:"state"`
	DesignHash   string       `json:"design_hash"`
	Reviews      []Review     `json:"reviews,omitempty"` // every verdict, passing or not
	Director     string       `json:"director,omitempty"`
	SnapshotHash string       `json:"snapshot_hash,omitempty"`
	Running      string       `json:"running,omitempty"`  // the execution in progress
	Finished     []string     `json:"finished,omitempty"` // executions that ran to the end
	Cancelled    []string     `json:"cancelled,omitempty"`
	Outcome      string       `json:"outcome,omitempty"`
	Amendments   []Amendment  `json:"amendments,omitempty"` // corrections appended to the decision, oldest first
	Audit        []AuditEntry `json:"audit,omitempty"`
}

// Amendment is a correction appended to a recorded decision, with its own
// rationale and actor: a rationale typed by mistake is answered, not
// rewritten.
type Amendment struct {
	// Seq numbers the study's amendments from 1, in the order they were made.
	Seq int `json:"seq"`
	// Execution and DecidedAt name the decision amended: the execution it
	// decided and when it was recorded.
	Execution string    `json:"execution"`
	DecidedAt time.Time `json:"decided_at"`
	Rationale string    `json:"rationale"`
	Actor     string    `json:"actor"`
	ActorUID  *int      `json:"actor_uid,omitempty"`
	At        time.Time `json:"at"`
}

// amendment is the correction ev would append, numbered after the ones
// recorded; Apply checks it may.
func (l *Lifecycle) amendment(ev Event) Amendment {
	a := Amendment{Seq: len(l.Amendments) + 1, Execution: ev.Execution, Rationale: ev.Why, Actor: ev.Actor, ActorUID: ev.ActorUID, At: ev.At}
	for _, e := range slices.Backward(l.Audit) {
		if e.Event == EventDecide {
			a.DecidedAt = e.At
			break
		}
	}
	return a
}

// NewLifecycle starts a registered study in draft.
func NewLifecycle(designHash, actor string, at time.Time) *Lifecycle {
	l := &Lifecycle{State: Draft, DesignHash: designHash}
	l.Audit = append(l.Audit, AuditEntry{Event: "register", Actor: actor, At: at, From: "", To: Draft, Detail: "design " + Short(designHash)})
	return l
}

// placeholder licence lines a reviewer might type to get past the check.
var emptyLines = []string{"", "-", "n/a", "na", "none", "tbd", "todo", "ok", "pass"}

// Apply checks ev against the current state and, when it is allowed,
// changes the lifecycle and returns the audit entry it appended. A refused
// event leaves the lifecycle unchanged. A failing review is recorded and
// audited but leaves the study in draft.
func (l *Lifecycle) Apply(ev Event) (AuditEntry, error) {
	refuse := func(sentinel error, format string, args ...any) (AuditEntry, error) {
		return AuditEntry{}, &TransitionError{From: l.State, Event: ev.Kind, Msg: fmt.Sprintf(format, args...), Err: sentinel}
	}
	if strings.TrimSpace(ev.Actor) == "" {
		return refuse(nil, "no actor (every transition records who made it)")
	}
	if ev.At.IsZero() {
		return refuse(nil, "no time (every transition records when)")
	}
	from, to := l.State, l.State
	detail := ""
	var commit func()
	switch ev.Kind {
	case EventReview:
		if from != Draft {
			return refuse(nil, "only a draft is reviewed (revise the design to review it again)")
		}
		r := ev.Review
		if r == nil || strings.TrimSpace(r.Reviewer) == "" {
			return refuse(nil, "no review (record the reviewer and verdict)")
		}
		if r.DesignHash != l.DesignHash {
			return refuse(nil, "the review is of design %s, the study's design is %s (review the current design)", Short(r.DesignHash), Short(l.DesignHash))
		}
		switch r.Verdict {
		case "pass":
			if slices.Contains(emptyLines, strings.ToLower(strings.TrimSpace(r.LicenceLine))) {
				return refuse(ErrNoLicenceLine, "a pass without a licence line does not count (the reviewer must state the licence check, e.g. \"licences: 7 items checked against registry.json, no banned use\")")
			}
			to = Reviewed
		case "fail":
		default:
			return refuse(nil, "verdict %q: write \"pass\" or \"fail\"", r.Verdict)
		}
		detail = fmt.Sprintf("%s by %s; licence: %s", r.Verdict, r.Reviewer, r.LicenceLine)
		rev := *r
		commit = func() { l.Reviews = append(l.Reviews, rev) }
	case EventApprove:
		if from != Reviewed {
			return refuse(nil, "approval needs a passing review first")
		}
		// The Director approves in person; Actor is the Director's name.
		detail = "approved by the Director, " + ev.Actor
		to = Approved
		commit = func() { l.Director = ev.Actor }
	case EventRevise:
		if from != Draft && from != Reviewed && from != Approved {
			return refuse(nil, "a frozen design never changes (register a new study for a new design)")
		}
		if ev.DesignHash == "" || ev.DesignHash == l.DesignHash {
			return refuse(nil, "revise needs the new design's hash, different from the current one")
		}
		to = Draft
		detail = fmt.Sprintf("design %s → %s; review and approval lapse", Short(l.DesignHash), Short(ev.DesignHash))
		commit = func() { l.DesignHash, l.Director = ev.DesignHash, "" }
	case EventFreeze:
		if from != Approved {
			return refuse(nil, "freeze needs the Director's approval first")
		}
		if ev.SnapshotHash == "" {
			return refuse(nil, "no snapshot hash")
		}
		to = Frozen
		detail = "snapshot " + Short(ev.SnapshotHash)
		commit = func() { l.SnapshotHash = ev.SnapshotHash }
	case EventRun:
		if from != Frozen {
			return refuse(nil, "only a frozen study runs (one execution at a time)")
		}
		if ev.Execution == "" {
			return refuse(nil, "no execution id")
		}
		to = Running
		detail = "execution " + ev.Execution
		commit = func() { l.Running = ev.Execution }
	case EventFinish, EventCancel:
		if from != Running {
			return refuse(nil, "no execution is running")
		}
		if ev.Execution != l.Running {
			return refuse(nil, "execution %q is not the one running (%q)", ev.Execution, l.Running)
		}
		to = Frozen
		detail = "execution " + ev.Execution
		exec, cancelled := ev.Execution, ev.Kind == EventCancel
		commit = func() {
			l.Running = ""
			if cancelled {
				l.Cancelled = append(l.Cancelled, exec)
			} else {
				l.Finished = append(l.Finished, exec)
			}
		}
	case EventDecide:
		if from != Frozen {
			return refuse(nil, "decide needs a frozen study with no execution running")
		}
		if !slices.Contains(l.Finished, ev.Execution) {
			return refuse(nil, "execution %q did not run to the end (decide on a finished execution; rerun a cancelled one)", ev.Execution)
		}
		if strings.TrimSpace(ev.Outcome) == "" || strings.TrimSpace(ev.Why) == "" {
			return refuse(nil, "a decision needs the outcome the rule assigned and a rationale")
		}
		to = Decided
		detail = fmt.Sprintf("execution %s: %s", ev.Execution, ev.Outcome)
		commit = func() { l.Outcome = ev.Outcome }
	case EventAmend:
		if from != Decided {
			return refuse(nil, "no decision is recorded yet: an amendment corrects a recorded decision (record it first with rig study decide)")
		}
		if ev.Execution == "" {
			return refuse(nil, "an amendment names the decided execution it amends")
		}
		if strings.TrimSpace(ev.Why) == "" {
			return refuse(nil, "an amendment needs its own rationale (--rationale)")
		}
		a := l.amendment(ev)
		detail = fmt.Sprintf("amendment %d of the decision on execution %s", a.Seq, a.Execution)
		commit = func() { l.Amendments = append(l.Amendments, a) }
	case EventWithdraw:
		switch {
		case from == Withdrawn:
			return refuse(nil, "the study is withdrawn already")
		case from == Running || from == Decided || len(l.Finished)+len(l.Cancelled) > 0:
			return refuse(nil, "a counted run has started, and its receipts are evidence: a study is withdrawn only before its first counted run (decide it, or leave it)")
		case strings.TrimSpace(ev.Why) == "":
			return refuse(nil, "a withdrawal needs a reason (--why)")
		}
		to = Withdrawn
		detail = "withdrawn by " + ev.Actor
		commit = func() {}
	default:
		return refuse(nil, "unknown event (want review, approve, revise, freeze, run, finish, cancel, decide, amend-decision or withdraw)")
	}
	commit()
	l.State = to
	e := AuditEntry{Event: ev.Kind, Actor: ev.Actor, UID: ev.ActorUID, At: ev.At, Why: ev.Why, From: from, To: to, Detail: detail}
	l.Audit = append(l.Audit, e)
	return e, nil
}
