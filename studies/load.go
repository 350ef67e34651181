package studies

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadDesign reads, parses and validates a design file. Relative model
// paths resolve against the file's folder; opts.File defaults to path.
func LoadDesign(ctx context.Context, path string, opts ValidateOptions) (*Design, error) {
	data, err := ReadDesignFile(path)
	if err != nil {
		return nil, fmt.Errorf("read design: %w", err)
	}
	if opts.File == "" {
		opts.File = path
	}
	if opts.BaseDir == "" {
		opts.BaseDir = filepath.Dir(path)
	}
	d, err := ParseDesign(opts.File, data)
	if err != nil {
		return nil, err
	}
	if err := Validate(ctx, d, opts); err != nil {
		return nil, err
	}
	return d, nil
}

// InitDesign writes the commented example design to path for `rig study
// init`, refusing to overwrite an existing file.
func InitDesign(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists already (edit it, or give another path)", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(ExampleDesign()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
