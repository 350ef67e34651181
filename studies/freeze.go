package studies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"rig/internal/offload"
	"rig/internal/serverspec"
	"rig/tasks"
	"strings"
)

// SnapshotVersion is the layout version of Snapshot.
const SnapshotVersion = 1

// ErrStaleAsset classifies a pinned asset whose hash changed since it was
// registered or frozen; see *StaleAssetError.
var ErrStaleAsset = errors.New("stale asset")

// ErrTampered is a snapshot whose stored hashes do not match its content.
var ErrTampered = errors.New("snapshot does not match its hash")

// StaleAssetError names the asset that changed.
type StaleAssetError struct {
	Asset string // e.g. "model:/models/smollm2.gguf"
	Want  string // hash recorded earlier
	Got   string // hash now
	// Field and Msg, when Msg is set, replace the default explanation: the
	// field of the asset that changed and what it means, with the fix.
	Field string
	Msg   string
}

func (e *StaleAssetError) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("stale asset: %s: %s: %s", e.Asset, e.Field, e.Msg)
	}
	if path, ok := strings.CutPrefix(e.Asset, licenceAssetPrefix); ok {
		if e.Asset == bundledLicenceAsset {
			path = "the bundled licences/registry.json"
		}
		return fmt.Sprintf("stale asset: licence registry %s was %s when registered and is %s now (the study's items were checked against the old file; restore it, or register a new study so the items are checked against the new one)",
			path, Short(e.Want), Short(e.Got))
	}
	return fmt.Sprintf("stale asset: %s was %s when registered and is %s now (a frozen study never refreshes; restore the asset, or register a new study for the new one)",
		e.Asset, Short(e.Want), Short(e.Got))
}

// Is makes errors.Is(err, ErrStaleAsset) true.
func (e *StaleAssetError) Is(target error) bool { return target == ErrStaleAsset }

func Short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

// Binary is a runtime component resolved to the file that will run.
type Binary struct {
	Component string `json:"component"` // "llama-server", "ollama" or "aider"
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	Version   string `json:"version,omitempty"`
	// PythonEnv and EnvSHA256 are, for an openai-server arm's server in a
	// Python environment, that environment and the digest of its
	// installed distributions (serverspec.PythonEnvDigest).
	PythonEnv string `json:"python_env,omitempty"`
	EnvSHA256 string `json:"env_sha256,omitempty"`
}

// Bank is a task bank read and validated against its job kind's schema.
type Bank struct {
	Path   string   `json:"path"`
	SHA256 string   `json:"sha256"`
	Tasks  []string `json:"tasks"` // task ids in bank order, hold-out excluded unless asked
	// NearDuplicates are the bank's pairs of tasks alike at or above the
	// lint's threshold (tasks.NearMethod): kept, and listed for the report.
	// Exact duplicates never reach a snapshot; the freeze refuses them.
	NearDuplicates []tasks.Pair `json:"near_duplicates,omitempty"`
	// Completion is true when the bank's header has a completion block
	// (tasks.Completion), which an arm with prompt_format "completion" needs.
	Completion bool `json:"completion,omitempty"`
	// Excluded are the tasks the design's exclude_tasks leaves out of this
	// bank, with their reasons; they are not in Tasks.
	Excluded []ExcludedTask `json:"excluded,omitempty"`
	// Graders maps each task id of the bank to the grader the task names
	// (TaskGraders): register and freeze refuse a bank whose counted tasks
	// name another grader than their job kind's. Not part of the snapshot.
	Graders map[string]string `json:"-"`
}

// Assets resolves pins to digests. The lead wires it to the runtimes
// (binaries), preflight or a file hasher (models) and tasks (banks); freeze
// only compares what it returns.
type Assets interface {
	// FileSHA256 is the hex SHA-256 of a model file.
	FileSHA256(ctx context.Context, path string) (string, error)
	// Binary resolves one runtime component to its binary and digest.
	Binary(ctx context.Context, component string) (Binary, error)
	// Bank reads the job kind's task bank and validates every task; a bad
	// task is an error naming it.
	Bank(ctx context.Context, jk JobKind) (Bank, error)
}

// Components lists the binaries the runtime needs: the harness, if any,
// and the server.
func (r Runtime) Components() []string {
	if r.Aider() {
		return []string{HarnessAider, r.Engine()}
	}
	return []string{string(r)}
}

