package api

import "time"

// RunRequest is `rig study run` and `rig study rerun`.
type RunRequest struct {
	Study  string `json:"study"`
	Key    string `json:"key"`
	Actor  string `json:"actor"`
	Parent string `json:"parent,omitempty"` // rerun of this execution
	// Engine is "temporal" to spread the trials over rig workers through
	// the daemon's Temporal cluster; empty or "local" runs on this card.
	Engine string `json:"engine,omitempty"`
	// InFlight is, with the temporal engine, how many trials of one task
	// queue run at once (0: scaleout.DefaultInFlight).
	InFlight int `json:"in_flight,omitempty"`
	// StartWait is, with the temporal engine, how long a trial waits for
	// a worker of its queue (0: scaleout.DefaultStartWait).
	StartWait time.Duration `json:"start_wait,omitempty"`
}

// StoreSummary counts what `rig study check` read in a study's store. Its
// field names are its JSON names, as the store's own summary has them.
type StoreSummary struct {
	Executions int `json:"Executions"`
	Receipts   int `json:"Receipts"`
	Counted    int `json:"Counted"`
	Audit      int `json:"Audit"`
	Governor   int `json:"Governor"`
}

// MergeRequest is `rig study merge`.
type MergeRequest struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
}

// MergeSummary is what a second pass over an execution's spool did.
type MergeSummary struct {
	Entries   int `json:"entries"`
	Merged    int `json:"merged"`
	Already   int `json:"already"`
	Divergent int `json:"divergent"`
	// Partial counts entries a worker never finished: never merged.
	Partial int `json:"partial"`
	// Refused names entries the coordinator cannot vouch for: not merged.
	Refused []string `json:"refused,omitempty"`
}

// EngineReplayRequest is `rig study replay`.
type EngineReplayRequest struct {
	Study     string `json:"study"`
	Execution string `json:"execution"`
	PerArm    int    `json:"per_arm"`
	Seed      uint64 `json:"seed"`
}

// ReplayResult is one merged trial a worker replayed from its own record.
type ReplayResult struct {
	Arm          string   `json:"arm"`
	Key          string   `json:"key"`
	Attempt      int      `json:"attempt"`
	Entry        string   `json:"entry"`
	Queue        string   `json:"queue"`
	Runtime      string   `json:"runtime"`
	BinarySHA256 string   `json:"binary_sha256"`
	RecordSHA256 string   `json:"record_sha256"`
	Worker       string   `json:"worker"`
	Status       string   `json:"status"`
	Replayed     int      `json:"replayed"`
	Reproduced   int      `json:"reproduced"`
	MaxAbsDiff   float64  `json:"max_abs_diff"`
	Warnings     []string `json:"warnings,omitempty"`
}

// ReplayReproduced is a ReplayResult.Status when every replayed row
// reproduced (the generation record's own status word).
const ReplayReproduced = "reproduced"
