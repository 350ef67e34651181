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
	"syscall"
	"time"

	"rig/internal/atomicfile"
	"rig/internal/layout"
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
	if err := os.MkdirAll(layout.Home(home).Studies(), 0o700); err != nil {
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

// layout is the daemon's home as package layout lays it out.
func (s *Service) layout() layout.Home { return layout.Home(s.Home) }

// study is the named study's folder. It is the one place a study name from
// a request becomes a path: the name is checked against the design's name
// rule (layout.ErrInvalidName, wire code invalid_name) and a folder that is
// a symlink is refused, before anything is opened.
func (s *Service) study(name string) (layout.Study, error) { return s.layout().Study(name) }

// execution is execution id's folder of study name, both checked.
func (s *Service) execution(name, id string) (layout.Execution, error) {
	st, err := s.study(name)
	if err != nil {
		return layout.Execution{}, err
	}
	return st.Execution(id)
}

func (s *Service) exists(name string) bool {
	st, err := s.study(name)
	if err != nil {
		return false
	}
	_, err = os.Stat(st.Registration())
	return err == nil
}

// ErrNoStudy means no study of that name is registered here.
var ErrNoStudy = errors.New("no such study")

func (s *Service) store(name string) (*receipts.Store, error) {
	dir, err := s.study(name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.stores[name]; ok {
		return st, nil
	}
	if !s.exists(name) {
		return nil, fmt.Errorf("study %q: %w (rig study list shows the registered ones)", name, ErrNoStudy)
	}
	// bbolt opens by name and follows a link; a planted one is refused first.
	if err := layout.NoLink(dir.Store()); err != nil {
		return nil, fmt.Errorf("study %q: %w", name, err)
	}
	st, err := receipts.Open(dir.Store(), name)
	if err != nil {
		return nil, err
	}
	if err := s.importLifecycle(st, dir); err != nil {
		st.Close()
		return nil, err
	}
	s.stores[name] = st
	return st, nil
}

// legacyLifecycle is the file name of layout.Study.LegacyLifecycle, where
// a home written before the store kept the lifecycle has it;
// importLifecycle moves it into the store once and renames the file to
// legacyLifecycle+".imported", which nothing reads.
const legacyLifecycle = "lifecycle.json"

// importLifecycle copies a study's lifecycle.json into its store when the
// store holds no lifecycle yet: the store is the one place it lives from then on.
func (s *Service) importLifecycle(st *receipts.Store, dir layout.Study) error {
	ctx := context.Background()
	if _, found, err := st.Lifecycle(ctx); err != nil || found {
		return err
	}
	name, path := dir.Name(), dir.LegacyLifecycle()
	raw, err := readNoFollow(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if errors.Is(err, syscall.ELOOP) {
		err = fmt.Errorf("%s is a symlink: %w (a lifecycle is imported only from the file rig wrote; remove the link)", path, layout.ErrLink)
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

// readNoFollow reads path, refusing (ELOOP) a path that is a symlink.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
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
	// DesignFile names the design: in errors, and its folder is where
	// relative bank and model paths resolve. Design is its content, read by
	// the command line with the caller's own rights; a request without it
	// (an older command line) has the daemon read DesignFile, only as the
	// caller could (callerfiles.go).
	DesignFile string `json:"design_file"`
	Design     []byte `json:"design,omitempty"`
	Key        string `json:"key"`
	Actor      string `json:"actor"`
	// Registry is --registry, an absolute path; ConfiguredRegistry is
	// $RIG_LICENCE_REGISTRY as the CLI saw it. See ChooseLicenceRegistry.
	Registry           string `json:"registry,omitempty"`
	ConfiguredRegistry string `json:"configured_registry,omitempty"`
	// Name, when set (register --name), is the study's name in place of the
	// design's name: the same design goes again under a new name without an
	// edit. It is part of the registered design and so of its hash.
	Name string `json:"name,omitempty"`
}

// StudyInfo is what status prints.
type StudyInfo struct {
	Name         string               `json:"name"`
	State        studies.State        `json:"state"`
	DesignHash   string               `json:"design_hash"`
	SnapshotHash string               `json:"snapshot_hash,omitempty"`
	Dir          string               `json:"dir"`
	Store        string               `json:"store"` // the study's bbolt file
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
	// LicenceTerms is what each licence entry the study rests on says
	// (terms, page, verdict per use), shown to a reviewer before the line.
	LicenceTerms []studies.LicenceTerm `json:"licence_terms,omitempty"`
}

// Register checks licences, fingerprints every pinned asset and records the
// study in its own new store. Nothing is written when any check fails.
func (s *Service) Register(ctx context.Context, req RegisterRequest) (StudyInfo, error) {
	data := req.Design
	if data == nil {
		var err error
		if data, err = s.readAsCaller(ctx, "design_file", req.DesignFile); err != nil {
			return StudyInfo{}, err
		}
	} else if !filepath.IsAbs(req.DesignFile) {
		return StudyInfo{}, fmt.Errorf("%w: design_file: %q is not an absolute path (relative banks and models resolve against its folder)", ErrBadRequest, req.DesignFile)
	}
	a, err := s.assets()
	if err != nil {
		return StudyInfo{}, err
	}
	lk, err := provision.Lookup()
	if err != nil {
		return StudyInfo{}, err
	}
	base := filepath.Dir(req.DesignFile)
	d, err := studies.ParseDesign(req.DesignFile, data)
	if err != nil {
		return StudyInfo{}, err
	}
	if req.Name != "" {
		d.Name = req.Name
	}
	choice, err := studies.ChooseLicenceRegistry(req.Registry, d, req.DesignFile, req.ConfiguredRegistry, lk)
	if err != nil {
		return StudyInfo{}, err
	}
	// Before validation reads a model's header or anything is hashed.
	if err := s.checkDesignFiles(ctx, req.DesignFile, d, lk, base, choice.Path); err != nil {
		return StudyInfo{}, err
	}
	if err := studies.Validate(ctx, d, studies.ValidateOptions{File: req.DesignFile, Lookup: lk, BaseDir: base, Quant: studies.GGUFQuant, Format: studies.GGUFFormat}); err != nil {
		return StudyInfo{}, err
	}
	derived := req.Key == ""
	if derived {
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
	var prevAssets studies.AssetSet
	if req.Key != "" {
		var rec studies.RequestRecord
		var assets studies.AssetSet
		dir, err := s.study(d.Name)
		if err != nil {
			return StudyInfo{}, err
		}
		if err := atomicfile.ReadJSON(dir.Registration(), &struct {
			Request *studies.RequestRecord `json:"request"`
			Assets  *studies.AssetSet      `json:"assets"`
		}{&rec, &assets}); err == nil && rec.Key == req.Key {
			prev = &rec
			prevAssets = assets
		}
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
		Design: d, File: req.DesignFile, Key: req.Key, KeyDerived: derived, Actor: actor, At: time.Now().UTC(), Prev: prev, PrevAssets: prevAssets,
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
	if uid := callerUID(ctx); uid != nil {
		for i := range out.Lifecycle.Audit {
			out.Lifecycle.Audit[i].UID = uid
		}
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
	sd, err := s.study(out.Name)
	if err != nil {
		return err
	}
	dir := sd.Dir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	st, err := receipts.Open(sd.Store(), out.Name)
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
	return atomicfile.WriteJSON(sd.Registration(), out, 0o400)
}

func (s *Service) registration(name string) (*studies.Registration, *studies.Design, error) {
	dir, err := s.study(name)
	if err != nil {
		return nil, nil, err
	}
	var r studies.Registration
	if err := atomicfile.ReadJSON(dir.Registration(), &r); err != nil {
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
	// The audit keeps the caller's uid beside their name (duties.go).
	if c, ok := CallerFrom(ctx); ok && ev.ActorUID == nil && ev.Actor == c.String() {
		ev.ActorUID = callerUID(ctx)
	}
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
	// Who reviewed is who called, never a uid the request carried.
	r.ReviewerUID = callerUID(ctx)
	if err := s.separateDuties(ctx, dutyReview, "study "+name, studyParties(l)); err != nil {
		return StudyInfo{}, err
	}
	if err := s.checkLicenceLine(name, l, r); err != nil {
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
	if err := s.separateDuties(ctx, dutyApprove, "study "+name, studyParties(l)); err != nil {
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
	// Freeze reads the banks, models and registry again, on this caller's
	// behalf: a file swapped since register for one they may not read is
	// refused before it is read.
	if err := s.checkDesignFiles(ctx, name, d, lk, reg.DesignDir, reg.Licences.Registry); err != nil {
		return StudyInfo{}, err
	}
	snap, err := studies.Freeze(ctx, studies.FreezeInput{Design: d, Registered: reg.Assets,
		Validate: studies.ValidateOptions{File: name, Lookup: lk, Quant: studies.GGUFQuant, Format: studies.GGUFFormat, BaseDir: reg.DesignDir}}, a)
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
	dir, err := s.study(name)
	if err != nil {
		return StudyInfo{}, err
	}
	path := dir.Snapshot()
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
	dir, err := s.study(name)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(dir.Dir(), "freeze-count-")
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
	dir, err := s.study(name)
	if err != nil {
		return nil, err
	}
	var snap studies.Snapshot
	if err := atomicfile.ReadJSON(dir.Snapshot(), &snap); err != nil {
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
	dir, err := s.study(name)
	if err != nil {
		return StudyInfo{}, err
	}
	l, err := s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	r, d, err := s.registration(name)
	if err != nil {
		return StudyInfo{}, err
	}
	info := StudyInfo{Name: name, State: l.State, DesignHash: l.DesignHash, SnapshotHash: l.SnapshotHash, Dir: dir.Dir(), Store: dir.Store(), Audit: l.Audit}
	info.Licences, _ = studies.LicenceLinesFor(d.Items, r.Licences)
	info.LicenceTerms, _ = studies.LicenceTermsFor(d.Items, r.Licences)
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
	entries, err := os.ReadDir(s.layout().Studies())
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
