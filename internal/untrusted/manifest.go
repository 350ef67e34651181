package untrusted

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"sort"
)

// Manifest is a tree as a walk saw it: slash-separated relative path → entry
// and digest. rig takes one of a repository it made before contained code
// runs in it and one after, and compares them, instead of asking a program
// (git) that would read the tree's own configuration.
type Manifest map[string]Record

// Record is one entry of a Manifest.
type Record struct {
	Entry
	SHA256 string // a file's content; empty for the rest
}

// Snapshot walks root into a Manifest within lim. skip, when set, leaves out
// an entry (a skipped folder with all it holds).
func Snapshot(root string, lim Limits, skip func(rel string, e Entry) bool) (Manifest, error) {
	m := Manifest{}
	err := Walk(root, lim, func(rel string, e Entry, r io.Reader) error {
		if skip != nil && skip(rel, e) {
			if e.Kind == Dir {
				return fs.SkipDir
			}
			return nil
		}
		rec := Record{Entry: e}
		if r != nil {
			h := sha256.New()
			if _, err := io.Copy(h, r); err != nil {
				return err
			}
			rec.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		m[rel] = rec
		return nil
	})
	return m, err
}

// Changed lists, sorted, what after holds that before did not or holds
// differently (content, permissions, kind, a link's text): new and altered
// files, links and other entries, the way `git ls-files -m -o` lists a work
// tree's changes. Folders are not listed (what they hold is), nor is what
// was removed.
func (before Manifest) Changed(after Manifest) []string {
	var out []string
	for p, rec := range after {
		if rec.Kind == Dir {
			continue
		}
		if was, ok := before[p]; !ok || was != rec {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
