package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"rig/api"
	"rig/internal/atomicfile"
	"rig/internal/provision"
	"rig/receipts"
	"rig/run"
	"rig/studies"
	"rig/tasks"
)

// The studies resource's lifecycle requests: register, review, approve,
// freeze, status and list (endpoint_studies.go has its type and table).

// RegisterRequest is `rig study register`.
type RegisterRequest = api.RegisterRequest

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
	// once the study is frozen (printed by the command line).
	Preflight  []FitInfo              `json:"preflight,omitempty"`
	Validation []run.ValidationRecord `json:"validation,omitempty"`
	// Activity is what a request on the study still running is doing now
	// (a validation run, a replayed record); empty when none is.
	Activity string `json:"activity,omitempty"`
	// LicenceTerms is what each licence entry the study rests on says
	// (terms, page, verdict per use), shown to a reviewer before the line.
	LicenceTerms []studies.LicenceTerm `json:"licence_terms,omitempty"`
	// Warnings are what the design alone says before any trial (rulefate.go).
	Warnings []string `json:"warnings,omitempty"`
}

// Register checks licences, fingerprints every pinned asset and records the
// study in its own new store. Nothing is written when any check fails.
func (sr Studies) Register(ctx context.Context, req RegisterRequest) (StudyInfo, error) {
	data, err := sr.designData(ctx, req)
	if err != nil {
		return StudyInfo{}, err
	}
	// Banks, audit records, the registry and models are read with the
	// caller's rights, each through the descriptor that was judged.
	open := sr.s.callerOpen(ctx)
	env, err := sr.s.callerEnv(ctx)
	if err != nil {
		return StudyInfo{}, err
	}
	a := env.Assets()
	lk, err := provision.Lookup()
	if err != nil {
		return StudyInfo{}, err
	}
	base := filepath.Dir(req.DesignFile)
	d, err := studies.ParseDesign(req.DesignFile, data)
	if err != nil {
		return StudyInfo{}, err
	}
	// From a try: the design as read must be the one tried (try_promote.go).
	tried, origin, err := sr.fromTry(req, d)
	if err != nil {
		return StudyInfo{}, err
	}
	if req.Name != "" {
		d.Name = req.Name
	}
	// Tags were resolved by the command line in the caller's library; the
	// blobs they name are then checked like any model file the caller names.
	if err := studies.ApplyOllamaTags(req.DesignFile, d, func(tag string) (string, string, bool) {
		b, ok := req.OllamaTags[tag]
		return b.File, b.SHA256, ok
	}); err != nil {
		return StudyInfo{}, err
	}
	choice, err := studies.ChooseLicenceRegistry(req.Registry, d, req.DesignFile, req.ConfiguredRegistry, lk)
	if err != nil {
		return StudyInfo{}, err
	}
	// Before validation reads a model's header or anything is hashed.
	if err := sr.checkDesignFiles(ctx, req.DesignFile, d, lk, base, choice.Path); err != nil {
		return StudyInfo{}, err
	}
	if err := studies.Validate(ctx, d, sr.s.callerValidate(ctx, req.DesignFile, base, lk)); err != nil {
		return StudyInfo{}, err
	}
	derived := req.Key == ""
	if req.Key, err = registrationKey(d, req.Key); err != nil {
		return StudyInfo{}, err
	}
	prev, prevAssets, err := sr.earlierRegistration(d.Name, req.Key)
	if err != nil {
		return StudyInfo{}, err
	}
	lic, err := studies.OpenLicencesWith(open, choice)
	if err != nil {
		return StudyInfo{}, err
	}
	if tried != nil {
		licRec, err := lic.Check(ctx, d.Items)
		if err != nil {
			return StudyInfo{}, fmt.Errorf("%s: items: %w", req.DesignFile, err)
		}
		if err := sr.checkTried(ctx, req.DesignFile, d, tried, env, studies.ResolveOptions{Lookup: lk, BaseDir: base}, licRec.Assets()); err != nil {
			return StudyInfo{}, err
		}
	}
	actor, err := sr.s.actor(ctx, req.Actor)
	if err != nil {
		return StudyInfo{}, err
	}
	out, replayed, err := studies.Register(ctx, studies.RegisterInput{
		Design: d, File: req.DesignFile, Key: req.Key, KeyDerived: derived, Actor: actor, At: time.Now().UTC(), Prev: prev, PrevAssets: prevAssets,
		Resolve: studies.ResolveOptions{Lookup: lk, BaseDir: base},
	}, studies.RegisterDeps{Licences: lic, Assets: a, Exists: sr.s.exists})
	if err != nil {
		return StudyInfo{}, err
	}
	if replayed {
		info, err := sr.Status(ctx, d.Name)
		info.Replayed = true
		return info, err
	}
	out.FromTry = origin
	if uid := callerUID(ctx); uid != nil {
		for i := range out.Lifecycle.Audit {
			out.Lifecycle.Audit[i].UID = uid
		}
	}
	why := "registered from " + req.DesignFile
	if origin != nil {
		why += " as tried in " + origin.ID
		if origin.PilotDiscordance > 0 {
			why += fmt.Sprintf(", power.pilot_discordance %.3f from the try (%s)", origin.PilotDiscordance, origin.PilotPair)
		}
	}
	if err := sr.create(ctx, out, actor, why); err != nil {
		return StudyInfo{}, err
	}
	sr.s.Log.Info("study registered", "study", d.Name, "design_hash", out.DesignHash, "actor", actor)
	return sr.Status(ctx, d.Name)
}

