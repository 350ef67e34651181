package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketGrades holds grades given after a trial's receipt was written: a
// model judge's grades and re-grades with a newer grader version. A receipt
// is written once, so these live beside it, one sub-bucket per execution,
// keyed by trial, grader and version. The bucket is made on first use, so
// stores written before it existed open unchanged.
var bucketGrades = []byte("grades")

// GradeRecord is one grade of one trial's output by one grader version,
// kept beside the trial's receipt. Old grades are never overwritten: a new
// grader version is a new record.
type GradeRecord struct {
	ExecutionID string `json:"execution_id"`
	Arm         string `json:"arm"`
	JobKind     string `json:"job_kind"`
	TaskID      string `json:"task_id"`
	Repeat      int    `json:"repeat"`
	// Attempt is the receipt's attempt whose output was graded.
	Attempt       int     `json:"attempt"`
	Grader        string  `json:"grader"`
	GraderVersion string  `json:"grader_version"`
	Score         float64 `json:"score"`
	Pass          bool    `json:"pass"`
	// Label is the random label a blind judge saw the output under.
	Label string `json:"label,omitempty"`
	// Call is the generation-record row of the judge's call.
	Call     string    `json:"call,omitempty"`
	Detail   string    `json:"detail,omitempty"`
	GradedAt time.Time `json:"graded_at"`
}

// Trial returns the graded trial's key.
func (g GradeRecord) Trial() TrialKey {
	return TrialKey{Arm: g.Arm, TaskID: g.TaskID, Repeat: g.Repeat}
}

// Validate checks the grade on its own, naming the first field at fault.
func (g GradeRecord) Validate() error {
	bad := func(field, msg, fix string) error {
		return &FieldError{Record: "grade " + g.Trial().String() + " by " + g.Grader, Field: field, Msg: msg, Fix: fix}
	}
	switch {
	case !validID(g.ExecutionID):
		return bad("execution_id", "is empty or holds '|' or control characters", "name the execution whose receipt is graded")
	case !validID(g.Arm):
		return bad("arm", "is empty or holds '|' or control characters", "use the receipt's arm")
	case !validID(g.TaskID):
		return bad("task_id", "is empty or holds '|' or control characters", "use the receipt's task id")
	case g.Repeat < 0:
		return bad("repeat", "is negative", "use the receipt's repeat")
	case g.Attempt < 1:
		return bad("attempt", fmt.Sprintf("%d is below 1", g.Attempt), "name the receipt's attempt whose output was graded")
	case !validID(g.Grader):
		return bad("grader", "is empty or holds '|' or control characters", "name the grader, e.g. \"json\" or \"judge:ARM\"")
	case !validID(g.GraderVersion):
		return bad("grader_version", "is empty or holds '|' or control characters", "record the grader's version")
	case !(g.Score >= 0 && g.Score <= 1):
		return bad("score", fmt.Sprintf("%v is outside [0,1]", g.Score), "graders return scores in [0,1]")
	case g.GradedAt.IsZero():
		return bad("graded_at", "is zero", "record when the grade was given")
	}
	return nil
}

func gradeKey(k TrialKey, grader, version string) []byte {
	return []byte(fmt.Sprintf("%s|%s|%08d|%s|%s", k.Arm, k.TaskID, k.Repeat, grader, version))
}

// PutGrades stores grades in one transaction: all of them or none. Each is
// checked against the receipt it grades, which must be a counted receipt of
// the same execution. A grade already stored with the same content is a
// no-op; different content under the same trial, grader and version is a
// *ConflictError, because a grade is written once and grading again is a
// new grader version.
func (s *Store) PutGrades(ctx context.Context, gs []GradeRecord) error {
	raws := make([][]byte, len(gs))
	for i, g := range gs {
		if err := g.Validate(); err != nil {
			return err
		}
		g.GradedAt = g.GradedAt.UTC()
		raw, err := json.Marshal(g)
		if err != nil {
			return err
		}
		raws[i] = raw
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		root, err := tx.CreateBucketIfNotExists(bucketGrades)
		if err != nil {
			return err
		}
		for i, g := range gs {
			rb := tx.Bucket(bucketReceipts).Bucket([]byte(g.ExecutionID))
			var r Receipt
			found := false
			if rb != nil {
				if found, err = getJSON(rb, receiptKey(g.Trial(), g.Attempt), &r); err != nil {
					return fmt.Errorf("%s: receipt %s/%s#%d: %w", s.path, g.ExecutionID, g.Trial(), g.Attempt, err)
				}
			}
			if !found {
				return &FieldError{Record: "grade " + g.Trial().String(), Field: "attempt",
					Msg: fmt.Sprintf("execution %s has no receipt %s#%d", g.ExecutionID, g.Trial(), g.Attempt), Fix: "grade a stored receipt"}
			}
			if !r.Outcome.Counted() {
				return &FieldError{Record: "grade " + g.Trial().String(), Field: "attempt",
					Msg: fmt.Sprintf("receipt #%d is %s, not counted", g.Attempt, r.Outcome), Fix: "only counted trials are graded"}
			}
			if g.JobKind != r.JobKind {
				return &FieldError{Record: "grade " + g.Trial().String(), Field: "job_kind",
					Msg: fmt.Sprintf("%q is not the receipt's %q", g.JobKind, r.JobKind), Fix: "use the receipt's job kind"}
			}
			eb, err := root.CreateBucketIfNotExists([]byte(g.ExecutionID))
			if err != nil {
				return err
			}
			key := gradeKey(g.Trial(), g.Grader, g.GraderVersion)
			if old := eb.Get(key); old != nil {
				if string(old) == string(raws[i]) {
					continue
				}
				return &ConflictError{What: "grade", Key: g.ExecutionID + "/" + string(key),
					Fix: "a grade is written once; grading again is a new grader version"}
			}
			if err := eb.Put(key, raws[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// Grades returns the grades kept beside an execution's receipts (all
// executions when executionID is empty), in key order: arm, task, repeat,
// grader, version.
func (s *Store) Grades(ctx context.Context, executionID string) ([]GradeRecord, error) {
	var out []GradeRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketGrades)
		if root == nil {
			return nil
		}
		visit := func(exec []byte) error {
			eb := root.Bucket(exec)
			if eb == nil {
				return nil
			}
			return eb.ForEach(func(k, v []byte) error {
				var g GradeRecord
				if err := strictUnmarshal(v, &g); err != nil {
					return fmt.Errorf("%s: grade %s/%s: %w", s.path, exec, k, err)
				}
				out = append(out, g)
				return nil
			})
		}
		if executionID != "" {
			return visit([]byte(executionID))
		}
		return root.ForEach(func(name, v []byte) error {
			if v != nil {
				return fmt.Errorf("%s: grades bucket holds a stray key %q", s.path, name)
			}
			return visit(name)
		})
	})
	return out, err
}

// GradesBy returns an execution's grades by one grader (any version when
// version is empty), keyed by trial.
func (s *Store) GradesBy(ctx context.Context, executionID, grader, version string) (map[TrialKey][]GradeRecord, error) {
	all, err := s.Grades(ctx, executionID)
	if err != nil {
		return nil, err
	}
	out := map[TrialKey][]GradeRecord{}
	for _, g := range all {
		if g.Grader == grader && (version == "" || g.GraderVersion == version) {
			out[g.Trial()] = append(out[g.Trial()], g)
		}
	}
	return out, nil
}
