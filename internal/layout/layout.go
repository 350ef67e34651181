package layout

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrLink means a path rig opens by name is a symbolic link: a link
// planted there must not be followed to wherever it points.
var ErrLink = errors.New("refused a symbolic link")

// Home is a daemon's home ($RIG_HOME):
//
//	HOME/studies/NAME/...        one folder per study (see Study)
//	HOME/proposals/ID.json       one file per proposal
//	HOME/baseline.json           the approved baseline
//	HOME/budget.json             the monthly budget's cap
//	HOME/audits/TRAIL.jsonl      the daemon-wide audit trails (policy, proposals, budget)
//	HOME/identity                the home's random id (Identity)
//	HOME/tries/ID/...            one folder per kept try (see Tries)
type Home string

// IdentityFile holds the home's identity.
func (h Home) IdentityFile() string { return filepath.Join(string(h), "identity") }

// Identity is the home's own id: 16 random bytes in hex, written into the
// home the first time it is asked for and read back ever after. It names
// what belongs to the home rather than to the machine (the coordinator's
// task queue), so a home moved to another host, or a daemon rescheduled,
// is still itself; a copy of a home is the same home.
func (h Home) Identity() (string, error) {
	path := h.IdentityFile()
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
			return "", fmt.Errorf("%s: %q is not a home identity (32 hex digits): remove the file and a new one is made, but workflows submitted under the old identity then wait for a coordinator that no longer serves them", path, id)
		}
		return id, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(string(h), 0o700); err != nil {
		return "", err
	}
	// Written whole beside it, then linked into place: the file is never
	// seen half written, and of two daemons starting on one home at once
	// the first link is the home's id and the other reads it back.
	f, err := os.CreateTemp(string(h), ".identity-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(id + "\n"); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return h.Identity()
	} else if err != nil {
		return "", err
	}
	return id, nil
}

// Studies is the folder that holds every study's folder.
func (h Home) Studies() string { return filepath.Join(string(h), "studies") }

// Study is the study called name. The name is checked first
// (CheckStudyName), so nothing from a request reaches a path unchecked, and
// a study folder that is a symlink is refused (ErrLink): the folder must be
// the one the daemon made.
func (h Home) Study(name string) (Study, error) {
	if err := CheckStudyName(name); err != nil {
		return Study{}, err
	}
	s := Study{name: name, dir: filepath.Join(h.Studies(), name)}
	if err := NoLink(s.dir); err != nil {
		return Study{}, fmt.Errorf("study %s: %w", name, err)
	}
	return s, nil
}

// Proposals is the folder of every proposal.
func (h Home) Proposals() string { return filepath.Join(string(h), "proposals") }

// Proposal is proposal id's file; the id is checked first (CheckProposalID).
func (h Home) Proposal(id string) (string, error) {
	if err := CheckProposalID(id); err != nil {
		return "", err
	}
	return filepath.Join(h.Proposals(), id+".json"), nil
}

// Baseline is the approved baseline the next study reads.
func (h Home) Baseline() string { return filepath.Join(string(h), "baseline.json") }

// Budget is the monthly budget's cap.
func (h Home) Budget() string { return filepath.Join(string(h), "budget.json") }

// Audits is the folder of the daemon-wide audit trails.
func (h Home) Audits() string { return filepath.Join(string(h), "audits") }

// Audit is trail's file in Audits. The trails are the daemon's own
// ("policy", "proposals", "budget"), never a name from a request.
func (h Home) Audit(trail string) string { return filepath.Join(h.Audits(), trail+".jsonl") }

// Study is one study's folder:
//
//	registration.json   written last at registration: its presence makes the study exist
//	store.bolt          the study's store (receipts, lifecycle, audit)
//	lifecycle.json      a legacy lifecycle, imported into the store once
//	snapshot.json       the frozen snapshot
//	decision.json       the decision record
//	validation/         the validation runs
//	reports/EXEC/       the report of an execution
//	executions/EXEC/    an execution's records (see Execution)
type Study struct{ name, dir string }

// Name is the study's (checked) name.
func (s Study) Name() string { return s.name }

// Dir is the study's folder.
func (s Study) Dir() string { return s.dir }

// Registration is registration.json.
func (s Study) Registration() string { return filepath.Join(s.dir, "registration.json") }

// Store is the study's bbolt file.
func (s Study) Store() string { return Records(s.dir).Store() }

// LegacyLifecycle is where a home written before the store kept the
// lifecycle has it.
func (s Study) LegacyLifecycle() string { return filepath.Join(s.dir, "lifecycle.json") }

// Snapshot is the frozen snapshot.
func (s Study) Snapshot() string { return filepath.Join(s.dir, "snapshot.json") }