// registrationKey is the request's idempotency key, or, without one, a key
// derived from the design.
func registrationKey(d *studies.Design, key string) (string, error) {
	if key != "" {
		return key, nil
	}
	// Without a key, the design's own content is the key: registering the
	// same file twice returns the study; another design under the same name
	// is refused as a name already taken.
	h, err := studies.DesignHash(d)
	if err != nil {
		return "", err
	}
	return "register-" + h[:16], nil
}

// designData is the design the request sends, or else the design file read
// with the caller's rights.
func (sr Studies) designData(ctx context.Context, req RegisterRequest) ([]byte, error) {
	data := req.Design
	if data == nil {
		var err error
		if data, err = sr.s.readAsCaller(ctx, "design_file", req.DesignFile); err != nil {
			return nil, err
		}
	} else if !filepath.IsAbs(req.DesignFile) {
		return nil, fmt.Errorf("%w: design_file: %q is not an absolute path (relative banks and models resolve against its folder)", ErrBadRequest, req.DesignFile)
	}
	return data, nil
}

// earlierRegistration is the request and assets the study was registered
// with, when that was under the same key; nil when not.
func (sr Studies) earlierRegistration(name, key string) (*studies.RequestRecord, studies.AssetSet, error) {
	var prev *studies.RequestRecord
	var prevAssets studies.AssetSet
	if key != "" {
		var rec studies.RequestRecord
		var assets studies.AssetSet
		dir, err := sr.s.study(name)
		if err != nil {
			return nil, studies.AssetSet{}, err
		}
		if err := atomicfile.ReadJSON(dir.Registration(), &struct {
			Request *studies.RequestRecord `json:"request"`
			Assets  *studies.AssetSet      `json:"assets"`
		}{&rec, &assets}); err == nil && rec.Key == key {
			prev = &rec
			prevAssets = assets
		}
	}
	return prev, prevAssets, nil
}

