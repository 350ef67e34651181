package governor

import (
	"os"
	"path/filepath"
)

// StateDirEnv names rig's state folder on this machine. The governor's part
// of it, its heartbeats and the fault suite's dated records, is the
// "governor" folder inside; the counted-run gate reads the same folder. The
// deploy files (systemd, Slurm, Kubernetes) set it so that the nightly suite
// and every worker on a machine meet at one place: a system service has no
// $HOME to fall back on.
const StateDirEnv = "RIG_STATE_DIR"

// DefaultStateDir is where the governor keeps its heartbeat and the fault
// suite its dated records: $RIG_STATE_DIR/governor, else
// ~/.local/state/rig/governor.
func DefaultStateDir() string {
	if d := os.Getenv(StateDirEnv); d != "" {
		return filepath.Join(d, "governor")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "state", "rig", "governor")
}
