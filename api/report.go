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
	// Preview asks what would be recorded: the daemon runs every check a
	// decision runs (the caller's duties, the execution, the cited hash,
	// the lifecycle) and replies with the record, writing nothing.
	Preview bool `json:"preview,omitempty"`
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
	// Preview marks a reply to a preview: what would be recorded, not
	// recorded. A preview whose key was already used answers with the
	// recorded decision, Preview false.
	Preview bool `json:"preview,omitempty"`
}

// AmendDecisionRequest is `rig study amend-decision`: a correction
// appended to the study's recorded decision, which stays as it is.
type AmendDecisionRequest struct {
	Study     string `json:"study"`
	Rationale string `json:"rationale"`
	Actor     string `json:"actor"`
	// Preview asks what would be appended, writing nothing (as
	// DecideRequest.Preview).
	Preview bool `json:"preview,omitempty"`
}

// DecisionAmendment is one correction appended to a recorded decision: its
// own rationale, actor and time, and the decision it amends.
type DecisionAmendment struct {
	Study string `json:"study"`
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
	// Preview marks a reply to a preview: nothing was appended.
	Preview bool `json:"preview,omitempty"`
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
