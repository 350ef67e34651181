package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names. They are part of the file format; renaming one orphans data.
var (
	bucketMeta        = []byte("meta")
	bucketReceipts    = []byte("receipts")    // sub-bucket per execution id
	bucketCounted     = []byte("counted")     // sub-bucket per execution: trial → receipt key
	bucketExecutions  = []byte("executions")  // execution id → Execution
	bucketPreflight   = []byte("preflight")   // arm|profile → opaque verdict
	bucketGovernor    = []byte("governor")    // seq → GovernorEvent
	bucketAudit       = []byte("audit")       // seq → Transition
	bucketIdempotency = []byte("idempotency") // key → idempotencyRecord
	bucketStops       = []byte("stops")       // execution id → the stopping rule's last look (opaque)
	bucketDivergent   = []byte("divergent")   // execution|trial#attempt|digest → Receipt (never counted)

	allBuckets = [][]byte{bucketMeta, bucketReceipts, bucketCounted, bucketExecutions,
		bucketPreflight, bucketGovernor, bucketAudit, bucketIdempotency, bucketDivergent, bucketStops}
)

var (
	metaStudyID    = []byte("study_id")
	metaSchema     = []byte("schema_version")
	metaFrozen     = []byte("frozen")
	metaDesignHash = []byte("design_hash")
	metaState      = []byte("state")
	metaCreatedAt  = []byte("created_at")
)

// lockTimeout bounds how long Open waits for another process's lock, so a
// second daemon fails with a message instead of hanging.
const lockTimeout = 2 * time.Second

// Store is one study's bbolt file. It is safe for concurrent use by the
// goroutines of one process; bbolt's file lock keeps other processes out.
type Store struct {
	db     *bolt.DB
	path   string
	owner  string // the study the file belongs to
	opener string // the study that opened it
}

// Meta is the store's header: whose it is and whether its design is frozen.
type Meta struct {
	StudyID       string
	SchemaVersion int
	Frozen        bool
	DesignHash    string
	State         string
	CreatedAt     time.Time
}

// Open opens (creating if needed) the store at path on behalf of studyID. A new
// file becomes studyID's store. An existing file of another study opens for
// reading only: every write returns a *ForeignStudyError.
func Open(path, studyID string) (*Store, error) {
	if !validID(studyID) {
		return nil, &FieldError{Record: "store " + path, Field: "study id", Msg: fmt.Sprintf("%q is not a valid id", studyID), Fix: "use a non-empty id without '|' or control characters"}
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%s: %w (is a rig daemon already running this study?)", path, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, path: path, opener: studyID}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		m := tx.Bucket(bucketMeta)
		owner := m.Get(metaStudyID)
		if owner == nil {
			s.owner = studyID
			if err := m.Put(metaStudyID, []byte(studyID)); err != nil {
				return err
			}
			if err := m.Put(metaSchema, []byte(strconv.Itoa(SchemaVersion))); err != nil {
				return err
			}
			return m.Put(metaCreatedAt, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		}
		s.owner = string(owner)
		v, err := strconv.Atoi(string(m.Get(metaSchema)))
		if err != nil || v < 1 || v > SchemaVersion {
			return fmt.Errorf("%s: schema version %q: %w (this rig reads up to version %d; upgrade rig)", path, m.Get(metaSchema), ErrSchema, SchemaVersion)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the file.
func (s *Store) Close() error { return s.db.Close() }

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

// StudyID returns the study the store belongs to (not necessarily the opener).
func (s *Store) StudyID() string { return s.owner }

// Meta reads the store's header.
func (s *Store) Meta(ctx context.Context) (Meta, error) {
	if err := ctx.Err(); err != nil {
		return Meta{}, err
	}
	var m Meta
	err := s.db.View(func(tx *bolt.Tx) error {
		m = readMeta(tx)
		return nil
	})
	return m, err
}

func readMeta(tx *bolt.Tx) Meta {
	b := tx.Bucket(bucketMeta)
	m := Meta{
		StudyID:    string(b.Get(metaStudyID)),
		Frozen:     bytes.Equal(b.Get(metaFrozen), []byte("1")),
		DesignHash: string(b.Get(metaDesignHash)),
		State:      string(b.Get(metaState)),
	}
	m.SchemaVersion, _ = strconv.Atoi(string(b.Get(metaSchema)))
	m.CreatedAt, _ = time.Parse(time.RFC3339Nano, string(b.Get(metaCreatedAt)))
	return m
}

// update runs fn in a write transaction after refusing cancelled contexts and
// writers from another study.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		if s.opener != s.owner {
			return &ForeignStudyError{Path: s.path, Owner: s.owner, Writer: s.opener, Frozen: readMeta(tx).Frozen}
		}
		return fn(tx)
	})
}

func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.db.View(fn)
}

// Freeze marks the design frozen under designHash and records the transition
// that froze it, in one transaction. Freezing again with the same hash is a
// no-op; with another hash it is a conflict, because a frozen design never
// changes.
func (s *Store) Freeze(ctx context.Context, designHash string, t Transition) error {
	if designHash == "" {
		return &FieldError{Record: "freeze", Field: "design_hash", Msg: "is empty", Fix: "freeze with the canonical design's sha256"}
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		cur := readMeta(tx)
		if cur.Frozen {
			if cur.DesignHash == designHash {
				return nil
			}
			return &ConflictError{What: "frozen design of study", Key: s.owner, Existing: cur.DesignHash,
				Fix: "a frozen design never changes; register a new study for a new design"}
		}
		if err := transition(tx, s.owner, cur.State, t); err != nil {
			return err
		}
		if err := m.Put(metaFrozen, []byte("1")); err != nil {
			return err
		}
		return m.Put(metaDesignHash, []byte(designHash))
	})
}

func getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	return true, strictUnmarshal(raw, v)
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the record")
	}
	return nil
}
