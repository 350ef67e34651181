package api

import (
	"fmt"
	"time"
)

// Proposal states. A proposal starts pending_approval and moves once, to
// approved or rejected; nothing else.
const (
	ProposalPending  = "pending_approval"
	ProposalApproved = "approved"
	ProposalRejected = "rejected"
)

// Proposal is what deciding "switch to the challenger" writes: the new
// incumbent, pinned, as the baseline for the next study, with the report and
// comparison it rests on. Approving it changes only what the next
// `rig study init` and `rig study dry-run` read as the baseline; nothing that
// runs changes.
type Proposal struct {
	ID             string `json:"id"`
	State          string `json:"state"`
	Study          string `json:"study"`
	Execution      string `json:"execution"`
	DesignHash     string `json:"design_hash"`
	ComparisonHash string `json:"comparison_hash"`
	Report         string `json:"report,omitempty"`
	ReportSHA256   string `json:"report_sha256,omitempty"`
	Arm            string `json:"arm"`
	Runtime        string `json:"runtime"`
	Model          Model  `json:"model"`
	// ModelSHA256 and Binaries are the digests the arm was frozen with.
	ModelSHA256 string   `json:"model_sha256"`
	Binaries    []Binary `json:"binaries,omitempty"`
	Pins        Pins     `json:"pins"`
	ProposedBy  string   `json:"proposed_by"`
	// ProposedByUID and DecidedByUID are the uids beside the names, as the
	// socket named the callers: separation of duties compares them.
	ProposedByUID *int      `json:"proposed_by_uid,omitempty"`
	ProposedAt    time.Time `json:"proposed_at"`
	DecidedBy     string    `json:"decided_by,omitempty"`
	DecidedByUID  *int      `json:"decided_by_uid,omitempty"`
	DecidedAt     time.Time `json:"decided_at,omitzero"`
	Why           string    `json:"why,omitempty"`
}

// ProposalRequest is `rig proposal show|approve|reject`.
type ProposalRequest struct {
	ID    string `json:"id"`
	Why   string `json:"why"`
	Actor string `json:"actor,omitempty"`
}

// MonthlyBudget caps what every study on the daemon's machine may spend in
// one calendar month (UTC), set by an operator.
type MonthlyBudget struct {
	WallTime string    `json:"wall_time"` // a Go duration, e.g. "200h"
	EnergyWh float64   `json:"energy_wh"`
	SetBy    string    `json:"set_by"`
	SetAt    time.Time `json:"set_at"`
	Why      string    `json:"why,omitempty"`
}

// BudgetRequest is `rig budget set`.
type BudgetRequest struct {
	WallTime string  `json:"wall_time"`
	EnergyWh float64 `json:"energy_wh"`
	Why      string  `json:"why"`
	Actor    string  `json:"actor,omitempty"`
}

// MonthStatus is a month's cap, what the receipts of every study say was
// spent in it, and what is left.
type MonthStatus struct {
	Month       string         `json:"month"` // "2026-05"
	Cap         *MonthlyBudget `json:"cap,omitempty"`
	UsedSeconds float64        `json:"used_seconds"`
	UsedWh      float64        `json:"used_wh"`
	LeftSeconds float64        `json:"left_seconds"`
	LeftWh      float64        `json:"left_wh"`
}

// String is the month in one line, as the dry run and `rig budget show`
// print it.
func (m MonthStatus) String() string {
	if m.Cap == nil {
		return fmt.Sprintf("month %s: no monthly budget set (an operator sets one: rig budget set); spent so far %s, %.1f Wh", m.Month, seconds(m.UsedSeconds), m.UsedWh)
	}
	return fmt.Sprintf("month %s: budget %s and %.1f Wh (set by %s); spent %s and %.1f Wh; left %s and %.1f Wh",
		m.Month, m.Cap.WallTime, m.Cap.EnergyWh, m.Cap.SetBy, seconds(m.UsedSeconds), m.UsedWh, seconds(m.LeftSeconds), m.LeftWh)
}

func seconds(sec float64) time.Duration {
	return time.Duration(sec * float64(time.Second)).Round(time.Second)
}
