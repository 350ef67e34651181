package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"rig/api"
	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/studies"
)

// TryKeepEnv sets how long the daemon keeps a try's runtimes up for the
// next try (a Go duration; "-1s" keeps none). Unset: run.DefaultTryKeep.
const TryKeepEnv = "RIG_TRY_KEEP_WARM"

// Tries serves rig try: a draft design's arms on a few tasks now, before a
// study exists, with nothing counted; the kept tries; and their pruning.
// The runtimes of the last tries stay up in the daemon for a while (its
// run.TryPool), so a try after an edit answers in seconds.
type Tries struct{ s *Service }

// Tries is the daemon's tries resource.
func (s *Service) Tries() Tries { return Tries{s} }

// methods, by name: a try, the kept tries, pruning them.
func (tr Tries) methods() map[string]handler {
	return map[string]handler{
		api.MethodTry: method(func(ctx context.Context, r api.TryRequest, _ io.Writer) (any, error) {
			return tr.Try(ctx, r)
		}),
		api.MethodTryList: method(func(ctx context.Context, _ struct{}, _ io.Writer) (any, error) { return tr.List() }),
		api.MethodTryPrune: method(func(ctx context.Context, r api.TryPruneRequest, _ io.Writer) (any, error) {
			return tr.Prune(r, time.Now())
		}),
	}
}

// pool is the daemon's warm runtimes between tries, made on first use.
func (tr Tries) pool() *run.TryPool {
	s := tr.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tryPool == nil {
		keep, err := time.ParseDuration(os.Getenv(TryKeepEnv))
		if err != nil {
			keep = 0 // unset or unreadable: the default
		}
		s.tryPool = run.NewTryPool(s.layout().TryRuntimes(), keep, s.Log)
	}
	return s.tryPool
}

// Try checks the draft's licences and resolves its pins as register would
// (except that a bank need not be audited yet), then runs the chosen arms on
// the chosen tasks through the study's own trial runner, keeps the try under
// a new id and returns it with its pilot figures. One try at a time, and
// none while a counted run holds the card.
func (tr Tries) Try(ctx context.Context, req api.TryRequest) (api.TryRecord, error) {
	began := time.Now()
	d, snap, assets, err := tr.draft(ctx, req)
	if err != nil {
		return api.TryRecord{}, err
	}
	for _, a := range req.Arms {
		if d.Arm(a) == nil {
			return api.TryRecord{}, fmt.Errorf("%w: --arm %s: %s has no such arm (its arms: %v)", ErrBadRequest, a, req.DesignFile, armNames(d))
		}
	}
	picked, err := run.SelectTryTasks(snap, req.Tasks, req.Task)
	if err != nil {
		return api.TryRecord{}, fmt.Errorf("%w: %s: %v", ErrBadRequest, req.DesignFile, err)
	}
	if !tr.s.tryMu.TryLock() {
		return api.TryRecord{}, fmt.Errorf("%w: another try is running on the card: try again once it ends", ErrBadRequest)
	}
	defer tr.s.tryMu.Unlock()
	if busy := tr.s.runningStudy(); busy != "" {
		return api.TryRecord{}, fmt.Errorf("%w: study %s has a counted run on the card: a try would disturb its measurements (try again once it ends, or rig study cancel %s)", ErrBadRequest, busy, busy)
	}
	id, dir, err := tr.newTry()
	if err != nil {
		return api.TryRecord{}, err
	}
	env, err := tr.s.runEnv()
	if err != nil {
		return api.TryRecord{}, err
	}
	actor, err := tr.s.actor(ctx, req.Actor)
	if err != nil {
		return api.TryRecord{}, err
	}
	pool := tr.pool()
	rec := api.TryRecord{ID: id, At: began.UTC(), Actor: actor, Study: d.Name, DesignFile: req.DesignFile, DesignHash: snap.DesignHash,
		Assets: assets, Tasks: picked, Dir: string(dir), KeepWarm: pool.Keep(), Status: api.TryRunning, Arms: triedArms(d, req.Arms)}
	tr.setLive(&rec)
	spec := run.TrySpec{ID: id, Snapshot: snap, Dir: string(dir), Tasks: picked, Arms: req.Arms, Pool: pool,
		Progress: func(r run.TryResult) { tr.setLive(tryRecord(rec, d, snap, r, began)) }}
	res, err := run.Try(ctx, env, spec, io.Discard)
	if err != nil {
		os.RemoveAll(string(dir))
		failed := rec
		failed.Status, failed.Error = api.TryFailed, err.Error()
		tr.setLive(&failed)
		return api.TryRecord{}, fmt.Errorf("try of %s: %w", req.DesignFile, err)
	}
	rec = *tryRecord(rec, d, snap, *res, began)
	rec.Status = api.TryDone
	if err := atomicfile.WriteJSON(dir.TryRecord(), rec, 0o600); err != nil {
		tr.setLive(nil)
		return api.TryRecord{}, err
	}
	tr.setLive(nil) // kept: the workspace reads try.json from now on
	tr.s.Log.Info("try ran", "try", id, "design", d.Name, "design_hash", snap.DesignHash, "trials", len(rec.Trials), "elapsed", time.Since(began))
	return rec, nil
}