// create makes the registered study's directory and store, with its first
// lifecycle in the store, and writes registration.json last: its presence is
// what makes the study exist.
func (sr Studies) create(ctx context.Context, out *studies.Registration, actor, why string) error {
	sd, err := sr.s.study(out.Name)
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
	sr.s.mu.Lock()
	sr.s.stores[out.Name] = st
	sr.s.mu.Unlock()
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

func (sr Studies) registration(name string) (*studies.Registration, *studies.Design, error) {
	dir, err := sr.s.study(name)
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
	d, err := studies.ParseStoredDesign(name+"/registration.json", r.Design)
	if err != nil {
		return nil, nil, err
	}
	return &r, d, nil
}

// Review records an outside review's verdict; a pass without a licence line does not count.
func (sr Studies) Review(ctx context.Context, name string, r studies.Review, why string) (StudyInfo, error) {
	l, err := sr.s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	r.DesignHash = cmp.Or(r.DesignHash, l.DesignHash)
	if r.Reviewer, err = sr.s.actor(ctx, r.Reviewer); err != nil {
		return StudyInfo{}, err
	}
	// Who reviewed is who called, never a uid the request carried.
	r.ReviewerUID = callerUID(ctx)
	if err := sr.s.separateDuties(ctx, dutyReview, "study "+name, studyParties(l)); err != nil {
		return StudyInfo{}, err
	}
	if err := sr.checkLicenceLine(name, l, r); err != nil {
		return StudyInfo{}, err
	}
	if _, err := sr.s.apply(ctx, name, studies.Event{Kind: studies.EventReview, Actor: r.Reviewer, At: time.Now().UTC(), Why: why, Review: &r}); err != nil {
		return StudyInfo{}, err
	}
	return sr.Status(ctx, name)
}

// Approve records the Director's approval.
func (sr Studies) Approve(ctx context.Context, name, director, why string) (StudyInfo, error) {
	director, err := sr.s.actor(ctx, director)
	if err != nil {
		return StudyInfo{}, err
	}
	l, err := sr.s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	if err := sr.s.separateDuties(ctx, dutyApprove, "study "+name, studyParties(l)); err != nil {
		return StudyInfo{}, err
	}
	if _, err := sr.s.apply(ctx, name, studies.Event{Kind: studies.EventApprove, Actor: director, At: time.Now().UTC(), Why: why}); err != nil {
		return StudyInfo{}, err
	}
	return sr.Status(ctx, name)
}

// Freeze resolves every pin to a digest, validates every task, refuses an
// asset changed since registration, and writes the content-addressed snapshot.
func (sr Studies) Freeze(ctx context.Context, name, actor string) (StudyInfo, error) {
	reg, d, err := sr.registration(name)
	if err != nil {
		return StudyInfo{}, err
	}
	open := sr.s.callerOpen(ctx)
	env, err := sr.s.callerEnv(ctx)
	if err != nil {
		return StudyInfo{}, err
	}
	a := env.Assets()
	lk, err := provision.Lookup()
	if err != nil {
		return StudyInfo{}, err
	}
	// Freeze reads the banks, models and registry again, on this caller's
	// behalf and through descriptors judged as them: a file swapped since
	// register (or since this check) for one they may not read is refused.
	if err := sr.checkDesignFiles(ctx, name, d, lk, reg.DesignDir, reg.Licences.Registry); err != nil {
		return StudyInfo{}, err
	}
	snap, err := studies.Freeze(ctx, studies.FreezeInput{Design: d, Registered: reg.Assets,
		Validate: sr.s.callerValidate(ctx, name, reg.DesignDir, lk), Open: open}, a)
	if err != nil {
		return StudyInfo{}, err
	}
	if err := sr.checkLeakage(ctx, snap); err != nil {
		return StudyInfo{}, err
	}
	if err := checkHoldoutSplits(open, snap); err != nil {
		return StudyInfo{}, err
	}
	if err := sr.checkPromptsFit(ctx, name, snap); err != nil {
		return StudyInfo{}, err
	}
	dir, err := sr.s.study(name)
	if err != nil {
		return StudyInfo{}, err
	}
	path := dir.Snapshot()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.WriteJSON(path, snap, 0o400); err != nil {
			return StudyInfo{}, err
		}
	}
	if actor, err = sr.s.actor(ctx, actor); err != nil {
		return StudyInfo{}, err
	}
	if _, err := sr.s.apply(ctx, name, studies.Event{Kind: studies.EventFreeze, Actor: actor, At: time.Now().UTC(), SnapshotHash: snap.Hash, Why: "frozen"}); err != nil {
		return StudyInfo{}, err
	}
	return sr.Status(ctx, name)
}

// checkPromptsFit refuses a freeze when a task's prompt and an arm's stop cap
// do not fit the arm's pinned context (see run.CheckPromptsFit).
func (sr Studies) checkPromptsFit(ctx context.Context, name string, snap *studies.Snapshot) error {
	env, err := sr.s.callerEnv(ctx)
	if err != nil {
		return err
	}
	dir, err := sr.s.study(name)
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
func (sr Studies) checkLeakage(ctx context.Context, snap *studies.Snapshot) error {
	d, err := snap.DesignValue()
	if err != nil {
		return err
	}
	var banks []*tasks.Bank
	for _, fb := range snap.Banks {
		b, err := tasks.LoadBankWith(sr.s.callerOpen(ctx), fb.Path)
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

// Status reports a study's state, executions and audit.
func (sr Studies) Status(ctx context.Context, name string) (StudyInfo, error) {
	dir, err := sr.s.study(name)
	if err != nil {
		return StudyInfo{}, err
	}
	l, err := sr.s.lifecycle(name)
	if err != nil {
		return StudyInfo{}, err
	}
	r, d, err := sr.registration(name)
	if err != nil {
		return StudyInfo{}, err
	}
	info := StudyInfo{Name: name, State: l.State, DesignHash: l.DesignHash, SnapshotHash: l.SnapshotHash, Dir: dir.Dir(), Store: dir.Store(), Audit: l.Audit}
	info.Licences, _ = studies.LicenceLinesFor(d.Items, r.Licences)
	info.LicenceTerms, _ = studies.LicenceTermsFor(d.Items, r.Licences)
	execs, err := sr.s.executions(ctx, name)
	if err != nil {
		return info, err
	}
	info.Executions = execs
	info.Preflight, info.Validation = sr.gateInfo(ctx, name)
	info.Activity = sr.s.activity.get(name)
	info.Warnings = sr.fateWarnings(ctx, name, l.State, d, r.DesignDir)
	return info, nil
}

// List names every registered study.
func (sr Studies) List() ([]string, error) {
	entries, err := os.ReadDir(sr.s.layout().Studies())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && sr.s.exists(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}
