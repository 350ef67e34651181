package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"rig/scaleout"
	"rig/ui"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"rig/internal/atomicfile"
	"rig/internal/provision"
	"rig/receipts"
	"rig/studies"
	"rig/studies/run"
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
	Gates run.Gates
	// NoSandbox runs runtimes without namespaces; every receipt records it.
	NoSandbox bool
	// Engine, when set, spreads executions run with --engine temporal over
	// rig workers (package scaleout); nil means every run is local.
	Engine *scaleout.Coordinator

	mu         sync.Mutex
	stores     map[string]*receipts.Store
	running    map[string]execHandle // by study name
	ui         *ui.Server            // the workspace, once rig ui started it
	cancelling map[string]string     // study → who asked to cancel its execution
	activity   activities            // what a long request of each study does now

	policy atomic.Pointer[Policy]
	// propMu orders proposal writes; budgetMu the monthly budget's.
	propMu, budgetMu sync.Mutex
}

// NewService prepares the directory layout under home.
func NewService(home string, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(filepath.Join(home, "studies"), 0o700); err != nil {
		return nil, err
	}
	s := &Service{Home: home, Log: log, stores: map[string]*receipts.Store{}, running: map[string]execHandle{}, cancelling: map[string]string{}}
	s.policy.Store(SingleUser(os.Geteuid()))
	return s, nil
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
	if err := s.importLifecycle(st, name); err != nil {
		st.Close()
		return nil, err
	}
	s.stores[name] = st
	return st, nil
}

// legacyLifecycle is where a home written before the store kept the
// lifecycle has it; importLifecycle moves it into the store once and renames
// the file to legacyLifecycle+".imported", which nothing reads.
const legacyLifecycle = "lifecycle.json"

// importLifecycle copies a study's lifecycle.json into its store when the
// store holds no lifecycle yet: the store is the one place it lives from then on.
func (s *Service) importLifecycle(st *receipts.Store, name string) error {
	ctx := context.Background()
	if _, found, err := st.Lifecycle(ctx); err != nil || found {
		return err
	}
	path := filepath.Join(s.Dir(name), legacyLifecycle)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("study %q: importing %s into its store: %w", name, path, err)
	}
	var l studies.Lifecycle
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("study %q: importing %s into its store: %w (restore the file from a backup)", name, path, err)
	}
	doc, err := json.Marshal(&l)
	if err != nil {
		return err
	}
	if err := st.PutLifecycle(ctx, receipts.LifecycleChange{Doc: doc}); err != nil {
		return fmt.Errorf("study %q: importing %s into its store: %w", name, path, err)
	}
	if err := os.Rename(path, path+".imported"); err != nil {
		s.Log.Warn("lifecycle imported into the store; the old file stays", "study", name, "file", path, "err", err)
	}
	s.Log.Info("lifecycle imported into the store", "study", name, "from", path)
	return nil
}

// Close closes every open store.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first error
	if s.ui != nil {
		first = s.ui.Close()
		s.ui = nil
	}
	for n, st := range s.stores {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
		delete(s.stores, n)
	}
	return first
}

func (s *Service) assets() (studies.Assets, error) {
	env, err := s.runEnv()
	if err != nil {
		return nil, err
	}
	return env.Assets(), nil
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
	Name         string               `json:"name"`
	State        studies.State        `json:"state"`
	DesignHash   string               `json:"design_hash"`
	SnapshotHash string               `json:"snapshot_hash,omitempty"`
	Dir          string               `json:"dir"`
	Licences     []string             `json:"licences,omitempty"`
	Executions   []run.ExecInfo       `json:"executions,omitempty"`
	Audit        []studies.AuditEntry `json:"audit,omitempty"`
	Replayed     bool                 `json:"replayed,omitempty"` // an idempotent repeat of an earlier request
	// Preflight and Validation are the gates before a run, filled by Status
	// once the study is frozen (see WriteGates).
	Preflight  []FitInfo              `json:"preflight,omitempty"`
	Validation []run.ValidationRecord `json:"validation,omitempty"`
	// Activity is what a request on the study still running is doing now
	// (a validation run, a replayed record); empty when none is.
	Activity string `json:"activity,omitempty"`
}

