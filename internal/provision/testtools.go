package provision

import (
	_ "embed"
	"fmt"
	"path/filepath"
	"strings"
)

//go:embed test-tools.env
var testToolPinsFile string

// TestToolPins returns the pinned versions and sha256 of the outside tools
// only tests use (internal/provision/test-tools.env).
func TestToolPins() map[string]string {
	pins, err := parseEnv(strings.NewReader(testToolPinsFile), "internal/provision/test-tools.env")
	if err != nil {
		panic(err.Error())
	}
	return pins
}

// TestToolsPath is the test-tools.env that scripts/setup-test-tools.sh
// writes into CacheDir.
func TestToolsPath() string { return filepath.Join(CacheDir(), "test-tools.env") }

// TestTool is the value scripts/setup-test-tools.sh recorded for key (a
// tool's path, or its environment's folder). An error wrapping
// ErrNotProvisioned says the tool is not there and how to get it, for
// testenv.NeedsSetup.
func TestTool(key string) (string, error) {
	kv, err := readEnvFile(TestToolsPath())
	if err != nil {
		return "", fmt.Errorf("%w (tools only tests use: make test, or scripts/setup-test-tools.sh)", err)
	}
	v := kv[key]
	if v == "" {
		return "", fmt.Errorf("%s names no %s: %w (run scripts/setup-test-tools.sh)", TestToolsPath(), key, ErrNotProvisioned)
	}
	return v, nil
}
