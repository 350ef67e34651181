package governor

import (
	"os"
	"path/filepath"
)

// DefaultStateDir is where the governor keeps its heartbeat and the fault
// suite its dated records: ~/.local/state/rig/governor. The counted-run gate
// reads the same directory.
func DefaultStateDir() string {
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "rig", "governor")
}
