package studies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// LicenceChecker checks every item against the study's licence registry for
// the use the design makes of it (StudyLicences in production). A nil error
// means every use is allowed with the clause read; the record names the
// registry files the verdicts came from, whose hashes become assets.
type LicenceChecker interface {
	Check(ctx context.Context, items []Item) (LicenceRecord, error)
}

// ErrNotWired is a gate whose checker was not provided: it fails closed.
var ErrNotWired = errors.New("gate not wired")

// Registration is what the store keeps for a newly registered study.
type Registration struct {
	Name       string          `json:"name"`
	DesignHash string          `json:"design_hash"`
	Design     json.RawMessage `json:"design"` // canonical
	Assets     AssetSet        `json:"assets"` // hashes Freeze compares against
	// Licences is the registry the items were checked against; its files'
	// hashes are in Assets too.
	Licences LicenceRecord `json:"licences"`
	// DesignDir is the folder of the registered design file: relative model
	// and task-bank paths resolve against it at freeze as at register.
	DesignDir string        `json:"design_dir,omitempty"`
	Lifecycle *Lifecycle    `json:"lifecycle"`
	Request   RequestRecord `json:"request"`
	// FromTry is the try the study was registered from, nil for none.
	FromTry *TryOrigin `json:"from_try,omitempty"`
}

// RegisterInput is one register request.
type RegisterInput struct {
	Design *Design
	File   string // names the design in errors
	Key    string // idempotency key
	// KeyDerived is true when rig made Key from the design's hash because
	// the user gave none: a conflict on it is never reported as the user's
	// key, but as what it is (the name is taken by the same design with
	// other inputs).
	KeyDerived bool
	Actor      string
	At         time.Time
	// Prev is the record stored under Key, nil when the key is new.
	Prev *RequestRecord
	// PrevAssets are the assets registered under Prev, to name the inputs
	// that changed when a derived key conflicts.
	PrevAssets AssetSet
	Resolve    ResolveOptions
}

// RegisterDeps are the checks registration runs, all required.
type RegisterDeps struct {
	Licences LicenceChecker
	Assets   Assets
	// Exists reports whether a study of that name is registered.
	Exists func(name string) bool
}

// Register runs the gates before a study exists, in order, each failing
// closed and writing nothing: the licence check, the asset fingerprint, the
// idempotency key, then the name. A repeat of a stored request returns
// replayed true and the existing study's name, and no Registration.
func Register(ctx context.Context, in RegisterInput, deps RegisterDeps) (reg *Registration, replayed bool, err error) {
	file := in.File
	if file == "" {
		file = "design.json"
	}
	if deps.Licences == nil || deps.Assets == nil || deps.Exists == nil {
		return nil, false, fmt.Errorf("register %s: %w: the licence checker, asset resolver and study index must all be wired", file, ErrNotWired)
	}
	lic, err := deps.Licences.Check(ctx, in.Design.Items)
	if err != nil {
		return nil, false, fmt.Errorf("%s: items: %w", file, err)
	}
	assets, err := Fingerprint(ctx, in.Design, deps.Assets, in.Resolve)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", file, err)
	}
	// In the asset set, the registry is part of the idempotent request and of
	// what freeze compares: a registry edited after register is stale.
	for k, v := range lic.Assets() {
		assets[k] = v
	}
	dh, err := DesignHash(in.Design)
	if err != nil {
		return nil, false, err
	}
	req := Request{Op: OpCreate, Key: in.Key, Body: CreateBody{DesignHash: dh, Assets: assets}}
	if _, again, err := Replay(in.Prev, req); err != nil || again {
		if err != nil && in.KeyDerived && errors.Is(err, ErrIdempotencyConflict) {
			return nil, false, nameTaken(file, in.Design.Name, changedAssets(in.PrevAssets, assets))
		}
		return nil, again, err
	}
	if err := CheckNewName(file, in.Design.Name, deps.Exists); err != nil {
		return nil, false, err
	}
	rec, err := req.Record(in.Design.Name)
	if err != nil {
		return nil, false, err
	}
	canon, err := Canonical(in.Design)
	if err != nil {
		return nil, false, err
	}
	return &Registration{
		Name:       in.Design.Name,
		DesignHash: dh,
		Design:     canon,
		Assets:     assets,
		Licences:   lic,
		DesignDir:  in.Resolve.BaseDir,
		Lifecycle:  NewLifecycle(dh, in.Actor, in.At),
		Request:    rec,
	}, false, nil
}
