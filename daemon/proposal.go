package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"rig/api"
	"rig/internal/atomicfile"
	"rig/studies"
)

// Proposal states. A proposal starts pending_approval and moves once, to
// approved or rejected; nothing else.
const (
	ProposalPending  = api.ProposalPending
	ProposalApproved = api.ProposalApproved
	ProposalRejected = api.ProposalRejected
)

// Proposal is what deciding "switch to the challenger" writes: the new
// incumbent, pinned, as the baseline for the next study, with the report and
// comparison it rests on. Approving it changes only what the next
// `rig study init` and `rig study dry-run` read as the baseline (baseline.json
// in the daemon's home); nothing that runs changes.
type Proposal = api.Proposal

// ErrNoProposal means no proposal has that id.
var ErrNoProposal = api.ErrNoProposal

func (pr Proposals) proposalDir() string { return pr.s.layout().Proposals() }

// baselineFile is the approved baseline the next study reads.
func (pr Proposals) baselineFile() string { return pr.s.layout().Baseline() }

// propose writes the proposal of a decision that switches to rec.Arm. The
// id comes from the study and the comparison, so an idempotent decide that
// is replayed finds the same proposal rather than writing a second.
func (pr Proposals) propose(rec DecisionRecord, snap *studies.Snapshot, d *studies.Design) (Proposal, error) {
	p := Proposal{ID: rec.Study + "-" + shortHash(rec.ComparisonHash), State: ProposalPending, Study: rec.Study, Execution: rec.Execution,
		DesignHash: snap.DesignHash, ComparisonHash: rec.ComparisonHash, Arm: rec.Arm, ProposedBy: rec.Actor, ProposedByUID: rec.ActorUID, ProposedAt: rec.At}
	if a := d.Arm(rec.Arm); a != nil {
		p.Runtime, p.Model = string(a.Runtime), api.Model(a.Model)
	}
	for _, fa := range snap.Arms {
		if fa.Name == rec.Arm {
			p.ModelSHA256, p.Binaries, p.Pins = fa.ModelSHA256, convertAll(fa.Binaries, apiBinary), apiPins(fa.Pins)
		}
	}
	sd, err := pr.s.study(rec.Study)
	if err != nil {
		return Proposal{}, err
	}
	reports, err := sd.Report(rec.Execution)
	if err != nil {
		return Proposal{}, err
	}
	report := reports.JSON()
	if b, err := os.ReadFile(report); err == nil {
		sum := sha256.Sum256(b)
		p.Report, p.ReportSHA256 = report, hex.EncodeToString(sum[:])
	}
	pr.s.propMu.Lock()
	defer pr.s.propMu.Unlock()
	file, err := pr.s.layout().Proposal(p.ID)
	if err != nil {
		return Proposal{}, err
	}
	if old, err := pr.readProposal(p.ID); err == nil {
		return old, nil
	}
	if err := os.MkdirAll(pr.proposalDir(), 0o700); err != nil {
		return Proposal{}, err
	}
	if err := pr.auditProposal(p, "", fmt.Sprintf("study %s decided to switch to %s on comparison %s", p.Study, p.Arm, shortHash(p.ComparisonHash)), p.ProposedBy, p.ProposedAt); err != nil {
		return Proposal{}, err
	}
	return p, atomicfile.WriteJSON(file, p, 0o600)
}

