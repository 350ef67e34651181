package studies

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadDesign reads, parses and validates a design file. Relative model
// paths resolve against the file's folder; opts.File defaults to path.
func LoadDesign(ctx context.Context, path string, opts ValidateOptions) (*Design, error) {
	data, err := os.ReadFile(path)
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

// EnvFileLookup returns a Lookup that reads KEY=VALUE lines (an optional
// "export " prefix, '#' comments, quotes stripped) from an env file such as
// ~/.cache/rig/installed.env, falling back to the process environment.
func EnvFileLookup(path string) (func(string) (string, bool), error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		if !ok || !refRE.MatchString("${"+strings.TrimSpace(k)+"}") {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE", path, n)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		vals[strings.TrimSpace(k)] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return func(k string) (string, bool) {
		if v, ok := vals[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	}, nil
}
