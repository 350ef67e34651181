package licences

import "os"

// Set is the registry a design is checked against: the studio's own registry
// file, when it keeps one, layered over the registry bundled with rig.
//
// The studio's file is the record people add to after reading terms at the
// source; it need not repeat the bundled entries, so the bundled models and
// runtimes keep working under a studio file that lacks them. An id in both is
// ruled on by the studio's entry: the studio may have read terms the bundled
// reading predates.
type Set struct {
	// Studio is the studio's registry; nil when the design uses the bundled
	// one alone.
	Studio *Registry
	// StudioSHA256 is the hash of the studio file's bytes that were parsed.
	StudioSHA256 string
	Bundled      *Registry
}

// OpenSet reads the studio registry at studioPath over the bundled one; an
// empty studioPath gives the bundled registry alone.
func OpenSet(studioPath string) (*Set, error) { return OpenSetWith(os.Open, studioPath) }

// OpenSetWith is OpenSet opening the studio's file with open: a service
// reading it on someone's behalf passes an open that has their rights, and
// parses and hashes the very file it opened (peerfile.OpenAny).
func OpenSetWith(open func(string) (*os.File, error), studioPath string) (*Set, error) {
	bundled, err := Bundled()
	if err != nil {
		return nil, err
	}
	s := &Set{Bundled: bundled}
	if studioPath == "" {
		return s, nil
	}
	if s.Studio, s.StudioSHA256, err = loadRegistry(open, studioPath); err != nil {
		return nil, err
	}
	return s, nil
}

// Find returns the entry for id and the registry it came from.
func (s *Set) Find(id string) (Entry, *Registry, bool) {
	for _, r := range []*Registry{s.Studio, s.Bundled} {
		if r == nil {
			continue
		}
		if e, ok := r.Lookup(id); ok {
			return e, r, true
		}
	}
	return Entry{}, nil, false
}

// Files names the registries consulted, studio first, for messages.
func (s *Set) Files() string {
	switch {
	case s.Studio != nil && s.Bundled != nil:
		return s.Studio.File + " or " + s.Bundled.File
	case s.Studio != nil:
		return s.Studio.File
	case s.Bundled != nil:
		return s.Bundled.File
	}
	return "no licence registry"
}

// addTo says where a new or corrected entry goes. Only a studio file can be
// edited: the bundled registry is inside the rig binary, and a newcomer should
// not have to rebuild rig to record terms they have read.
func (s *Set) addTo() string {
	if s.Studio != nil && s.Studio.File != BundledFile {
		return s.Studio.File
	}
	return `a studio licence registry (a file {"schema_version": 1, "entries": [...]} with only the studio's entries; the bundled ones still apply) ` +
		`named by --registry FILE, licence_registry in the design, or $RIG_LICENCE_REGISTRY`
}

// Check rules on every item against the set; see the package function Check.
func (s *Set) Check(items []Item) Result {
	var res Result
	for _, it := range items {
		line, block := checkOne(s, it)
		if block != nil {
			res.Blocks = append(res.Blocks, *block)
			continue
		}
		res.Lines = append(res.Lines, line)
	}
	return res
}

// UsedBundled reports whether any passing line's entry came from the bundled
// registry, the case in which its hash belongs in a study's record.
func (r Result) UsedBundled() bool {
	for _, l := range r.Lines {
		if l.Registry == BundledFile {
			return true
		}
	}
	return false
}
