// Package atomicfile is rig's one way to write a file that a crash, a kill or
// a full disk never leaves half-written: the content goes to a temporary file
// in the same directory, is synced, and is renamed over the old one, so a
// reader sees the old file or the new one. It is not a store: records that
// grow (receipts, generation rows) live in receipts and genrecord.
package atomicfile

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
)

// Write writes path through write; on any error the old file is left as it
// was and the temporary file is removed. mode is the new file's permission.
func Write(path string, mode os.FileMode, write func(w io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// WriteBytes writes data to path.
func WriteBytes(path string, data []byte, mode os.FileMode) error {
	return Write(path, mode, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteJSON writes v to path as indented JSON ending in a newline.
func WriteJSON(path string, v any, mode os.FileMode) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteBytes(path, append(b, '\n'), mode)
}

// ReadJSON decodes the JSON file at path into v.
func ReadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
