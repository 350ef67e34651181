package provision

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// varName is what a ${NAME} reference may name, so every variable the file
// defines can be referred to.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// readEnvFile reads an env file, naming it in every error.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s is missing: %w", path, ErrNotProvisioned)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseEnv(f, path)
}

// parseEnv reads KEY=VALUE lines, the subset of bash that scripts/setup.sh
// writes and a person might add: blank lines, # comments, an optional
// "export " prefix, a value in matching single or double quotes.
func parseEnv(r io.Reader, name string) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimSpace(strings.TrimPrefix(line, "export "))
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !varName.MatchString(k) {
			return nil, fmt.Errorf("%s:%d: %q is not KEY=VALUE (fix the line, or run make setup to rewrite the file)", name, n, line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// Lookup answers a design's ${NAME}: the process environment first, then
// installed.env (Path). Without an installed.env only the environment
// answers; a malformed one is an error naming its line.
func Lookup() (func(string) (string, bool), error) { return LookupFile(Path()) }

// LookupFile is Lookup reading the env file at path instead.
func LookupFile(path string) (func(string) (string, bool), error) {
	kv, err := readEnvFile(path)
	if errors.Is(err, ErrNotProvisioned) {
		return os.LookupEnv, nil
	}
	if err != nil {
		return nil, err
	}
	return func(k string) (string, bool) {
		if v, ok := os.LookupEnv(k); ok {
			return v, true
		}
		v, ok := kv[k]
		return v, ok
	}, nil
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}
