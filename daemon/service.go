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
	"rig/api"
	"rig/scaleout"
	"rig/ui"
	"sync"
	"sync/atomic"
	"syscall"

	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/internal/metrics"
	"rig/receipts"
	"rig/run"
	"rig/studies"
)

// Service is what the daemon serves: every study registered on this machine,
// each in its own directory with its own store, and at most one execution
// running at a time (the card is one). All methods are safe to call
// concurrently; the daemon keeps each study's store open.
//
// Service is the core every resource shares: the stores and their locks, the
// home's layout, the lifecycle and its audit, the policy in force, the
// server. The requests are served by one type per resource, as Nomad's
// endpoints are (endpoint_*.go): Studies, Executions, Reports, Proposals,
// Budget and Access (the policy).
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
	// metrics is the daemon's /metrics (metrics.go); nil serves none.
	metrics *metrics.Set
	// tryMu lets one try run at a time; tryPool keeps the runtimes of the
	// last tries warm (try.go), made on first use.
	tryMu   sync.Mutex
	tryPool *run.TryPool
	// tryLive is the try running now, as far as it got, or the last one
	// that failed (rig ui's matrix); nil when neither. Under mu.
	tryLive *api.TryRecord
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
var ErrNoStudy = api.ErrNoStudy

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
	if s.tryPool != nil {
		s.tryPool.Close(context.Background())
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
	} else if from != l.State || ev.Kind == studies.EventAmend {
		// An amendment leaves the study decided and is audited all the same.
		c.Transition = &t
	}
	if err := st.PutLifecycle(ctx, c); err != nil {
		return nil, err
	}
	return l, nil
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

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return fmt.Sprintf("uid-%d", os.Getuid())
}
