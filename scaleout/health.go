package scaleout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"rig/internal/atomicfile"
	"rig/internal/serverspec"
	"rig/runtimes"
	"rig/studies"
)

// A worker checks itself before it polls, and stops polling while any check
// fails: a worker that cannot run a trial would otherwise take it, refuse
// it, and take the next, catching most trials of its queues (up to 120
// bounces a trial) while healthy workers idle. What fails is said in its
// log (at start and every minute) and on /healthz.

// Failed is one check a worker fails now, and why.
type Failed struct {
	Check string // governor, snapshot, model, runtime build, start
	Why   string
}

// NotReadyError is a worker that does not poll: every check it fails.
type NotReadyError struct {
	Worker string
	Failed []Failed
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker %s takes no trials:", e.Worker)
	for i, f := range e.Failed {
		if i > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s not ready: %s", f.Check, f.Why)
	}
	return b.String()
}

// Ready is nil while the worker polls, else a *NotReadyError naming each
// check it fails (what /healthz says). It reads what the worker's last
// check found, so a scrape never waits on the checks.
func (w *Worker) Ready(context.Context) error {
	w.healthMu.Lock()
	defer w.healthMu.Unlock()
	if len(w.failed) == 0 {
		return nil
	}
	return &NotReadyError{Worker: w.opts.ID, Failed: slices.Clone(w.failed)}
}

// check runs the worker's checks: its governor, the snapshot of the study
// it was started for and that study's models, the models trials named that
// were not here (found again once they are), and that some queue is still
// served by this machine's builds.
func (w *Worker) check(ctx context.Context) []Failed {
	var out []Failed
	if err := w.opts.Gates.Ready(ctx); err != nil {
		out = append(out, Failed{Check: "governor", Why: err.Error()})
	}
	if w.opts.Study != "" {
		// The snapshot is read from the shared spool: every 30 s, not at
		// each look, so that a fleet does not load the file server.
		if w.studyAt.IsZero() || time.Since(w.studyAt) >= 30*time.Second {
			w.studyFailed, w.studyAt = w.checkStudy(), time.Now()
		}
		out = append(out, w.studyFailed...)
	}
	w.healthMu.Lock()
	missing := make(map[string]string, len(w.missing))
	for sum, snapPath := range w.missing {
		missing[sum] = snapPath
	}
	w.healthMu.Unlock()
	for _, sum := range sortedKeys(missing) {
		if _, err := w.localModel(sum, missing[sum]); err != nil {
			out = append(out, Failed{Check: "model", Why: err.Error()})
			continue
		}
		w.healthMu.Lock()
		delete(w.missing, sum)
		w.healthMu.Unlock()
		w.log.Info("model found again", "worker", w.opts.ID, "sha256", sum)
	}
	w.pollMu.Lock()
	served := 0
	for _, q := range w.opts.Queues {
		if _, ok := w.refused[q]; !ok {
			served++
		}
	}
	w.pollMu.Unlock()
	if served == 0 {
		out = append(out, Failed{Check: "runtime build", Why: fmt.Sprintf("none of the queues %v is served by this machine's runtime builds (rebuild with make setup, or serve this machine's own queues: drop --queue)", w.opts.Queues)})
	}
	return out
}

// checkStudy: the snapshot of the study the worker was started for is
// still reachable, and every arm's model is here.
func (w *Worker) checkStudy() []Failed {
	x, err := execSpool(w.opts.Config.Spool, w.opts.Study, w.opts.Execution)
	if err != nil {
		return []Failed{{Check: "snapshot", Why: err.Error()}}
	}
	var snap studies.Snapshot
	if err := atomicfile.ReadJSON(x.Snapshot(), &snap); err != nil {
		return []Failed{{Check: "snapshot", Why: (&NoSnapshotError{Study: w.opts.Study, Execution: w.opts.Execution, Path: x.Snapshot(), Err: err}).Error()}}
	}
	// The study's arms' slots, advertised before its first trial here.
	w.knowDesign(&snap)
	var out []Failed
	for _, a := range snap.Arms {
		if a.ModelSHA256 == "" {
			continue
		}
		if _, err := w.localModel(a.ModelSHA256, a.ModelPath); err != nil {
			out = append(out, Failed{Check: "model", Why: fmt.Sprintf("arm %s: %v", a.Name, err)})
		}
	}
	return out
}