// ArmComponents are the provisioned components an arm runs on: its
// runtime's, with the CUDA build (llama-server's or Ollama's) in place of
// the CPU one when the arm's offload pin names backend "cuda".
func ArmComponents(a Arm) []string {
	cs := a.Runtime.Components()
	for i, c := range cs {
		cs[i] = offload.Component(c, a.Pins.Offload.Backend)
	}
	return cs
}

// ArmRuntime is the arm's runtime build as frozen: the provisioned
// component its model runs on (its base runtime's, the CUDA build in place
// of the CPU one when its offload pin names backend "cuda") and that
// binary's frozen digest ("" when the snapshot froze none). It is the one
// lookup of an arm's binary: the runner, the scale-out plan, the merge and
// replay on workers all use it.
func (s *Snapshot) ArmRuntime(a Arm) (component, binarySHA256 string) {
	component = offload.Component(a.Runtime.Engine(), a.Pins.Offload.Backend)
	if fa, ok := s.Arm(a.Name); ok {
		for _, b := range fa.Binaries {
			if b.Component == component {
				binarySHA256 = b.SHA256
			}
		}
	}
	return component, binarySHA256
}

// AssetSet maps an asset key ("model:PATH", "runtime:COMPONENT",
// "server:ARM" and "server-env:ARM" for an openai-server arm's executable
// and Python environment,
// "bank:JOBKIND", "licences:PATH" for the study's licence registry file,
// "licences:bundled") to its hex SHA-256, as recorded at registration.
type AssetSet map[string]string

// FrozenArm is an arm with its pins resolved to digests.
type FrozenArm struct {
	Name        string   `json:"name"`
	ModelPath   string   `json:"model_path"`
	ModelSHA256 string   `json:"model_sha256"`
	Binaries    []Binary `json:"binaries"`
	Pins        Pins     `json:"pins"`
}

// FrozenBank is a job kind's task bank at freeze time.
type FrozenBank struct {
	JobKind string `json:"job_kind"`
	Bank
}

// Snapshot is a frozen design: everything a run may read, content-addressed.
// It never changes; a rerun executes the same snapshot again.
type Snapshot struct {
	Version    int             `json:"version"`
	DesignHash string          `json:"design_hash"`
	Design     json.RawMessage `json:"design"` // canonical JSON of the Design
	Arms       []FrozenArm     `json:"arms"`
	Banks      []FrozenBank    `json:"banks"`
	Assets     AssetSet        `json:"assets"`
	// Hash is the SHA-256 of the canonical snapshot with Hash empty.
	Hash string `json:"hash"`
}

// DesignHash is the hex SHA-256 of the design's canonical JSON. Layout,
// key order and YAML-or-JSON do not change it; any value does.
func DesignHash(d *Design) (string, error) { return Hash(d) }

// BankPath resolves a job kind's task_bank: a relative path is read from the
// design file's folder, as model paths are, so a study folder can be moved
// or registered from any shell.
func BankPath(bank, baseDir string) string {
	if strings.HasPrefix(bank, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			bank = filepath.Join(home, bank[2:])
		}
	}
	if !filepath.IsAbs(bank) && baseDir != "" {
		bank = filepath.Join(baseDir, bank)
	}
	return bank
}

// ResolveOptions says where model references point.
type ResolveOptions struct {
	Lookup  func(name string) (string, bool)
	BaseDir string
}

// Fingerprint hashes every asset the design pins: model files, runtime
// binaries and task banks. Registration records it; Freeze and CheckStale
// compare against it. A model whose design gives a sha256 that the file no
// longer has is already stale here.
func Fingerprint(ctx context.Context, d *Design, assets Assets, opts ResolveOptions) (AssetSet, error) {
	set, _, _, err := resolve(ctx, d, assets, opts)
	return set, err
}

