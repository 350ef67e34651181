package studies

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rig/licences"
)

// LicenceRegistryEnv names the studio's licence registry for designs that
// name none and commands given no --registry. It is read by the rig command
// the user types; `rig study register` sends it to the daemon, so the daemon's
// own environment never decides.
const LicenceRegistryEnv = "RIG_LICENCE_REGISTRY"

// LicenceRegistryChoice is the registry file a design is checked against and
// what chose it.
type LicenceRegistryChoice struct {
	// Path is the studio's registry file, absolute; empty means the bundled
	// registry alone.
	Path string
	// From says what chose Path, for messages: "--registry",
	// "DESIGN: licence_registry", "$RIG_LICENCE_REGISTRY" or "bundled".
	From string
}

// ChooseLicenceRegistry picks the studio registry a design is checked against:
// flag (--registry), else the design's licence_registry (relative to the
// design file's folder, ${NAME} expanded like model files), else configured
// ($RIG_LICENCE_REGISTRY), else the bundled registry alone. Both `rig licences
// check` and `rig study register` call it, so a check that passes is the check
// register runs. Relative flag and configured paths are made absolute against
// the working directory of the process that calls it.
func ChooseLicenceRegistry(flag string, d *Design, designFile, configured string, lookup func(string) (string, bool)) (LicenceRegistryChoice, error) {
	abs := func(p, from string) (LicenceRegistryChoice, error) {
		a, err := filepath.Abs(p)
		if err != nil {
			return LicenceRegistryChoice{}, fmt.Errorf("%s: %w", from, err)
		}
		return LicenceRegistryChoice{Path: a, From: from}, nil
	}
	if strings.TrimSpace(flag) != "" {
		return abs(flag, "--registry")
	}
	if d != nil && strings.TrimSpace(d.LicenceRegistry) != "" {
		from := cmp.Or(designFile, "design.json") + ": licence_registry"
		p, err := ModelPath(d.LicenceRegistry, lookup, filepath.Dir(designFile))
		if err != nil {
			return LicenceRegistryChoice{}, fmt.Errorf("%s: %w", from, err)
		}
		return abs(p, from)
	}
	if strings.TrimSpace(configured) != "" {
		return abs(configured, "$"+LicenceRegistryEnv)
	}
	return LicenceRegistryChoice{From: "bundled"}, nil
}

// StudyLicences checks a design's items against its chosen registry and says
// what to record of it.
type StudyLicences struct {
	Choice LicenceRegistryChoice
	Set    *licences.Set
}

// OpenLicences reads the chosen registry over the bundled one. A registry
// that cannot be read or parsed is an error naming the file and what chose it.
func OpenLicences(c LicenceRegistryChoice) (*StudyLicences, error) {
	return OpenLicencesWith(os.Open, c)
}

// OpenLicencesWith is OpenLicences opening the registry file with open (the
// daemon's opens it with the caller's rights; licences.OpenSetWith).
func OpenLicencesWith(open func(string) (*os.File, error), c LicenceRegistryChoice) (*StudyLicences, error) {
	set, err := licences.OpenSetWith(open, c.Path)
	if err != nil {
		if c.Path != "" {
			return nil, fmt.Errorf("%s: %w", c.From, err)
		}
		return nil, err
	}
	return &StudyLicences{Choice: c, Set: set}, nil
}

// Result rules on every item.
func (s *StudyLicences) Result(items []Item) licences.Result {
	return s.Set.Check(licenceItems(items))
}

// Check is the register gate: nil error when every item may be put to its
// use, and the record of which registry files the verdicts came from.
func (s *StudyLicences) Check(ctx context.Context, items []Item) (LicenceRecord, error) {
	if err := ctx.Err(); err != nil {
		return LicenceRecord{}, err
	}
	res := s.Result(items)
	if err := res.Err(); err != nil {
		return LicenceRecord{}, err
	}
	return s.record(res), nil
}

func (s *StudyLicences) record(res licences.Result) LicenceRecord {
	rec := LicenceRecord{Registry: s.Choice.Path, From: s.Choice.From, SHA256: s.Set.StudioSHA256}
	if res.UsedBundled() {
		rec.BundledSHA256 = licences.BundledSHA256()
	}
	return rec
}

// Describe names the registry in a line for people, e.g.
// "licence registry: /studio/registry.json (--registry) over licences/registry.json (bundled with rig)".
func (s *StudyLicences) Describe() string {
	if s.Choice.Path == "" {
		return "licence registry: " + licences.BundledFile
	}
	return fmt.Sprintf("licence registry: %s (%s) over %s", s.Choice.Path, s.Choice.From, licences.BundledFile)
}

func licenceItems(items []Item) []licences.Item {
	li := make([]licences.Item, 0, len(items))
	for _, it := range items {
		li = append(li, licences.Item{Role: licences.Role(it.Role), Name: it.Name, RegistryID: it.RegistryID, Use: licences.Use(it.Use)})
	}
	return li
}

// LicenceRecord is what a registration keeps of the registry its items were
// checked against, so status, freeze and every run use that same registry.
type LicenceRecord struct {
	// Registry is the studio's registry file, absolute; empty when the
	// bundled registry alone was used.
	Registry string `json:"registry,omitempty"`
	From     string `json:"from,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	// BundledSHA256 is set when any item's entry came from the bundled
	// registry: a rig rebuilt with other bundled terms then changes an
	// asset of the study.
	BundledSHA256 string `json:"bundled_sha256,omitempty"`
}

// Asset keys of licence registries in an AssetSet: licenceAssetPrefix+PATH for
// a studio file, bundledLicenceAsset for the bundled registry.
const (
	licenceAssetPrefix  = "licences:"
	bundledLicenceAsset = licenceAssetPrefix + "bundled"
)

// Assets are the record's entries in the study's AssetSet, the form freeze
// compares and the snapshot hashes.
func (r LicenceRecord) Assets() AssetSet {
	set := AssetSet{}
	if r.Registry != "" {
		set[licenceAssetPrefix+r.Registry] = r.SHA256
	}
	if r.BundledSHA256 != "" {
		set[bundledLicenceAsset] = r.BundledSHA256
	}
	return set
}

// licenceAssetSHA256 hashes a licence registry asset as it is now, opening
// the file with open.
func licenceAssetSHA256(open func(string) (*os.File, error), key string) (string, error) {
	if key == bundledLicenceAsset {
		return licences.BundledSHA256(), nil
	}
	return licences.FileSHA256With(open, strings.TrimPrefix(key, licenceAssetPrefix))
}

// LicenceLinesFor renders the items' verdict lines against the study's
// recorded registry, each naming the registry file its entry came from. A
// study registered before registries were recorded has a zero record: the
// bundled registry alone.
func LicenceLinesFor(items []Item, rec LicenceRecord) ([]string, error) {
	res, err := LicenceResultFor(items, rec)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range res.Lines {
		out = append(out, l.Sourced())
	}
	return out, res.Err()
}

// LicenceResultFor rules on the items against the study's recorded
// registry, as LicenceLinesFor does, and gives the lines as values: a
// reader that needs an item's use or verdict takes them from the line
// instead of parsing its text. A registry that cannot be read is the error;
// items the registry blocks are in the result's Blocks.
func LicenceResultFor(items []Item, rec LicenceRecord) (licences.Result, error) {
	sl, err := OpenLicences(LicenceRegistryChoice{Path: rec.Registry, From: cmp.Or(rec.From, "the study's registration")})
	if err != nil {
		return licences.Result{}, err
	}
	return sl.Result(items), nil
}
