package api

import (
	"encoding/json"
	"time"
)

// NameRequest names a study, with who asks and why where a method records it.
type NameRequest struct {
	Name   string `json:"name"`
	Actor  string `json:"actor,omitempty"`
	Why    string `json:"why,omitempty"`
	Format string `json:"format,omitempty"`
	// Audit makes export write the store's audit trail instead of receipts.
	Audit bool `json:"audit,omitempty"`
}

// RegisterRequest is `rig study register`.
type RegisterRequest struct {
	// DesignFile names the design: in errors, and its folder is where
	// relative bank and model paths resolve. Design is its content, read by
	// the command line with the caller's own rights; a request without it
	// (an older command line) has the daemon read DesignFile, only as the
	// caller could.
	DesignFile string `json:"design_file"`
	Design     []byte `json:"design,omitempty"`
	Key        string `json:"key"`
	Actor      string `json:"actor"`
	// Registry is --registry, an absolute path; ConfiguredRegistry is
	// $RIG_LICENCE_REGISTRY as the CLI saw it (see
	// ChooseLicenceRegistry in package studies).
	Registry           string `json:"registry,omitempty"`
	ConfiguredRegistry string `json:"configured_registry,omitempty"`
	// Name, when set (register --name), is the study's name in place of the
	// design's name: the same design goes again under a new name without an
	// edit. It is part of the registered design and so of its hash.
	Name string `json:"name,omitempty"`
	// FromTry, when set (register --from-try ID), registers exactly what
	// that try ran: the try's digests of the design, banks, models,
	// runtime builds and licence registries are the expected ones, and any
	// that changed since is a stale asset. PilotFromTry fills the design's
	// power.pilot_discordance from the try's pairs (the largest), recorded
	// as such in the registration.
	FromTry      string `json:"from_try,omitempty"`
	PilotFromTry bool   `json:"pilot_from_try,omitempty"`
	// OllamaTags is what the command line resolved each arm's
	// model.ollama_tag to in the caller's own Ollama library, by tag: the
	// daemon's home and rights are not the caller's, so it does not look.
	OllamaTags map[string]OllamaBlob `json:"ollama_tags,omitempty"`
}

// OllamaBlob is the GGUF an Ollama tag names: the blob's absolute path and
// its sha256 (hex), which becomes the arm's model pin.
type OllamaBlob struct {
	File   string `json:"file"`
	SHA256 string `json:"sha256"`
}

// ReviewRequest is `rig study review`.
type ReviewRequest struct {
	Name   string `json:"name"`
	Review Review `json:"review"`
	Why    string `json:"why"`
}

// DryRunRequest is `rig study dry-run`.
type DryRunRequest struct {
	Name   string `json:"name"`
	Speeds string `json:"speeds,omitempty"`
}

// StudyInfo is a study as status shows it.
type StudyInfo struct {
	Name         string       `json:"name"`
	State        State        `json:"state"`
	DesignHash   string       `json:"design_hash"`
	SnapshotHash string       `json:"snapshot_hash,omitempty"`
	Dir          string       `json:"dir"`
	Store        string       `json:"store"` // the study's bbolt file
	Licences     []string     `json:"licences,omitempty"`
	Executions   []ExecInfo   `json:"executions,omitempty"`
	Audit        []AuditEntry `json:"audit,omitempty"`
	Replayed     bool         `json:"replayed,omitempty"` // an idempotent repeat of an earlier request
	// Preflight and Validation are the gates before a run, filled once the
	// study is frozen.
	Preflight  []FitInfo          `json:"preflight,omitempty"`
	Validation []ValidationRecord `json:"validation,omitempty"`
	// Activity is what a request on the study still running is doing now
	// (a validation run, a replayed record); empty when none is.
	Activity string `json:"activity,omitempty"`
	// LicenceTerms is what each licence entry the study rests on says
	// (terms, page, verdict per use), shown to a reviewer before the line.
	LicenceTerms []LicenceTerm `json:"licence_terms,omitempty"`
	// Warnings are what the design alone says before any trial: a decision
	// rule certain to assign one outcome (the rule's fate), shown at
	// register, review and freeze.
	Warnings []string `json:"warnings,omitempty"`
}

// FitInfo is one arm's stored preflight verdict at its card.
type FitInfo struct {
	Arm         string    `json:"arm"`
	Card        string    `json:"card"`
	Decided     bool      `json:"decided"` // false: no verdict stored yet
	Fits        bool      `json:"fits"`
	Outcome     string    `json:"outcome,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	MarginBytes int64     `json:"margin_bytes"`
	DecidedAt   time.Time `json:"decided_at,omitzero"`
}

// ValidationRecord is a harness's latest validation run, as the runner
// recorded it.
type ValidationRecord struct {
	Snapshot string    `json:"snapshot"`
	Harness  string    `json:"harness"`
	Arm      string    `json:"arm"`
	At       time.Time `json:"at"`
	Pass     bool      `json:"pass"`
	Problems []string  `json:"problems,omitempty"`
	// Containment is the sandbox's readings as the runtime package wrote
	// them (see docs/runtimes.md); passed on as it was recorded.
	Containment json.RawMessage `json:"containment"`
	Record      string          `json:"record"` // the generation record it wrote and checked
	// Caps are the validation's own, the same on every machine.
	Caps string `json:"caps"`
	// Speed is what the run measured on this machine.
	Speed *Speed `json:"speed,omitempty"`
}

// ExecInfo is an execution's progress.
type ExecInfo struct {
	ID         string    `json:"id"`
	Parent     string    `json:"parent,omitempty"`
	Attempt    int       `json:"attempt"`
	Status     string    `json:"status"`
	Planned    int       `json:"planned"`
	Done       int       `json:"done"`
	Preempted  int       `json:"preempted"`
	Failed     int       `json:"failed"` // trials whose receipt is an error: not scored, not retried in this execution
	Current    string    `json:"current,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	RatePerMin float64   `json:"rate_per_min"`
	ETA        string    `json:"eta,omitempty"`
	Error      string    `json:"error,omitempty"`
	Records    string    `json:"records,omitempty"` // directory of the generation records
	// Walls says how each auto wall cap was derived for this execution.
	Walls []string `json:"walls,omitempty"`
	// Engine is "temporal" for an execution spread over workers; empty for
	// one on the daemon's own card.
	Engine string `json:"engine,omitempty"`
	// Workers counts the receipts each worker returned (engine runs).
	Workers map[string]int `json:"workers,omitempty"`
}

// ExecStatusRunning is an ExecInfo.Status while the execution goes on.
const ExecStatusRunning = "running"
