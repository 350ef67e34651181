package studies

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Operations that take an idempotency key.
const (
	OpCreate = "create"
	OpRun    = "run"
	OpDecide = "decide"
)

// ErrIdempotencyConflict is a key reused with a different request.
var ErrIdempotencyConflict = errors.New("idempotency key reused with another request")

// ErrNameTaken is a register of a study name that already exists.
var ErrNameTaken = errors.New("study name taken")

// Request is a create, run or decide request with its idempotency key.
// Body is anything that marshals to JSON; its canonical hash identifies it.
type Request struct {
	Op   string
	Key  string
	Body any
}

// RequestRecord is what the store keeps under a key: the request's hash and
// the id of the record it produced.
type RequestRecord struct {
	Op       string `json:"op"`
	Key      string `json:"key"`
	BodyHash string `json:"body_hash"`
	Result   string `json:"result"`
}

// ConflictError is an idempotency key reused with another request.
type ConflictError struct {
	Key               string
	PrevOp, Op        string
	PrevHash, NowHash string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("idempotency key %q was used for another %s request (body %s, this %s request %s): choose a new key, or repeat the original request exactly",
		e.Key, e.PrevOp, Short(e.PrevHash), e.Op, Short(e.NowHash))
}

// Is makes errors.Is(err, ErrIdempotencyConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrIdempotencyConflict }

// BodyHash is the canonical hash of the operation and body together, so a
// key reused for another operation is a conflict too.
func (r Request) BodyHash() (string, error) {
	return Hash(struct {
		Op   string `json:"op"`
		Body any    `json:"body"`
	}{r.Op, r.Body})
}

func (r Request) check() error {
	if !slices.Contains([]string{OpCreate, OpRun, OpDecide}, r.Op) {
		return fmt.Errorf("request op %q: want create, run or decide", r.Op)
	}
	if r.Key == "" {
		return fmt.Errorf("%s needs an idempotency key (pass --key, e.g. the study name and attempt)", r.Op)
	}
	return nil
}

// Record makes the record the store keeps once r produced result.
func (r Request) Record(result string) (RequestRecord, error) {
	if err := r.check(); err != nil {
		return RequestRecord{}, err
	}
	h, err := r.BodyHash()
	if err != nil {
		return RequestRecord{}, err
	}
	return RequestRecord{Op: r.Op, Key: r.Key, BodyHash: h, Result: result}, nil
}

// Replay decides what to do with r given the record stored under its key
// (nil when none). It returns the existing result and true when r repeats
// the stored request, ("", false, nil) when the key is new, and a
// *ConflictError when the key was used for a different request.
func Replay(prev *RequestRecord, r Request) (result string, replayed bool, err error) {
	if err := r.check(); err != nil {
		return "", false, err
	}
	if prev == nil {
		return "", false, nil
	}
	h, err := r.BodyHash()
	if err != nil {
		return "", false, err
	}
	if prev.Op != r.Op || prev.BodyHash != h {
		return "", false, &ConflictError{Key: r.Key, PrevOp: prev.Op, Op: r.Op, PrevHash: prev.BodyHash, NowHash: h}
	}
	return prev.Result, true, nil
}

// CheckNewName refuses to register a name that exists already. Repeating
// the same register with the same idempotency key is Replay's business and
// never reaches here.
func CheckNewName(file, name string, exists func(name string) bool) error {
	if exists(name) {
		return nameTaken(file, name, "")
	}
	return nil
}

// nameTaken is the refusal of a register under a used name, with the two
// ways on. changed, when known, says what differs from the registered
// study (the same design with other inputs).
func nameTaken(file, name, changed string) error {
	what := "with a different design"
	if changed != "" {
		what = "with this same design but other inputs (" + changed + " changed since)"
	}
	return fmt.Errorf("%s: name: %w: study %q is registered already, %s, and a registered study's design and inputs never change. "+
		"To go again: withdraw the old study if it will not run (rig study withdraw %s --why \"…\"), "+
		"and register this design under a new name (edit the design's name, or rig study register %s --name NEW-NAME); "+
		"to run the same frozen study again, use rig study rerun",
		file, ErrNameTaken, name, what, name, filepath.Base(file))
}

// changedAssets names the assets whose hashes differ between two sets, in
// order: "bank:arith, registry:…". Empty when either set is unknown.
func changedAssets(was, now AssetSet) string {
	if len(was) == 0 || len(now) == 0 {
		return ""
	}
	var out []string
	for k, v := range now {
		if was[k] != v {
			out = append(out, k)
		}
	}
	for k := range was {
		if _, ok := now[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// CreateBody is the body of a create (register) request.
type CreateBody struct {
	DesignHash string   `json:"design_hash"`
	Assets     AssetSet `json:"assets"`
}

// RunBody is the body of a run or rerun request.
type RunBody struct {
	Study        string `json:"study"`
	SnapshotHash string `json:"snapshot_hash"`
	Parent       string `json:"parent,omitempty"`
}

// DecideBody is the body of a decide request.
type DecideBody struct {
	Study      string `json:"study"`
	Execution  string `json:"execution"`
	ReportHash string `json:"report_hash"`
	Outcome    string `json:"outcome"`
	Rationale  string `json:"rationale"`
}
