package studies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"rig/internal/provision"
	"rig/receipts"
	"rig/tasks"
)

// Service is what the daemon serves: every study registered on this machine,
// each in its own directory with its own store, and at most one execution
// running at a time (the card is one). All methods are safe to call
// concurrently; the daemon keeps each study's store open.
type Service struct {
	Home string // studies live under Home/studies/NAME
	Log  *slog.Logger
	// Gates are the checks before a counted run; nil gates refuse (fail closed).
	Gates Gates
	// NoSandbox runs runtimes without namespaces; every receipt records it.
	NoSandbox bool

	mu      sync.Mutex
	stores  map[string]*receipts.Store
	running map[string]*execState // by study name
}

// NewService prepares the directory layout under home.
func NewService(home string, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(home, "studies"), 0o700); err != nil {
		return nil, err
	}
	return &Service{Home: home, Log: log, stores: map[string]*receipts.Store{}, running: map[string]*execState{}}, nil
}

// DefaultHome is $RIG_HOME, else ~/.local/share/rig.
func DefaultHome() string {
	if h := os.Getenv("RIG_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "rig-home")
	}
	return filepath.Join(home, ".local", "share", "rig")
}

// Dir is the study's directory.
func (s *Service) Dir(name string) string { return filepath.Join(s.Home, "studies", name) }

func (s *Service) exists(name string) bool {
	_, err := os.Stat(filepath.Join(s.Dir(name), "registration.json"))
	return err == nil
}

// ErrNoStudy means no study of that name is registered here.
var ErrNoStudy = errors.New("no such study")

func (s *Service) store(name string) (*receipts.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.stores[name]; ok {
		return st, nil
	}
	if !s.exists(name) {
		return nil, fmt.Errorf("study %q: %w (rig study list shows the registered ones)", name, ErrNoStudy)
	}
	st, err := receipts.Open(filepath.Join(s.Dir(name), "store.bolt"), name)
	if err != nil {
		return nil, err
	}
	s.stores[name] = st
	return st, nil
}

// Close closes every open store.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	for n, st := range s.stores {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(s.stores, n)
	}
	return first
}

func (s *Service) assets() (localAssets, error) {
	in, err := provision.Load()
	if err != nil {
		return localAssets{}, err
	}
	return localAssets{installed: in, graders: tasks.DefaultRegistry(sandboxRunner{noSandbox: s.NoSandbox}), auditDir: BankAuditDir}, nil
}

func lookup() func(string) (string, bool) {
	l, err := EnvFileLookup(filepath.Join(provision.CacheDir(), "installed.env"))
	if err != nil {
		return os.LookupEnv
	}
	return func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		return l(k)
	}
}