// Decision is the decision record.
func (s Study) Decision() string { return filepath.Join(s.dir, "decision.json") }

// Validation is the folder of the study's validation runs.
func (s Study) Validation() string { return filepath.Join(s.dir, "validation") }

// ValidationRecord is the validation runs' summary file.
func (s Study) ValidationRecord() string { return Records(s.Validation()).ValidationRecord() }

// Report is the folder of execution id's report; the id is checked first.
func (s Study) Report(id string) (Report, error) {
	if err := CheckExecutionID(id); err != nil {
		return "", err
	}
	return Report(filepath.Join(s.dir, "reports", id)), nil
}

// Report is one execution's report folder:
//
//	report.html, report.json, report.md   the report in its three forms
//	analysis.json                         the analysis the report shows
type Report string

// Dir is the folder.
func (r Report) Dir() string { return string(r) }

// HTML is the self-contained HTML report.
func (r Report) HTML() string { return filepath.Join(string(r), "report.html") }

// JSON is the report's data as JSON.
func (r Report) JSON() string { return filepath.Join(string(r), "report.json") }

// Markdown is the report as Markdown.
func (r Report) Markdown() string { return filepath.Join(string(r), "report.md") }

// Analysis is the analysis the report shows.
func (r Report) Analysis() string { return filepath.Join(string(r), "analysis.json") }

// Execution is execution id of the study; the id is checked first
// (CheckExecutionID).
func (s Study) Execution(id string) (Execution, error) {
	if err := CheckExecutionID(id); err != nil {
		return Execution{}, err
	}
	return Execution{id: id, dir: filepath.Join(s.dir, "executions", id)}, nil
}

// Execution is one execution's folder of records (see Records), and:
//
//	engine.json               present when the execution runs through the engine
//	replay.json               the sample replay's summaries
type Execution struct{ id, dir string }

// ID is the execution's (checked) id.
func (e Execution) ID() string { return e.id }

// Dir is the execution's folder.
func (e Execution) Dir() string { return e.dir }

// Records is the execution's folder as a folder of records.
func (e Execution) Records() Records { return Records(e.dir) }

// Plan is the trial plan.
func (e Execution) Plan() string { return e.Records().Plan() }

// Generations is the glob pattern of the execution's generation records.
func (e Execution) Generations() string { return e.Records().Generations() }

// EngineMarker, present, says the execution runs through the engine.
func (e Execution) EngineMarker() string { return filepath.Join(e.dir, "engine.json") }

// Replay is the sample replay's summaries.
func (e Execution) Replay() string { return filepath.Join(e.dir, "replay.json") }

// Records is a folder that holds a run's records, wherever the runner was
// given it: an execution's folder, a validation folder, or a worker's
// spool entry. Its own names are fixed here; the folder is the caller's
// (made by Study.Execution, Study.Validation or SpoolExecution.Entry).
//
//	plan.json                    the trial plan
//	generations-ARM.jsonl        an arm's generation record
//	generations-ARM.STACK.jsonl  the same arm's rows from another stack (merged from workers)
//	repos/CALL-HASH.json         a code trial's final repository, kept for regrading
//	blinding-JUDGE.json          a judge arm's blinding maps
//	fidelity.jsonl               the fidelity step's scored tokens (fidelity.StudyFile)
//	walls.json                   the execution's derived auto wall caps
//	work/                        the runtimes' scratch and the harness repositories while a trial runs
//	generations.jsonl            a spool entry's record: the one trial a worker ran
//	receipt.json                 a spool entry's receipt
type Records string

// Repos is the folder of the kept repositories.
func (r Records) Repos() string { return filepath.Join(string(r), "repos") }

// Repo is where the final repository of the code trial callID is kept.
// Call ids hold '/', '#' and '@', so the name is the id made safe plus a
// short hash that keeps distinct ids apart.
func (r Records) Repo(callID string) string {
	sum := sha256.Sum256([]byte(callID))
	safe := strings.NewReplacer("/", "_", "#", "_", "@", "_").Replace(callID)
	return filepath.Join(r.Repos(), safe+"-"+hex.EncodeToString(sum[:4])+".json")
}

// Blinding is where judge's blinding maps are kept (judge is a design's
// arm name, checked by the design's validation).
func (r Records) Blinding(judge string) string {
	return filepath.Join(string(r), "blinding-"+judge+".json")
}

// Fidelity is the execution's fidelity records: each arm's scored tokens
// against its job kind's reference (package fidelity's StudyFile, the name
// its readers use).
func (r Records) Fidelity() string { return filepath.Join(string(r), "fidelity.jsonl") }

// Walls is the execution's derived auto wall caps, fixed when it first
// starts (on the machine that owns the study) and given to every runner of
// it, local or on a worker.
func (r Records) Walls() string { return filepath.Join(string(r), "walls.json") }