// tryRecord is base with what the try has so far: its trials, runtimes and
// the pilot figures they give.
func tryRecord(base api.TryRecord, d *studies.Design, snap *studies.Snapshot, res run.TryResult, began time.Time) *api.TryRecord {
	rec := base
	rec.Pilot = apiPilot(run.Pilot(d, snap.Tasks(), res.Trials))
	rec.Trials = convertAll(res.Trials, func(t run.TryTrial) api.TryTrial { return api.TryTrial(t) })
	rec.Runtimes = convertAll(res.Runtimes, func(r run.TryRuntime) api.TryRuntime { return api.TryRuntime(r) })
	rec.ElapsedMS = time.Since(began).Milliseconds()
	return &rec
}

// triedArms are the arms a try runs, in the design's order: every arm but
// the judges, or those named.
func triedArms(d *studies.Design, named []string) []string {
	var out []string
	for _, a := range d.Arms {
		if a.Role != studies.RoleJudge && (len(named) == 0 || slices.Contains(named, a.Name)) {
			out = append(out, a.Name)
		}
	}
	return out
}

// setLive records the try running now (or the one that just failed), nil
// once it is kept.
func (tr Tries) setLive(rec *api.TryRecord) {
	if rec != nil {
		c := *rec // the caller goes on changing its own
		rec = &c
	}
	tr.s.mu.Lock()
	defer tr.s.mu.Unlock()
	tr.s.tryLive = rec
}

// live is the try running now, or the last one that failed, if any.
func (tr Tries) live() (api.TryRecord, bool) {
	tr.s.mu.Lock()
	defer tr.s.mu.Unlock()
	if tr.s.tryLive == nil {
		return api.TryRecord{}, false
	}
	return *tr.s.tryLive, true
}

// Show is one try: the running one as far as it got, or a kept one.
func (tr Tries) Show(id string) (api.TryRecord, error) {
	if rec, ok := tr.live(); ok && rec.ID == id {
		return rec, nil
	}
	return tr.Record(id)
}

// Tries lists the running try (if any) and the kept ones, for the
// workspace.
func (u uiSource) Tries() ([]api.TrySummary, error) {
	tr := u.s.Tries()
	out, err := tr.List()
	if err != nil {
		return nil, err
	}
	if rec, ok := tr.live(); ok {
		out = append([]api.TrySummary{trySummary(rec)}, out...)
	}
	return out, nil
}

// Try is one try for the workspace's matrix.
func (u uiSource) Try(_ context.Context, id string) (api.TryRecord, error) {
	return u.s.Tries().Show(id)
}

// draft reads the request's design as register does, checks its items
// against the licence registry (a missing or restricting entry blocks a try
// as it blocks a design) and resolves it to digests; assets are what
// register would record, licence registries included.
func (tr Tries) draft(ctx context.Context, req api.TryRequest) (*studies.Design, *studies.Snapshot, map[string]string, error) {
	sr := tr.s.Studies()
	data, err := sr.designData(ctx, api.RegisterRequest{DesignFile: req.DesignFile, Design: req.Design})
	if err != nil {
		return nil, nil, nil, err
	}
	d, err := studies.ParseDesign(req.DesignFile, data)
	if err != nil {
		return nil, nil, nil, err
	}
	lk, err := provision.Lookup()
	if err != nil {
		return nil, nil, nil, err
	}
	base := filepath.Dir(req.DesignFile)
	choice, err := studies.ChooseLicenceRegistry(req.Registry, d, req.DesignFile, req.ConfiguredRegistry, lk)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := sr.checkDesignFiles(ctx, req.DesignFile, d, lk, base, choice.Path); err != nil {
		return nil, nil, nil, err
	}
	open := tr.s.callerOpen(ctx)
	lic, err := studies.OpenLicencesWith(open, choice)
	if err != nil {
		return nil, nil, nil, err
	}
	licRec, err := lic.Check(ctx, d.Items)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: items: %w (a try is blocked as register would be: fix the registry entry first)", req.DesignFile, err)
	}
	env, err := tr.s.callerEnv(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	snap, err := studies.Freeze(ctx, studies.FreezeInput{Design: d, Validate: tr.s.callerValidate(ctx, req.DesignFile, base, lk), Open: open}, env.TryAssets())
	if err != nil {
		return nil, nil, nil, err
	}
	assets := map[string]string{}
	for k, v := range snap.Assets {
		assets[k] = v
	}
	for k, v := range licRec.Assets() {
		assets[k] = v
	}
	return d, snap, assets, nil
}