// writeJSONAtomic writes v to path through a temporary file and a rename, so
// a crash leaves the old file or the new one, never half of one.
func writeJSONAtomic(path string, v any, mode os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// RegisterRequest is `rig study register`.
type RegisterRequest struct {
	DesignFile string `json:"design_file"`
	Key        string `json:"key"`
	Actor      string `json:"actor"`
	// Registry is --registry, an absolute path; ConfiguredRegistry is
	// $RIG_LICENCE_REGISTRY as the CLI saw it. See ChooseLicenceRegistry.
	Registry           string `json:"registry,omitempty"`
	ConfiguredRegistry string `json:"configured_registry,omitempty"`
}

// StudyInfo is what status prints.
type StudyInfo struct {
	Name         string       `json:"name"`
	State        State        `json:"state"`
	DesignHash   string       `json:"design_hash"`
	SnapshotHash string       `json:"snapshot_hash,omitempty"`
	Dir          string       `json:"dir"`
	Licences     []string     `json:"licences,omitempty"`
	Executions   []ExecInfo   `json:"executions,omitempty"`
	Audit        []AuditEntry `json:"audit,omitempty"`
	Replayed     bool         `json:"replayed,omitempty"` // an idempotent repeat of an earlier request
	// Preflight and Validation are the gates before a run, filled by Status
	// once the study is frozen (see WriteGates).
	Preflight  []FitInfo          `json:"preflight,omitempty"`
	Validation []ValidationRecord `json:"validation,omitempty"`
}

// Register checks licences, fingerprints every pinned asset and records the
// study in its own new store. Nothing is written when any check fails.
func (s *Service) Register(ctx context.Context, req RegisterRequest) (StudyInfo, error) {
	a, err := s.assets()
	if err != nil {
		return StudyInfo{}, err
	}
	lk := lookup()
	base := filepath.Dir(req.DesignFile)
	d, err := LoadDesign(ctx, req.DesignFile, ValidateOptions{File: req.DesignFile, Lookup: lk, BaseDir: base, Quant: GGUFQuant})
	if err != nil {
		return StudyInfo{}, err
	}
	if req.Key == "" {
		// Without a key, the design's own content is the key: registering the
		// same file twice returns the study; another design under the same name
		// is refused as a name already taken.
		h, err := DesignHash(d)
		if err != nil {
			return StudyInfo{}, err
		}
		req.Key = "register-" + h[:16]
	}
	var prev *RequestRecord
	if req.Key != "" {
		var rec RequestRecord
		if err := readJSON(filepath.Join(s.Dir(d.Name), "registration.json"), &struct {
			Request *RequestRecord `json:"request"`
		}{&rec}); err == nil && rec.Key == req.Key {
			prev = &rec
		}
	}
	choice, err := ChooseLicenceRegistry(req.Registry, d, req.DesignFile, req.ConfiguredRegistry, lk)
	if err != nil {
		return StudyInfo{}, err
	}
	lic, err := OpenLicences(choice)
	if err != nil {
		return StudyInfo{}, err
	}
	actor := orDefault(req.Actor, currentUser())
	out, replayed, err := Register(ctx, RegisterInput{
		Design: d, File: req.DesignFile, Key: req.Key, Actor: actor, At: time.Now().UTC(), Prev: prev,
		Resolve: ResolveOptions{Lookup: lk, BaseDir: base},
	}, RegisterDeps{Licences: lic, Assets: a, Exists: s.exists})
	if err != nil {
		return StudyInfo{}, err
	}
	if replayed {
		info, err := s.Status(ctx, d.Name)
		info.Replayed = true
		return info, err
	}
	dir := s.Dir(d.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return StudyInfo{}, err
	}
	st, err := receipts.Open(filepath.Join(dir, "store.bolt"), d.Name)
	if err != nil {
		os.RemoveAll(dir)
		return StudyInfo{}, err
	}
	s.mu.Lock()
	s.stores[d.Name] = st
	s.mu.Unlock()
	if err := st.Transition(ctx, receipts.Transition{From: "", To: string(Draft), Who: actor, Why: "registered from " + req.DesignFile, At: time.Now().UTC()}); err != nil {
		return StudyInfo{}, err
	}
	if err := writeJSONAtomic(filepath.Join(dir, "lifecycle.json"), out.Lifecycle, 0o600); err != nil {
		return StudyInfo{}, err
	}
	// registration.json last: its presence is what makes the study exist.
	if err := writeJSONAtomic(filepath.Join(dir, "registration.json"), out, 0o400); err != nil {
		return StudyInfo{}, err
	}
	s.Log.Info("study registered", "study", d.Name, "design_hash", out.DesignHash, "actor", actor)
	return s.Status(ctx, d.Name)
}

func (s *Service) registration(name string) (*Registration, *Design, error) {
	var r Registration
	if err := readJSON(filepath.Join(s.Dir(name), "registration.json"), &r); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("study %q: %w", name, ErrNoStudy)
		}
		return nil, nil, err
	}
	d, err := ParseDesign(name+"/registration.json", r.Design)
	if err != nil {
		return nil, nil, err
	}
	return &r, d, nil
}

func (s *Service) lifecycle(name string) (*Lifecycle, error) {
	var l Lifecycle
	if err := readJSON(filepath.Join(s.Dir(name), "lifecycle.json"), &l); err != nil {
		return nil, fmt.Errorf("study %q: reading its lifecycle: %w", name, err)
	}
	return &l, nil
}

// apply moves the study's lifecycle and mirrors the change in the store's audit.
func (s *Service) apply(ctx context.Context, name string, ev Event) (*Lifecycle, error) {
	l, err := s.lifecycle(name)
	if err != nil {
		return nil, err
	}
	from := l.State
	entry, err := l.Apply(ev)
	if err != nil {
		return nil, err
	}
	st, err := s.store(name)
	if err != nil {
		return nil, err
	}
	t := receipts.Transition{From: string(from), To: string(l.State), Who: ev.Actor, Why: orDefault(entry.Why, ev.Kind), At: ev.At}
	if ev.Kind == EventFreeze {
		err = st.Freeze(ctx, l.DesignHash, t)
	} else if from != l.State {
		err = st.Transition(ctx, t)
	}
	if err != nil {
		return nil, err
	}
	if err := writeJSONAtomic(filepath.Join(s.Dir(name), "lifecycle.json"), l, 0o600); err != nil {
		return nil, err
	}
	return l, nil
}

// Review records an outside review's verdict; a pass without a licence line does not count.
func (s *Service) Review(ctx context.Context, name string, r Review, why string) (StudyInfo, error) {
	l, err := s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	r.DesignHash = orDefault(r.DesignHash, l.DesignHash)
	if _, err := s.apply(ctx, name, Event{Kind: EventReview, Actor: r.Reviewer, At: time.Now().UTC(), Why: why, Review: &r}); err != nil {
		return StudyInfo{}, err
	}
	return s.Status(ctx, name)
}

