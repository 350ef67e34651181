package ollamalib

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ollama/ollama/types/model"
)

// Entry is one tag of the library: the model it resolves to, or why a
// design cannot name it.
type Entry struct {
	Tag     string `json:"tag"`
	Model   *Model `json:"model,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// List is every tag in the library, sorted by name. A library folder that
// does not exist is an empty list: the caller has pulled nothing.
func (l Library) List() ([]Entry, error) {
	root := filepath.Join(l.Dir, "manifests")
	var out []Entry
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return fs.SkipAll
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		n := model.ParseNameFromFilepath(rel)
		if !n.IsFullyQualified() {
			return nil // not a manifest (four folders deep: host/namespace/model/tag)
		}
		e := Entry{Tag: display(n)}
		if m, err := l.read(e.Tag, path); err != nil {
			e.Refused = strings.TrimPrefix(err.Error(), path+": ")
		} else {
			e.Model = &m
		}
		out = append(out, e)
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tag < out[j].Tag })
	return out, nil
}