// ModelMissingError is a model a trial needs that this worker does not
// have, by content.
type ModelMissingError struct {
	SHA256        string
	Cache, Models string // where it was looked for
	SnapshotPath  string // the coordinator's path, also looked at
	InstalledEnv  string
}

func (e *ModelMissingError) Error() string {
	models := "no shared models folder (--models)"
	if e.Models != "" {
		models = "not in the shared models folder " + e.Models + " (as SHA256, SHA256.gguf or sha256-SHA256)"
	}
	snap := "the trial's snapshot names no path here"
	if e.SnapshotPath != "" {
		snap = "not at the snapshot's " + e.SnapshotPath
	}
	return fmt.Sprintf("sha256 %s is not on this worker: not provisioned in %s (%s), %s, %s; provision it (make setup) or put the file in the models folder named by its sha256",
		e.SHA256, e.Cache, e.InstalledEnv, models, snap)
}

// localModel is this worker's file of the model with content sum: a
// provisioned one (the cache's installed.env pins its sha256), else one in
// the shared models folder named by its sha256, else the snapshot's path
// when the same file is reachable here. Never hashed here: the runtime
// verifies the file against the pinned sha256 before it loads it.
func (w *Worker) localModel(sum, snapPath string) (string, error) {
	if m, ok := w.opts.Installed.ModelBySHA256(sum); ok {
		if _, err := os.Stat(m.Path); err == nil {
			return m.Path, nil
		}
	}
	if dir := w.opts.ModelsDir; dir != "" {
		for _, name := range []string{sum, sum + ".gguf", "sha256-" + sum} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	if snapPath != "" {
		if st, err := os.Stat(snapPath); err == nil && st.Mode().IsRegular() {
			return snapPath, nil
		}
	}
	return "", &ModelMissingError{SHA256: sum, Cache: w.opts.Installed.Cache, InstalledEnv: w.opts.Installed.File,
		Models: w.opts.ModelsDir, SnapshotPath: snapPath}
}

// trialModel finds the model a trial names. The snapshot's path is looked
// at only after the worker's own copies (and the snapshot read only then). A model not found is remembered: the worker stops
// polling until it is.
func (w *Worker) trialModel(in TrialInput) (string, error) {
	if in.ModelSHA256 == "" {
		return "", nil
	}
	if p, err := w.localModel(in.ModelSHA256, ""); err == nil {
		return p, nil
	}
	snapPath := ""
	if snap, _, err := readPublished(w.opts.Config.Spool, in.Study, in.Execution, in.DesignHash); err == nil {
		if fa, ok := snap.Arm(mustArm(in.Key)); ok {
			snapPath = fa.ModelPath
		}
	}
	p, err := w.localModel(in.ModelSHA256, snapPath)
	if err != nil {
		w.healthMu.Lock()
		w.missing[in.ModelSHA256] = snapPath
		w.healthMu.Unlock()
	}
	return p, err
}

// checkBuilds refuses, at start, the queues (named by hand with --queue)
// whose runtime build is not this machine's: trials from them would only
// be refused one by one.
func (w *Worker) checkBuilds() {
	for _, q := range w.opts.Queues {
		kind, build, ok := parseQueue(q)
		if !ok || kind == serverspec.Kind {
			// A site's own queue name, or a generic server's (known only
			// from a snapshot): each trial is still checked.
			continue
		}
		b, err := runtimes.BuildOf(w.opts.Installed, kind)
		switch {
		case err != nil:
			w.refused[q] = fmt.Sprintf("the queue needs %s, which is not provisioned here: %v", kind, err)
		case !strings.HasPrefix(b.BinarySHA256, build):
			w.refused[q] = fmt.Sprintf("the queue needs %s built as %s…; this worker's build is %s", kind, build, b.BinarySHA256)
		default:
			continue
		}
		w.log.Error("refuses the queue at start and does not serve it", "worker", w.opts.ID, "queue", q, "why", w.refused[q])
	}
}

// parseQueue reads Queue's form back: runtime kind and build prefix.
func parseQueue(q string) (kind, build string, ok bool) {
	rest, found := strings.CutPrefix(q, "rig.trials.")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 3 {
		return "", "", false
	}
	return strings.Join(parts[:len(parts)-2], "."), parts[len(parts)-2], true
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
