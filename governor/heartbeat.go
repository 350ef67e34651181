package governor

import (
	"fmt"
	"os"
	"strings"
	"time"

	"rig/internal/atomicfile"
)

// WriteHeartbeat stores t in path atomically (write, fsync, rename), so a
// reader never sees a torn time.
func WriteHeartbeat(path string, t time.Time) error {
	return writeFileAtomic(path, []byte(t.UTC().Format(time.RFC3339Nano)+"\n"))
}

// ReadHeartbeat returns the time stored by WriteHeartbeat.
func ReadHeartbeat(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: not a heartbeat time: %w", path, err)
	}
	return t, nil
}

// CheckHeartbeat returns a *StaleError unless the heartbeat at path is at
// most three intervals old: the gate counted runs pass before they start.
func CheckHeartbeat(path string, interval time.Duration, now time.Time) error {
	t, err := ReadHeartbeat(path)
	// Whichever process hosts the runner (the daemon, or a worker) starts
	// the governor that writes it.
	fix := "start the process whose governor writes this heartbeat (the rig daemon, or the rig worker it belongs to) and check its log"
	if err != nil {
		if os.IsNotExist(err) {
			return &StaleError{What: "governor heartbeat " + path, Max: 3 * interval, Fix: fix}
		}
		return err
	}
	if now.Sub(t) > 3*interval {
		return &StaleError{What: "governor heartbeat " + path, Last: t, Max: 3 * interval, Fix: fix}
	}
	return nil
}

// writeFileAtomic writes through internal/atomicfile, so a crash or a full
// disk leaves either the old file or the new one, never a half-written one.
func writeFileAtomic(path string, data []byte) error {
	return atomicfile.WriteBytes(path, data, 0o600)
}