// proposalAuditLine is one line of audits/proposals.jsonl.
type proposalAuditLine struct {
	At       time.Time `json:"at"`
	Proposal string    `json:"proposal"`
	Study    string    `json:"study"`
	Arm      string    `json:"arm"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Who      string    `json:"who"`
	Why      string    `json:"why"`
}

// auditProposal appends p's move from from to p.State to the daemon's
// proposal trail. It is written before the proposal's own file, so that no
// state is ever in force without its line; a write that then fails leaves
// the proposal as it was, and doing it again adds a second line.
func (pr Proposals) auditProposal(p Proposal, from, why, who string, at time.Time) error {
	return appendAuditLine(pr.s.Home, "proposals", proposalAuditLine{At: at.UTC(), Proposal: p.ID, Study: p.Study, Arm: p.Arm, From: from, To: p.State, Who: who, Why: why})
}

func (pr Proposals) readProposal(id string) (Proposal, error) {
	file, err := pr.s.layout().Proposal(id)
	if err != nil {
		return Proposal{}, err
	}
	var p Proposal
	err = atomicfile.ReadJSON(file, &p)
	if errors.Is(err, os.ErrNotExist) {
		return Proposal{}, fmt.Errorf("%w: %q (rig proposal list shows them)", ErrNoProposal, id)
	}
	return p, err
}

// List lists every proposal, oldest first.
func (pr Proposals) List() ([]Proposal, error) {
	files, err := filepath.Glob(filepath.Join(pr.proposalDir(), "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Proposal
	for _, f := range files {
		p, err := pr.readProposal(strings.TrimSuffix(filepath.Base(f), ".json"))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProposedAt.Before(out[j].ProposedAt) })
	return out, nil
}

// Get is one proposal by id.
func (pr Proposals) Get(id string) (Proposal, error) { return pr.readProposal(id) }

// ProposalRequest is `rig proposal approve|reject`.
type ProposalRequest = api.ProposalRequest

// Decide moves a pending proposal to approved or rejected (to). It
// needs the director role (the daemon's policy, methodRoles) and, under a
// policy, someone other than who proposed it: the decider of the study may
// not approve their own switch. Approving writes baseline.json.
func (pr Proposals) Decide(ctx context.Context, req ProposalRequest, to string) (Proposal, error) {
	if to != ProposalApproved && to != ProposalRejected {
		return Proposal{}, fmt.Errorf("%w: a proposal moves from %s to %s or %s, not %q", studies.ErrTransition, ProposalPending, ProposalApproved, ProposalRejected, to)
	}
	actor, err := pr.s.actor(ctx, req.Actor)
	if err != nil {
		return Proposal{}, err
	}
	if strings.TrimSpace(req.Why) == "" {
		return Proposal{}, fmt.Errorf("%w: say why (--why): the record keeps it beside who and when", ErrBadRequest)
	}
	pr.s.propMu.Lock()
	defer pr.s.propMu.Unlock()
	p, err := pr.readProposal(req.ID)
	if err != nil {
		return Proposal{}, err
	}
	if p.State != ProposalPending {
		return Proposal{}, fmt.Errorf("%w: proposal %s is %s (by %s at %s); only a %s proposal can be approved or rejected, and a decided one stays as it is (decide a new study to propose again)",
			studies.ErrTransition, p.ID, p.State, p.DecidedBy, p.DecidedAt.Format(time.RFC3339), ProposalPending)
	}
	if err := pr.s.separateDuties(ctx, dutyProposal, "proposal "+p.ID+" (deciding study "+p.Study+")", proposalParties(p)); err != nil {
		return Proposal{}, err
	}
	p.State, p.DecidedBy, p.DecidedByUID, p.DecidedAt, p.Why = to, actor, callerUID(ctx), time.Now().UTC(), req.Why
	if err := pr.auditProposal(p, ProposalPending, req.Why, actor, p.DecidedAt); err != nil {
		return Proposal{}, err
	}
	if to == ProposalApproved {
		if err := atomicfile.WriteJSON(pr.baselineFile(), p, 0o600); err != nil {
			return Proposal{}, err
		}
	}
	file, err := pr.s.layout().Proposal(p.ID)
	if err != nil {
		return Proposal{}, err
	}
	return p, atomicfile.WriteJSON(file, p, 0o600)
}

// Baseline is the approved proposal the next study starts from; ok is false
// when none has been approved on this machine.
func (pr Proposals) Baseline() (p Proposal, ok bool, err error) {
	err = atomicfile.ReadJSON(pr.baselineFile(), &p)
	if errors.Is(err, os.ErrNotExist) {
		return Proposal{}, false, nil
	}
	return p, err == nil, err
}

// BaselineNote says, for a dry run, which baseline is approved and whether
// the design's incumbent is it.
func BaselineNote(p Proposal, d *studies.Design) string {
	note := fmt.Sprintf("baseline: %s (model sha256 %s, %s) from study %s, approved by %s in proposal %s",
		p.Arm, shortHash(p.ModelSHA256), p.Runtime, p.Study, p.DecidedBy, p.ID)
	for _, a := range d.Arms {
		if a.Role != studies.RoleIncumbent {
			continue
		}
		if a.Model.SHA256 != "" && a.Model.SHA256 != p.ModelSHA256 || a.Model.RegistryName != p.Model.RegistryName {
			note += fmt.Sprintf("; this design's incumbent %s (%s) is not it: compare against the approved baseline, or say why not", a.Name, a.Model.RegistryName)
		}
	}
	return note
}