// ValidationRecord is a validation folder's summary of its runs.
func (r Records) ValidationRecord() string { return filepath.Join(string(r), "validation.json") }

// Store is the study's store in a folder of records that holds one (a
// study's folder, or a test's stored execution).
func (r Records) Store() string { return filepath.Join(string(r), "store.bolt") }

// Work is the runtimes' scratch folder.
func (r Records) Work() string { return filepath.Join(string(r), "work") }

// TrialRecord is a spool entry's generation record: the rows of the one
// trial attempt a worker ran there.
func (r Records) TrialRecord() string { return filepath.Join(string(r), "generations.jsonl") }

// Reported is the coordinator's log of the digests the engine reported
// for an execution's spool entries: the only word on an entry it merges
// from the spool (kept in the home, never in the spool).
func (r Records) Reported() string { return filepath.Join(string(r), "reported.jsonl") }

// Receipt is a spool entry's receipt.
func (r Records) Receipt() string { return filepath.Join(string(r), "receipt.json") }

// Plan is the trial plan.
func (r Records) Plan() string { return filepath.Join(string(r), "plan.json") }

// Generation is arm's generation record. The arm is a design's arm name,
// checked by the design's validation (the name rule, and a card cell's
// "@PROFILE").
func (r Records) Generation(arm string) string {
	return filepath.Join(string(r), "generations-"+arm+".jsonl")
}

// GenerationOn is arm's generation record of rows made on another stack
// (stack is a short hash of the machine line and binary).
func (r Records) GenerationOn(arm, stack string) string {
	return filepath.Join(string(r), "generations-"+arm+"."+stack+".jsonl")
}

// ArmOfGeneration is the arm a generation record's file name says it is
// of (Generation's inverse; a record from another stack names its arm and
// stack); ok is false for a name Generation did not make.
func ArmOfGeneration(path string) (arm string, ok bool) {
	base := filepath.Base(path)
	if !strings.HasPrefix(base, "generations-") || !strings.HasSuffix(base, ".jsonl") {
		return "", false
	}
	arm = strings.TrimSuffix(strings.TrimPrefix(base, "generations-"), ".jsonl")
	return arm, arm != ""
}

// Generations is the glob pattern of every generation record.
func (r Records) Generations() string { return filepath.Join(string(r), "generations-*.jsonl") }

// Spool is the folder the coordinator and every worker share (a shared
// filesystem), per execution:
//
//	SPOOL/STUDY/EXECUTION/snapshot.json          the published snapshot
//	SPOOL/STUDY/EXECUTION/banks/JOBKIND.jsonl    its banks
//	SPOOL/STUDY/EXECUTION/trials/ENTRY/...       one entry per trial attempt a worker ran
//
// Study names and execution ids reach it in a workflow's input and entry
// names in a worker's result: each is checked before it is joined.
type Spool string

// Execution is the spool's folder of execution id of study; both checked.
func (sp Spool) Execution(study, id string) (SpoolExecution, error) {
	if err := CheckStudyName(study); err != nil {
		return SpoolExecution{}, err
	}
	if err := CheckExecutionID(id); err != nil {
		return SpoolExecution{}, err
	}
	return SpoolExecution{dir: filepath.Join(string(sp), study, id)}, nil
}

// SpoolExecution is one execution's folder in the spool.
type SpoolExecution struct{ dir string }

// Dir is the folder.
func (e SpoolExecution) Dir() string { return e.dir }

// Snapshot is the published snapshot the workers run from.
func (e SpoolExecution) Snapshot() string { return filepath.Join(e.dir, "snapshot.json") }

// Walls is the published derivation of the execution's auto wall caps:
// the coordinator fixes them once, on its validation runs, so that every
// worker holds a trial to the same wall a local run would.
func (e SpoolExecution) Walls() string { return filepath.Join(e.dir, "walls.json") }

// Banks is the folder of the published banks.
func (e SpoolExecution) Banks() string { return filepath.Join(e.dir, "banks") }

// Trials is the folder of the trial entries.
func (e SpoolExecution) Trials() string { return filepath.Join(e.dir, "trials") }

// Entry is the folder of the trial entry called name; the name is checked
// first (CheckSpoolEntry), since a worker's result carries it.
func (e SpoolExecution) Entry(name string) (string, error) {
	if err := CheckSpoolEntry(name); err != nil {
		return "", err
	}
	return filepath.Join(e.Trials(), name), nil
}

// NoLink refuses a path that is a symbolic link (ErrLink). A path that does
// not exist passes: the caller creates it. The check reads the link itself
// (Lstat), never what it points to.
func NoLink(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: %w (rig made this path itself; remove the link and restore the folder from a backup)", path, ErrLink)
	}
	return nil
}