func resolve(ctx context.Context, d *Design, assets Assets, opts ResolveOptions) (AssetSet, []FrozenArm, []FrozenBank, error) {
	set := AssetSet{}
	bins := map[string]Binary{}
	var arms []FrozenArm
	for i, a := range d.Arms {
		path, err := ModelPath(a.Model.File, opts.Lookup, opts.BaseDir)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("arms[%d].model.file: %w", i, err)
		}
		key := "model:" + path
		sum, ok := set[key]
		if !ok {
			if sum, err = assets.FileSHA256(ctx, path); err != nil {
				return nil, nil, nil, fmt.Errorf("arms[%d].model.file: hash %s: %w", i, path, err)
			}
			set[key] = sum
		}
		if a.Model.SHA256 != "" && a.Model.SHA256 != sum {
			return nil, nil, nil, fmt.Errorf("arms[%d].model.sha256: %w", i, &StaleAssetError{Asset: key, Want: a.Model.SHA256, Got: sum})
		}
		fa := FrozenArm{Name: a.Name, ModelPath: path, ModelSHA256: sum, Pins: a.Pins}
		for _, c := range ArmComponents(a) {
			if c == serverspec.Kind {
				// The arm's own server, not a provisioned component.
				b, err := serverBinary(ctx, a, assets, opts)
				if err != nil {
					return nil, nil, nil, fmt.Errorf("arms[%d].server: %w", i, err)
				}
				addServerAssets(set, a.Name, b)
				fa.Binaries = append(fa.Binaries, b)
				continue
			}
			b, ok := bins[c]
			if !ok {
				if b, err = assets.Binary(ctx, c); err != nil {
					return nil, nil, nil, fmt.Errorf("arms[%d].runtime: resolve %s: %w", i, c, err)
				}
				bins[c] = b
				set["runtime:"+c] = b.SHA256
			}
			fa.Binaries = append(fa.Binaries, b)
		}
		arms = append(arms, fa)
	}
	var banks []FrozenBank
	for i, jk := range d.JobKinds {
		// The bank is read where the design names it; the design keeps its
		// text as written, so its hash does not depend on where it lives.
		jk.TaskBank = BankPath(jk.TaskBank, opts.BaseDir)
		b, err := assets.Bank(ctx, jk)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("job_kinds[%d].task_bank: %s: %w", i, jk.TaskBank, err)
		}
		if len(b.Tasks) == 0 {
			return nil, nil, nil, fmt.Errorf("job_kinds[%d].task_bank: %s has no tasks (add tasks, or include_holdout if they are all hold-out)", i, jk.TaskBank)
		}
		if err := excluded(d, jk.Name, &b); err != nil {
			return nil, nil, nil, err
		}
		if err := checkGraders(i, jk, b); err != nil {
			return nil, nil, nil, err
		}
		set["bank:"+jk.Name] = b.SHA256
		banks = append(banks, FrozenBank{JobKind: jk.Name, Bank: b})
		for j, a := range d.Arms {
			if a.Format() == PromptCompletion && a.RunsJobKind(jk.Name) && !b.Completion {
				return nil, nil, nil, fmt.Errorf("arms[%d].prompt_format: %q, but job kind %s's task bank %s has no completion block in its header, so there is no few-shot prefix to send (add \"completion\": {\"few_shot_prefix\": …, \"answer_cue\": …} to the bank's first line, bump bank_version and audit it; docs/tasks.md), or give the arm an instruction-tuned model in the chat format",
					j, a.PromptFormat, jk.Name, jk.TaskBank)
			}
		}
	}
	return set, arms, banks, nil
}

// compareAssets returns the first asset, in key order, whose hash in now
// differs from want; an asset missing from now counts as changed.
func compareAssets(want, now AssetSet) error {
	keys := sortedKeys(want)
	for _, k := range keys {
		if now[k] != want[k] {
			return &StaleAssetError{Asset: k, Want: want[k], Got: orMissing(now[k])}
		}
	}
	return nil
}

func orMissing(s string) string {
	if s == "" {
		return "missing"
	}
	return s
}

// FreezeInput is what Freeze reads.
type FreezeInput struct {
	Design *Design
	// Registered is the AssetSet recorded at registration; an asset that
	// changed since is an ErrStaleAsset. Nil skips the comparison.
	Registered AssetSet
	// Validate is passed to Validate; its Quant reader checks every quant.
	Validate ValidateOptions
	// Open opens the licence registries recorded at registration, to hash
	// them as they are now; nil is os.Open. (Models and banks are read
	// through the Assets given.) The daemon's opens them with its caller's
	// rights.
	Open func(path string) (*os.File, error)
}

// Freeze validates the design, resolves every pin to a digest, validates
// every task through assets, and returns the content-addressed snapshot.
func Freeze(ctx context.Context, in FreezeInput, assets Assets) (*Snapshot, error) {
	if err := Validate(ctx, in.Design, in.Validate); err != nil {
		return nil, err
	}
	file := in.Validate.File
	if file == "" {
		file = "design.json"
	}
	set, arms, banks, err := resolve(ctx, in.Design, assets, ResolveOptions{Lookup: in.Validate.Lookup, BaseDir: in.Validate.BaseDir})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	open := in.Open
	if open == nil {
		open = os.Open
	}
	if err := addLicenceAssets(open, set, in.Registered); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if in.Registered != nil {
		if err := compareAssets(in.Registered, set); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	canon, err := Canonical(in.Design)
	if err != nil {
		return nil, err
	}
	dh, err := DesignHash(in.Design)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Version: SnapshotVersion, DesignHash: dh, Design: canon, Arms: arms, Banks: banks, Assets: set}
	if s.Hash, err = s.computeHash(); err != nil {
		return nil, err
	}
	return s, nil
}

