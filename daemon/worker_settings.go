package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"rig/governor"
)

// WorkerSettings are what a worker runs with once its options and the
// environment are resolved. RunWorker runs with exactly these, and
// `rig worker --dry-run` prints them, so that a deploy file can be checked
// for where its worker will look without starting one.
type WorkerSettings struct {
	ID string
	// Card is the NVML index of the card the worker's governor watches and
	// its queues name (nvidia-smi's order), one worker per card.
	Card int
	// Home is RIG_HOME; the worker works under WorkDir, Home/worker/ID.
	Home, WorkDir string
	// StateDir is the governor's state folder ($RIG_STATE_DIR/governor):
	// the fault suite's pass is read there, and the worker's own heartbeat
	// written there.
	StateDir, Heartbeat string
	InstalledEnv        string
	Engine              EngineConfig
}

// Settings resolves o: the default id (HOST-PID) and the paths derived
// from the home and the governor's state folder.
func (o WorkerOptions) Settings() WorkerSettings {
	id := o.ID
	if id == "" {
		h, _ := os.Hostname()
		id = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	state := governor.DefaultStateDir()
	return WorkerSettings{ID: id, Card: o.Card, Home: o.Home, WorkDir: filepath.Join(o.Home, "worker", id),
		StateDir: state,
		// Each worker's own heartbeat: several on one machine never vouch for each other.
		Heartbeat:    filepath.Join(state, "heartbeat-worker-"+id),
		InstalledEnv: o.InstalledEnv, Engine: o.Engine}
}

// Print writes s one "name: value" line each, then the fault-suite pass the
// worker's gate would find now (its time, or why there is none), so that a
// worker that would sit idle says so before it is deployed.
func (s WorkerSettings) Print(w io.Writer, now time.Time) {
	fmt.Fprintf(w, "id: %s\n", s.ID)
	fmt.Fprintf(w, "card: %d\n", s.Card)
	fmt.Fprintf(w, "cuda visible devices: %s\n", os.Getenv("CUDA_VISIBLE_DEVICES"))
	fmt.Fprintf(w, "home: %s\n", s.Home)
	fmt.Fprintf(w, "work dir: %s\n", s.WorkDir)
	fmt.Fprintf(w, "installed env: %s\n", s.InstalledEnv)
	fmt.Fprintf(w, "temporal: %s\n", s.Engine.Address)
	fmt.Fprintf(w, "namespace: %s\n", s.Engine.Namespace)
	fmt.Fprintf(w, "spool: %s\n", s.Engine.Spool)
	fmt.Fprintf(w, "governor state: %s\n", s.StateDir)
	fmt.Fprintf(w, "heartbeat: %s\n", s.Heartbeat)
	fresh := governor.CheckFresh(s.StateDir, governor.DefaultPassMaxAge, now)
	r, err := governor.LastPass(s.StateDir)
	switch {
	case err != nil:
		fmt.Fprintf(w, "fault-suite pass: none (%v)\n", err)
	case fresh != nil:
		var st *governor.StaleError
		if errors.As(fresh, &st) {
			fmt.Fprintf(w, "fault-suite pass: stale, %s (%v)\n", r.At.UTC().Format(time.RFC3339), fresh)
		} else {
			fmt.Fprintf(w, "fault-suite pass: unreadable (%v)\n", fresh)
		}
	default:
		fmt.Fprintf(w, "fault-suite pass: fresh, %s on %s\n", r.At.UTC().Format(time.RFC3339), r.Host)
	}
}