// Register checks licences, fingerprints every pinned asset and records the
// study in its own new store. Nothing is written when any check fails.
func (s *Service) Register(ctx context.Context, req RegisterRequest) (StudyInfo, error) {
	a, err := s.assets()
	if err != nil {
		return StudyInfo{}, err
	}
	lk, err := provision.Lookup()
	if err != nil {
		return StudyInfo{}, err
	}
	base := filepath.Dir(req.DesignFile)
	d, err := studies.LoadDesign(ctx, req.DesignFile, studies.ValidateOptions{File: req.DesignFile, Lookup: lk, BaseDir: base, Quant: studies.GGUFQuant})
	if err != nil {
		return StudyInfo{}, err
	}
	if req.Key == "" {
		// Without a key, the design's own content is the key: registering the
		// same file twice returns the study; another design under the same name
		// is refused as a name already taken.
		h, err := studies.DesignHash(d)
		if err != nil {
			return StudyInfo{}, err
		}
		req.Key = "register-" + h[:16]
	}
	var prev *studies.RequestRecord
	if req.Key != "" {
		var rec studies.RequestRecord
		if err := atomicfile.ReadJSON(filepath.Join(s.Dir(d.Name), "registration.json"), &struct {
			Request *studies.RequestRecord `json:"request"`
		}{&rec}); err == nil && rec.Key == req.Key {
			prev = &rec
		}
	}
	choice, err := studies.ChooseLicenceRegistry(req.Registry, d, req.DesignFile, req.ConfiguredRegistry, lk)
	if err != nil {
		return StudyInfo{}, err
	}
	lic, err := studies.OpenLicences(choice)
	if err != nil {
		return StudyInfo{}, err
	}
	actor, err := s.actor(ctx, req.Actor)
	if err != nil {
		return StudyInfo{}, err
	}
	out, replayed, err := studies.Register(ctx, studies.RegisterInput{
		Design: d, File: req.DesignFile, Key: req.Key, Actor: actor, At: time.Now().UTC(), Prev: prev,
		Resolve: studies.ResolveOptions{Lookup: lk, BaseDir: base},
	}, studies.RegisterDeps{Licences: lic, Assets: a, Exists: s.exists})
	if err != nil {
		return StudyInfo{}, err
	}
	if replayed {
		info, err := s.Status(ctx, d.Name)
		info.Replayed = true
		return info, err
	}
	if err := s.create(ctx, out, actor, "registered from "+req.DesignFile); err != nil {
		return StudyInfo{}, err
	}
	s.Log.Info("study registered", "study", d.Name, "design_hash", out.DesignHash, "actor", actor)
	return s.Status(ctx, d.Name)
}

// create makes the registered study's directory and store, with its first
// lifecycle in the store, and writes registration.json last: its presence is
// what makes the study exist.
func (s *Service) create(ctx context.Context, out *studies.Registration, actor, why string) error {
	dir := s.Dir(out.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := receipts.Open(filepath.Join(dir, "store.bolt"), out.Name)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	s.mu.Lock()
	s.stores[out.Name] = st
	s.mu.Unlock()
	doc, err := json.Marshal(out.Lifecycle)
	if err != nil {
		return err
	}
	if err := st.PutLifecycle(ctx, receipts.LifecycleChange{Doc: doc,
		Transition: &receipts.Transition{From: "", To: string(studies.Draft), Who: actor, Why: why, At: time.Now().UTC()}}); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, "registration.json"), out, 0o400)
}

func (s *Service) registration(name string) (*studies.Registration, *studies.Design, error) {
	var r studies.Registration
	if err := atomicfile.ReadJSON(filepath.Join(s.Dir(name), "registration.json"), &r); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("study %q: %w", name, ErrNoStudy)
		}
		return nil, nil, err
	}
	d, err := studies.ParseDesign(name+"/registration.json", r.Design)
	if err != nil {
		return nil, nil, err
	}
	return &r, d, nil
}

// lifecycle reads the study's lifecycle from its store, the one place it lives.
func (s *Service) lifecycle(name string) (*studies.Lifecycle, error) {
	l, _, _, err := s.readLifecycle(context.Background(), name)
	return l, err
}

// readLifecycle returns the lifecycle, the stored document it was decoded
// from (for PutLifecycle's Prev) and the store.
func (s *Service) readLifecycle(ctx context.Context, name string) (*studies.Lifecycle, []byte, *receipts.Store, error) {
	st, err := s.store(name)
	if err != nil {
		return nil, nil, nil, err
	}
	raw, found, err := st.Lifecycle(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("study %q: reading its lifecycle: %w", name, err)
	}
	if !found {
		return nil, nil, nil, fmt.Errorf("study %q: its store %s holds no lifecycle (the registration did not finish; register the study again under a new name)", name, st.Path())
	}
	var l studies.Lifecycle
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, nil, nil, fmt.Errorf("study %q: reading its lifecycle: %w", name, err)
	}
	return &l, raw, st, nil
}

// apply moves the study's lifecycle and records the change in the store's
// audit, in one transaction; a lifecycle moved by another request since it
// was read is refused (receipts.ErrStaleState) with nothing written.
func (s *Service) apply(ctx context.Context, name string, ev studies.Event) (*studies.Lifecycle, error) {
	l, prev, st, err := s.readLifecycle(ctx, name)
	if err != nil {
		return nil, err
	}
	from := l.State
	entry, err := l.Apply(ev)
	if err != nil {
		return nil, err
	}
	doc, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	c := receipts.LifecycleChange{Prev: prev, Doc: doc}
	t := receipts.Transition{From: string(from), To: string(l.State), Who: ev.Actor, Why: cmp.Or(entry.Why, ev.Kind), At: ev.At}
	if ev.Kind == studies.EventFreeze {
		c.Transition, c.FreezeDesign = &t, l.DesignHash
	} else if from != l.State {
		c.Transition = &t
	}
	if err := st.PutLifecycle(ctx, c); err != nil {
		return nil, err
	}
	return l, nil
}