// newTry makes a new try's folder under a fresh id.
func (tr Tries) newTry() (string, layout.Records, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	id := "try-" + hex.EncodeToString(b[:])
	dir, err := tr.s.layout().Try(id)
	if err != nil {
		return "", "", err
	}
	return id, dir, os.MkdirAll(string(dir), 0o700)
}

// Record is the kept try id.
func (tr Tries) Record(id string) (api.TryRecord, error) {
	dir, err := tr.s.layout().Try(id)
	if err != nil {
		return api.TryRecord{}, err
	}
	var rec api.TryRecord
	if err := atomicfile.ReadJSON(dir.TryRecord(), &rec); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return rec, fmt.Errorf("%w: try %s is not kept here (rig try list shows the kept tries; a pruned try is gone)", receipts.ErrNotFound, id)
		}
		return rec, err
	}
	return rec, nil
}

// List is every kept try, newest first.
func (tr Tries) List() ([]api.TrySummary, error) {
	entries, err := os.ReadDir(tr.s.layout().Tries())
	if errors.Is(err, fs.ErrNotExist) {
		return []api.TrySummary{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []api.TrySummary{}
	for _, e := range entries {
		if layout.CheckTryID(e.Name()) != nil {
			continue // the warm runtimes' folder
		}
		rec, err := tr.Record(e.Name())
		if err != nil {
			continue // a try that never finished keeps no record
		}
		out = append(out, trySummary(rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	return out, nil
}

// trySummary is a try as a list shows it.
func trySummary(rec api.TryRecord) api.TrySummary {
	sum := api.TrySummary{ID: rec.ID, At: rec.At, Study: rec.Study, DesignHash: rec.DesignHash, Trials: len(rec.Trials), Status: rec.Status}
	if sum.Status == "" {
		sum.Status = api.TryDone // kept before tries had a status
	}
	for _, t := range rec.Trials {
		if t.Pass {
			sum.Passed++
		}
	}
	return sum
}

// Prune removes the named try, or those older than req.OlderThan, or every
// try, and returns the ids removed.
func (tr Tries) Prune(req api.TryPruneRequest, now time.Time) ([]string, error) {
	if req.ID == "" && req.OlderThan <= 0 && !req.All {
		return nil, fmt.Errorf("%w: name a try, or give --older-than or --all", ErrBadRequest)
	}
	var ids []string
	if req.ID != "" {
		if _, err := tr.Record(req.ID); err != nil {
			return nil, err
		}
		ids = []string{req.ID}
	} else {
		all, err := tr.List()
		if err != nil {
			return nil, err
		}
		for _, t := range all {
			if req.All || now.Sub(t.At) > req.OlderThan {
				ids = append(ids, t.ID)
			}
		}
	}
	removed := []string{}
	for _, id := range ids {
		dir, err := tr.s.layout().Try(id)
		if err != nil {
			return removed, err
		}
		if err := os.RemoveAll(string(dir)); err != nil {
			return removed, err
		}
		removed = append(removed, id)
	}
	return removed, nil
}

// runningStudy names a study whose execution is running, "" when none is.
func (s *Service) runningStudy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for n, h := range s.running {
		if h.Info().Status == string(receipts.Running) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

func armNames(d *studies.Design) []string {
	var out []string
	for _, a := range d.Arms {
		out = append(out, a.Name)
	}
	return out
}

// apiPilot is the pilot as the protocol sends it.
func apiPilot(p run.TryPilot) api.TryPilot {
	return api.TryPilot{
		Pairs: convertAll(p.Pairs, func(x run.PilotPair) api.PilotPair { return api.PilotPair(x) }),
		Arms:  convertAll(p.Arms, func(x run.PilotArm) api.PilotArm { return api.PilotArm(x) }),
		Fate:  api.RuleFate(p.Fate), Notes: p.Notes,
	}
}

// cardForStep readies the card for a step an engine execution runs on this
// host after its trials (the fidelity step's scorer): as cardFromTries,
// but a try running now is waited for, not refused. None starts meanwhile:
// a try is refused while an execution runs, and the engine's stays running
// until its steps end.
func (s *Service) cardForStep(ctx context.Context, say func(current string)) error {
	for {
		if err := s.cardFromTries(); err == nil {
			return nil
		}
		say("waiting for the try on the card to end before the steps after the trials")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// cardFromTries readies the card for a counted run, which must have it and
// the host's memory to itself: it refuses while a try is running, and stops
// the runtimes kept warm for the next try.
func (s *Service) cardFromTries() error {
	if !s.tryMu.TryLock() {
		return fmt.Errorf("%w: a try is running on the card: start the counted run once it ends", run.ErrGate)
	}
	s.tryMu.Unlock()
	s.mu.Lock()
	p := s.tryPool
	s.mu.Unlock()
	if p != nil {
		p.Drain(context.Background())
	}
	return nil
}
