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
	if strings.TrimSpace(ev.Actor) == "" {
		return AuditEntry{}, l.refuse(ev, nil, "no actor (every transition records who made it)")
	}
	if ev.At.IsZero() {
		return AuditEntry{}, l.refuse(ev, nil, "no time (every transition records when)")
	}
	from := l.State
	t, err := l.transitionFor(ev)
	if err != nil {
		return AuditEntry{}, err
	}
	t.commit()
	l.State = t.to
	e := AuditEntry{Event: ev.Kind, Actor: ev.Actor, UID: ev.ActorUID, At: ev.At, Why: ev.Why, From: from, To: t.to, Detail: t.detail}
	l.Audit = append(l.Audit, e)
	return e, nil
}

// transition is what an event that may apply does: the state it leads to,
// the audit entry's detail, and the change to the record, made only once
// the event is accepted.
type transition struct {
	to     State
	detail string
	commit func()
}

// refuse is the error for ev, which cannot apply in the current state.
func (l *Lifecycle) refuse(ev Event, sentinel error, format string, args ...any) error {
	return &TransitionError{From: l.State, Event: ev.Kind, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

// transitionFor checks that ev may apply in the current state and says what
// it would do; it changes nothing.
func (l *Lifecycle) transitionFor(ev Event) (transition, error) {
	switch ev.Kind {
	case EventReview:
		return l.review(ev)
	case EventApprove:
		if l.State != Reviewed {
			return transition{}, l.refuse(ev, nil, "approval needs a passing review first")
		}
		// The Director approves in person; Actor is the Director's name.
		return transition{to: Approved, detail: "approved by the Director, " + ev.Actor, commit: func() { l.Director = ev.Actor }}, nil
	case EventRevise:
		if from := l.State; from != Draft && from != Reviewed && from != Approved {
			return transition{}, l.refuse(ev, nil, "a frozen design never changes (register a new study for a new design)")
		}
		if ev.DesignHash == "" || ev.DesignHash == l.DesignHash {
			return transition{}, l.refuse(ev, nil, "revise needs the new design's hash, different from the current one")
		}
		detail := fmt.Sprintf("design %s → %s; review and approval lapse", Short(l.DesignHash), Short(ev.DesignHash))
		return transition{to: Draft, detail: detail, commit: func() { l.DesignHash, l.Director = ev.DesignHash, "" }}, nil
	case EventFreeze:
		if l.State != Approved {
			return transition{}, l.refuse(ev, nil, "freeze needs the Director's approval first")
		}
		if ev.SnapshotHash == "" {
			return transition{}, l.refuse(ev, nil, "no snapshot hash")
		}
		return transition{to: Frozen, detail: "snapshot " + Short(ev.SnapshotHash), commit: func() { l.SnapshotHash = ev.SnapshotHash }}, nil
	case EventRun:
		if l.State != Frozen {
			return transition{}, l.refuse(ev, nil, "only a frozen study runs (one execution at a time)")
		}
		if ev.Execution == "" {
			return transition{}, l.refuse(ev, nil, "no execution id")
		}
		return transition{to: Running, detail: "execution " + ev.Execution, commit: func() { l.Running = ev.Execution }}, nil
	case EventFinish, EventCancel:
		return l.endRun(ev)
	case EventDecide:
		return l.decide(ev)
	case EventAmend:
		return l.amend(ev)
	case EventWithdraw:
		return l.withdraw(ev)
	default:
		return transition{}, l.refuse(ev, nil, "unknown event (want review, approve, revise, freeze, run, finish, cancel, decide, amend-decision or withdraw)")
	}
}

// review records an outside review of a draft; only a pass with a licence
// line moves it on.
func (l *Lifecycle) review(ev Event) (transition, error) {
	if l.State != Draft {
		return transition{}, l.refuse(ev, nil, "only a draft is reviewed (revise the design to review it again)")
	}
	r := ev.Review
	if r == nil || strings.TrimSpace(r.Reviewer) == "" {
		return transition{}, l.refuse(ev, nil, "no review (record the reviewer and verdict)")
	}
	if r.DesignHash != l.DesignHash {
		return transition{}, l.refuse(ev, nil, "the review is of design %s, the study's design is %s (review the current design)", Short(r.DesignHash), Short(l.DesignHash))
	}
	to := l.State
	switch r.Verdict {
	case "pass":
		if slices.Contains(emptyLines, strings.ToLower(strings.TrimSpace(r.LicenceLine))) {
			return transition{}, l.refuse(ev, ErrNoLicenceLine, "a pass without a licence line does not count (the reviewer must state the licence check, e.g. \"licences: 7 items checked against registry.json, no banned use\")")
		}
		to = Reviewed
	case "fail":
	default:
		return transition{}, l.refuse(ev, nil, "verdict %q: write \"pass\" or \"fail\"", r.Verdict)
	}
	rev := *r
	return transition{to: to, detail: fmt.Sprintf("%s by %s; licence: %s", r.Verdict, r.Reviewer, r.LicenceLine),
		commit: func() { l.Reviews = append(l.Reviews, rev) }}, nil
}

// endRun ends the running execution, finished or cancelled.
func (l *Lifecycle) endRun(ev Event) (transition, error) {
	if l.State != Running {
		return transition{}, l.refuse(ev, nil, "no execution is running")
	}
	if ev.Execution != l.Running {
		return transition{}, l.refuse(ev, nil, "execution %q is not the one running (%q)", ev.Execution, l.Running)
	}
	exec, cancelled := ev.Execution, ev.Kind == EventCancel
	commit := func() {
		l.Running = ""
		if cancelled {
			l.Cancelled = append(l.Cancelled, exec)
		} else {
			l.Finished = append(l.Finished, exec)
		}
	}
	return transition{to: Frozen, detail: "execution " + ev.Execution, commit: commit}, nil
}

// decide records the outcome the rule assigned to a finished execution.
func (l *Lifecycle) decide(ev Event) (transition, error) {
	if l.State != Frozen {
		return transition{}, l.refuse(ev, nil, "decide needs a frozen study with no execution running")
	}
	if !slices.Contains(l.Finished, ev.Execution) {
		return transition{}, l.refuse(ev, nil, "execution %q did not run to the end (decide on a finished execution; rerun a cancelled one)", ev.Execution)
	}
	if strings.TrimSpace(ev.Outcome) == "" || strings.TrimSpace(ev.Why) == "" {
		return transition{}, l.refuse(ev, nil, "a decision needs the outcome the rule assigned and a rationale")
	}
	return transition{to: Decided, detail: fmt.Sprintf("execution %s: %s", ev.Execution, ev.Outcome), commit: func() { l.Outcome = ev.Outcome }}, nil
}

// amend appends a correction to the recorded decision; the state stays.
func (l *Lifecycle) amend(ev Event) (transition, error) {
	if l.State != Decided {
		return transition{}, l.refuse(ev, nil, "no decision is recorded yet: an amendment corrects a recorded decision (record it first with rig study decide)")
	}
	if ev.Execution == "" {
		return transition{}, l.refuse(ev, nil, "an amendment names the decided execution it amends")
	}
	if strings.TrimSpace(ev.Why) == "" {
		return transition{}, l.refuse(ev, nil, "an amendment needs its own rationale (--rationale)")
	}
	a := l.amendment(ev)
	return transition{to: l.State, detail: fmt.Sprintf("amendment %d of the decision on execution %s", a.Seq, a.Execution),
		commit: func() { l.Amendments = append(l.Amendments, a) }}, nil
}

// withdraw ends a study before its first counted run.
func (l *Lifecycle) withdraw(ev Event) (transition, error) {
	switch from := l.State; {
	case from == Withdrawn:
		return transition{}, l.refuse(ev, nil, "the study is withdrawn already")
	case from == Running || from == Decided || len(l.Finished)+len(l.Cancelled) > 0:
		return transition{}, l.refuse(ev, nil, "a counted run has started, and its receipts are evidence: a study is withdrawn only before its first counted run (decide it, or leave it)")
	case strings.TrimSpace(ev.Why) == "":
		return transition{}, l.refuse(ev, nil, "a withdrawal needs a reason (--why)")
	}
	return transition{to: Withdrawn, detail: "withdrawn by " + ev.Actor, commit: func() {}}, nil
}