// Review records an outside review's verdict; a pass without a licence line does not count.
func (s *Service) Review(ctx context.Context, name string, r studies.Review, why string) (StudyInfo, error) {
	l, err := s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	r.DesignHash = cmp.Or(r.DesignHash, l.DesignHash)
	if r.Reviewer, err = s.actor(ctx, r.Reviewer); err != nil {
		return StudyInfo{}, err
	}
	if err := s.separateDuties(ctx, name, l, "review"); err != nil {
		return StudyInfo{}, err
	}
	if _, err := s.apply(ctx, name, studies.Event{Kind: studies.EventReview, Actor: r.Reviewer, At: time.Now().UTC(), Why: why, Review: &r}); err != nil {
		return StudyInfo{}, err
	}
	return s.Status(ctx, name)
}

// Approve records the Director's approval.
func (s *Service) Approve(ctx context.Context, name, director, why string) (StudyInfo, error) {
	director, err := s.actor(ctx, director)
	if err != nil {
		return StudyInfo{}, err
	}
	l, err := s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	if err := s.separateDuties(ctx, name, l, "approve"); err != nil {
		return StudyInfo{}, err
	}
	if _, err := s.apply(ctx, name, studies.Event{Kind: studies.EventApprove, Actor: director, At: time.Now().UTC(), Why: why}); err != nil {
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
	lk, err := provision.Lookup()
	if err != nil {
		return StudyInfo{}, err
	}
	snap, err := studies.Freeze(ctx, studies.FreezeInput{Design: d, Registered: reg.Assets,
		Validate: studies.ValidateOptions{File: name, Lookup: lk, Quant: studies.GGUFQuant, BaseDir: reg.DesignDir}}, a)
	if err != nil {
		return StudyInfo{}, err
	}
	if err := s.checkLeakage(ctx, snap); err != nil {
		return StudyInfo{}, err
	}
	if err := checkHoldoutSplits(snap); err != nil {
		return StudyInfo{}, err
	}
	if err := s.checkPromptsFit(ctx, name, snap); err != nil {
		return StudyInfo{}, err
	}
	path := filepath.Join(s.Dir(name), "snapshot.json")
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.WriteJSON(path, snap, 0o400); err != nil {
			return StudyInfo{}, err
		}
	}
	if actor, err = s.actor(ctx, actor); err != nil {
		return StudyInfo{}, err
	}
	if _, err := s.apply(ctx, name, studies.Event{Kind: studies.EventFreeze, Actor: actor, At: time.Now().UTC(), SnapshotHash: snap.Hash, Why: "frozen"}); err != nil {
		return StudyInfo{}, err
	}
	return s.Status(ctx, name)
}

// checkPromptsFit refuses a freeze when a task's prompt and an arm's stop cap
// do not fit the arm's pinned context (see run.CheckPromptsFit).
func (s *Service) checkPromptsFit(ctx context.Context, name string, snap *studies.Snapshot) error {
	env, err := s.runEnv()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(s.Dir(name), "freeze-count-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	_, err = run.CheckPromptsFit(ctx, env, snap, work)
	return err
}

// checkLeakage refuses a freeze when any task, key or near-duplicate appears in
// what a candidate is given. rig's arms get only the task prompt, so the places
// to check are the design's own texts (system prompts would be added here).
func (s *Service) checkLeakage(ctx context.Context, snap *studies.Snapshot) error {
	d, err := snap.DesignValue()
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

// frozen is a frozen study's snapshot and its design as the snapshot holds it.
func (s *Service) frozen(name string) (*studies.Snapshot, *studies.Design, error) {
	snap, err := s.Snapshot(name)
	if err != nil {
		return nil, nil, err
	}
	d, err := snap.DesignValue()
	if err != nil {
		return nil, nil, err
	}
	return snap, d, nil
}

// Snapshot reads a frozen study's snapshot and checks it against its hash.
func (s *Service) Snapshot(name string) (*studies.Snapshot, error) {
	var snap studies.Snapshot
	if err := atomicfile.ReadJSON(filepath.Join(s.Dir(name), "snapshot.json"), &snap); err != nil {
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
	info.Licences, _ = studies.LicenceLinesFor(d.Items, r.Licences)
	execs, err := s.executions(ctx, name)
	if err != nil {
		return info, err
	}
	info.Executions = execs
	info.Preflight, info.Validation = s.gateInfo(ctx, name)
	info.Activity = s.activity.get(name)
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

// ExportAudit writes the study store's audit trail, one transition per line:
// who (as the daemon read it from the socket), what, when and why.
func (s *Service) ExportAudit(ctx context.Context, name string, w io.Writer) error {
	st, err := s.store(name)
	if err != nil {
		return err
	}
	trail, err := st.Audit(ctx)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	for _, t := range trail {
		if err := enc.Encode(t); err != nil {
			return err
		}
	}
	return nil
}