// Approve records the Director's approval.
func (s *Service) Approve(ctx context.Context, name, director, why string) (StudyInfo, error) {
	if _, err := s.apply(ctx, name, Event{Kind: EventApprove, Actor: director, At: time.Now().UTC(), Why: why}); err != nil {
		return StudyInfo{}, err
	}
	return s.Status(ctx, name)
}

// Freeze resolves every pin to a digest, validates every task, refuses an
// asset changed since registration, and writes the content-addressed snapshot.
func (s *Service) Freeze(ctx context.Context, name, actor string) (StudyInfo, error) {
	reg, d, err := s.registration(name)
	if err != nil {
		return StudyInfo{}, err
	}
	a, err := s.assets()
	if err != nil {
		return StudyInfo{}, err
	}
	snap, err := Freeze(ctx, FreezeInput{Design: d, Registered: reg.Assets,
		Validate: ValidateOptions{File: name, Lookup: lookup(), Quant: GGUFQuant, BaseDir: reg.DesignDir}}, a)
	if err != nil {
		return StudyInfo{}, err
	}
	if err := s.checkLeakage(ctx, snap); err != nil {
		return StudyInfo{}, err
	}
	path := filepath.Join(s.Dir(name), "snapshot.json")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := writeJSONAtomic(path, snap, 0o400); err != nil {
			return StudyInfo{}, err
		}
	}
	if _, err := s.apply(ctx, name, Event{Kind: EventFreeze, Actor: orDefault(actor, currentUser()), At: time.Now().UTC(), SnapshotHash: snap.Hash, Why: "frozen"}); err != nil {
		return StudyInfo{}, err
	}
	return s.Status(ctx, name)
}

// checkLeakage refuses a freeze when any task, key or near-duplicate appears in
// what a candidate is given. rig's arms get only the task prompt, so the places
// to check are the design's own texts (system prompts would be added here).
func (s *Service) checkLeakage(ctx context.Context, snap *Snapshot) error {
	d, err := ParseDesign("snapshot.json", snap.Design)
	if err != nil {
		return err
	}
	var banks []*tasks.Bank
	for _, fb := range snap.Banks {
		b, err := tasks.LoadBank(fb.Path)
		if err != nil {
			return err
		}
		banks = append(banks, b)
	}
	places := []tasks.Place{{Kind: tasks.PlacePrompt, Name: "design sentences", Text: d.Sentences.JobKindsAndDecisions + "\n" + d.Sentences.CandidatesAndHowRun + "\n" + d.Sentences.WhyTheMeasure}}
	rep, err := tasks.CheckLeakage(ctx, banks, places)
	if err != nil {
		return err
	}
	return rep.Err()
}

// Snapshot reads a frozen study's snapshot and checks it against its hash.
func (s *Service) Snapshot(name string) (*Snapshot, error) {
	var snap Snapshot
	if err := readJSON(filepath.Join(s.Dir(name), "snapshot.json"), &snap); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("study %q is not frozen (run: rig study freeze %s)", name, name)
		}
		return nil, err
	}
	if err := snap.Verify(); err != nil {
		return nil, err
	}
	return &snap, nil
}

// Status reports a study's state, executions and audit.
func (s *Service) Status(ctx context.Context, name string) (StudyInfo, error) {
	l, err := s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	r, d, err := s.registration(name)
	if err != nil {
		return StudyInfo{}, err
	}
	info := StudyInfo{Name: name, State: l.State, DesignHash: l.DesignHash, SnapshotHash: l.SnapshotHash, Dir: s.Dir(name), Audit: l.Audit}
	info.Licences, _ = LicenceLinesFor(d.Items, r.Licences)
	execs, err := s.executions(ctx, name)
	if err != nil {
		return info, err
	}
	info.Executions = execs
	info.Preflight, info.Validation = s.gateInfo(ctx, name)
	return info, nil
}

// List names every registered study.
func (s *Service) List() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(s.Home, "studies"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && s.exists(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return fmt.Sprintf("uid-%d", os.Getuid())
}

// CheckStore runs the store's integrity check: every receipt decodes, keys are
// unique, and no trial is scored twice in an execution.
func (s *Service) CheckStore(ctx context.Context, name string) (receipts.Summary, error) {
	st, err := s.store(name)
	if err != nil {
		return receipts.Summary{}, err
	}
	return st.Check(ctx)
}

// Export writes every receipt of the study in the shared schema (jsonl or csv).
func (s *Service) Export(ctx context.Context, name, format string, w io.Writer) error {
	st, err := s.store(name)
	if err != nil {
		return err
	}
	f, err := receipts.ParseFormat(format)
	if err != nil {
		return err
	}
	return st.Export(ctx, w, f)
}
