package scaleout

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/atomicfile"
	"rig/internal/provision"
	"rig/studies"
)

// A worker started for a study checks, before it polls, that the study's
// snapshot is still in the spool and that every arm's model is here by its
// sha256: the coordinator's path (/home/x/models/…) is not this machine's,
// and the worker's own copy in the shared models folder is used instead.
func TestStudyWorkerFindsModelsByContentNotByTheCoordinatorsPath(t *testing.T) {
	spool, models := t.TempDir(), t.TempDir()
	sum := strings.Repeat("5", 64)
	coordPath := "/home/x/models/m.gguf"
	x, err := execSpool(spool, "s", "exec-1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(x.Snapshot()), 0o755); err != nil {
		t.Fatal(err)
	}
	snap := studies.Snapshot{Arms: []studies.FrozenArm{{Name: "a", ModelPath: coordPath, ModelSHA256: sum}}}
	if err := atomicfile.WriteJSON(x.Snapshot(), snap, 0o644); err != nil {
		t.Fatal(err)
	}
	w := &Worker{opts: WorkerOptions{ID: "w", Config: Config{Spool: spool}, Gates: fakeReadyGates{}, Study: "s", Execution: "exec-1",
		Installed: provision.Installed{Cache: "/nowhere", File: "/nowhere/installed.env"}, ModelsDir: models, Queues: []string{"q"}},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), refused: map[string]string{}, missing: map[string]string{}}

	failed := w.check(context.Background())
	if len(failed) != 1 || failed[0].Check != "model" || !strings.Contains(failed[0].Why, sum) || !strings.Contains(failed[0].Why, models) {
		t.Fatalf("a study whose model is not here: %+v; want one model check naming %s and the folder %s", failed, sum, models)
	}
	mine := filepath.Join(models, sum+".gguf")
	if err := os.WriteFile(mine, []byte("gguf"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.studyAt = time.Time{} // the next look reads the spool again (every 30 s in Run)
	if failed := w.check(context.Background()); len(failed) != 0 {
		t.Fatalf("with the model in the models folder: %+v", failed)
	}
	if p, err := w.localModel(sum, coordPath); err != nil || p != mine {
		t.Errorf("the model of sha256 %s: %q, %v; want this worker's %s", sum, p, err, mine)
	}

	if err := os.Remove(x.Snapshot()); err != nil {
		t.Fatal(err)
	}
	w.studyAt = time.Time{}
	failed = w.check(context.Background())
	if len(failed) != 1 || failed[0].Check != "snapshot" || !strings.Contains(failed[0].Why, "no snapshot of study s") {
		t.Fatalf("the study's snapshot gone: %+v", failed)
	}
	w.failed = failed
	var nr *NotReadyError
	if err := w.Ready(context.Background()); !errors.As(err, &nr) || !strings.Contains(err.Error(), "snapshot") {
		t.Errorf("Ready with the snapshot gone: %v", err)
	}
}