// addLicenceAssets hashes, as they are now, the licence registries recorded at
// registration: the registry a study was checked against is fixed then, and
// the snapshot carries its hash like any other asset's.
func addLicenceAssets(open func(string) (*os.File, error), set, registered AssetSet) error {
	for _, k := range sortedKeys(registered) {
		if !strings.HasPrefix(k, licenceAssetPrefix) {
			continue
		}
		sum, err := licenceAssetSHA256(open, k)
		if err != nil {
			return fmt.Errorf("%w: %v", &StaleAssetError{Asset: k, Want: registered[k], Got: "unreadable"}, err)
		}
		set[k] = sum
	}
	return nil
}

func (s *Snapshot) computeHash() (string, error) {
	c := *s
	c.Hash = ""
	return Hash(&c)
}

// Verify recomputes the snapshot's hashes; a mismatch is ErrTampered.
func (s *Snapshot) Verify() error {
	var d Design
	if err := json.Unmarshal(s.Design, &d); err != nil {
		return fmt.Errorf("%w: design: %v", ErrTampered, err)
	}
	dh, err := DesignHash(&d)
	if err != nil {
		return err
	}
	if dh != s.DesignHash {
		return fmt.Errorf("%w: design hash %s, content hashes to %s", ErrTampered, Short(s.DesignHash), Short(dh))
	}
	h, err := s.computeHash()
	if err != nil {
		return err
	}
	if h != s.Hash {
		return fmt.Errorf("%w: snapshot hash %s, content hashes to %s", ErrTampered, Short(s.Hash), Short(h))
	}
	return nil
}

// DesignValue parses the frozen design, as every step after the freeze
// reads it (card studies expanded into their cells).
func (s *Snapshot) DesignValue() (*Design, error) {
	return ParseStoredDesign("snapshot.json", s.Design)
}

// Arm is the frozen arm of that name.
func (s *Snapshot) Arm(name string) (FrozenArm, bool) {
	for _, a := range s.Arms {
		if a.Name == name {
			return a, true
		}
	}
	return FrozenArm{}, false
}

// Tasks returns each job kind's frozen task ids.
func (s *Snapshot) Tasks() map[string][]string {
	out := make(map[string][]string, len(s.Banks))
	for _, b := range s.Banks {
		out[b.JobKind] = b.Tasks
	}
	return out
}

// CheckStale re-hashes every asset the snapshot pinned, before a run
// starts, and returns a *StaleAssetError for the first that changed.
func CheckStale(ctx context.Context, s *Snapshot, assets Assets) error {
	now := AssetSet{}
	var errs []string
	for _, k := range sortedKeys(s.Assets) {
		kind, name, _ := strings.Cut(k, ":")
		var sum string
		var err error
		switch kind {
		case "model":
			sum, err = assets.FileSHA256(ctx, name)
		case "runtime":
			var b Binary
			b, err = assets.Binary(ctx, name)
			sum = b.SHA256
		case "server", "server-env":
			sum, err = s.serverAssetSHA256(ctx, kind, name, assets)
		case "licences":
			sum, err = licenceAssetSHA256(os.Open, k)
		case "bank":
			d, derr := s.DesignValue()
			if derr != nil {
				return derr
			}
			var b Bank
			for _, jk := range d.JobKinds {
				if jk.Name != name {
					continue
				}
				for _, fb := range s.Banks {
					if fb.JobKind == name {
						jk.TaskBank = fb.Path // where the freeze read it
					}
				}
				b, err = assets.Bank(ctx, jk)
			}
			sum = b.SHA256
		}
		if err != nil {
			// An asset that cannot be read any more has changed as far as a
			// frozen study can tell; say why.
			errs = append(errs, fmt.Sprintf("%s: %v", k, err))
			continue
		}
		now[k] = sum
	}
	if err := compareAssets(s.Assets, now); err != nil {
		if len(errs) > 0 {
			return fmt.Errorf("%w (%s)", err, strings.Join(errs, "; "))
		}
		return err
	}
	return nil
}

// Keys returns the asset keys in sorted order, for printing.
func (a AssetSet) Keys() []string { return sortedKeys(a) }
