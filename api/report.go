package api

import "time"

// ReportOptions are `rig study report`'s choices.
type ReportOptions struct {
	Execution string `json:"execution,omitempty"`
	// ReplaySample, when above zero, replays that many rows of every
	// generation record before the report is written.
	ReplaySample int `json:"replay_sample,omitempty"`
}

// ReportRequest is `rig study report`.
type ReportRequest struct {
	Name string `json:"name"`
	ReportOptions
}

// ReportFiles are the paths `rig study report` wrote, and its summary.
type ReportFiles struct {
	HTML     string `json:"html"`
	JSON     string `json:"json"`
	Markdown string `json:"markdown"`
	Summary  string `json:"summary"`
}

// DecideRequest is `rig study decide`.
type DecideRequest struct {
	Study          string `json:"study"`
	Execution      string `json:"execution,omitempty"`
	ComparisonHash string `json:"comparison_hash"` // the hash the decider read; a stale one is refused
	Rationale      string `json:"rationale"`
	Actor          string `json:"actor"`
	// Key makes the request idempotent: the same key with the same request
	// returns the recorded decision; with another request it is a conflict.
	Key string `json:"key,omitempty"`
}

// DecisionRecord is what `rig study decide` recorded: the outcome the
// pre-registered rule assigned, the logic that produced it, the actor and
// the comparison hash it cites.
type DecisionRecord struct {
	Study          string   `json:"study"`
	Execution      string   `json:"execution"`
	Action         string   `json:"action"`
	Verdict        string   `json:"verdict"`
	Arm            string   `json:"arm,omitempty"`
	NextBaseline   string   `json:"next_baseline"`
	Trace          []string `json:"trace"`
	ComparisonHash string   `json:"comparison_hash"`
	Rationale      string   `json:"rationale"`
	Actor          string   `json:"actor"`
	// ActorUID is the decider's uid as the socket named them; nil for a
	// decision the daemon's process made.
	ActorUID *int      `json:"actor_uid,omitempty"`
	At       time.Time `json:"at"`
	// Proposal is the publish proposal a switch to the challenger wrote
	// (pending the Director's approval); empty for any other outcome.
	Proposal string `json:"proposal,omitempty"`
}

// RegradeRequest is `rig grade --regrade`.
type RegradeRequest struct {
	Study string `json:"study"`
	// Grader limits the re-grade to trials whose task grader has this name;
	// empty re-grades every trial with its own task grader.
	Grader string `json:"grader,omitempty"`
	// Version is the grader version to grade with; 0 means the newest.
	Version int `json:"version,omitempty"`
	// Execution is the execution whose outputs are re-graded; empty means
	// the latest finished one.
	Execution string `json:"execution,omitempty"`
}

// RegradeRow compares a trial's stored grade with its re-grade.
type RegradeRow struct {
	JobKind    string  `json:"job_kind"`
	Task       string  `json:"task"`
	Arm        string  `json:"arm"`
	Repeat     int     `json:"repeat"`
	OldGrader  string  `json:"old_grader"`
	OldScore   float64 `json:"old_score"`
	OldPass    bool    `json:"old_pass"`
	NewGrader  string  `json:"new_grader"`
	NewScore   float64 `json:"new_score"`
	NewPass    bool    `json:"new_pass"`
	Changed    bool    `json:"changed"`
	AlreadyHad bool    `json:"already_had,omitempty"` // this version's grade was stored by an earlier re-grade
}

// RegradeReport is what a re-grade stored and how it compares.
type RegradeReport struct {
	Study     string       `json:"study"`
	Execution string       `json:"execution"`
	Rows      []RegradeRow `json:"rows"`
	Written   int          `json:"written"`
	Changed   int          `json:"changed"`
	// Skipped says which trials were left alone and why.
	Skipped []string `json:"skipped,omitempty"`
}

// UIInfo is `rig ui`'s reply: the workspace's URL, with a single-use token.
type UIInfo struct {
	URL string `json:"url"`
	// Started is false when the workspace was already running.
	Started bool `json:"started"`
}
