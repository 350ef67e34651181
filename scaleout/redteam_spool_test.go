package scaleout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/layout"
	"rig/receipts"
	"rig/studies"
)

// TestRedTeamSpoolEntryIsNotAPath is a worker (or anyone who can complete
// a trial activity on the cluster) returning an entry name that is a path
// out of the spool: the coordinator, which is the daemon and often root,
// must not read a receipt, a record or repositories from there. The entry
// here is a whole, valid entry moved outside the spool, so only the name
// stands between it and the study's store.
func TestRedTeamSpoolEntryIsNotAPath(t *testing.T) {
	c, f, spool := mergeFixture(t)
	tr := writeEntry(t, spool, "w1", "Paris", nil)
	trials := filepath.Join(spool, "s1", "exec-2", "trials")
	planted := filepath.Join(t.TempDir(), "planted")
	if err := os.Rename(filepath.Join(trials, tr.Entry), planted); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(trials, planted)
	if err != nil || !strings.HasPrefix(rel, "..") {
		t.Fatalf("%s relative to %s: %s %v", planted, trials, rel, err)
	}
	tr.Entry = rel
	m, err := merge(t, c, tr)
	if !errors.Is(err, layout.ErrInvalidName) {
		t.Errorf("merging entry %q (outside the spool): %+v, %v; want refused as an invalid name", rel, m, err)
	}
	key, _ := studies.ParseTrialKey(tr.Key)
	if rec, err := f.st.Receipt(t.Context(), "exec-2", receipts.TrialKey{Arm: key.Arm, TaskID: key.Task, Repeat: key.Repeat}, 1); !errors.Is(err, receipts.ErrNotFound) {
		t.Errorf("a receipt from outside the spool was merged into the store: %+v, %v", rec, err)
	}
	for _, study := range []string{"../../x", "s1/../../x"} {
		if _, err := c.MergeEntry(t.Context(), study, "exec-2", key, tr); !errors.Is(err, layout.ErrInvalidName) {
			t.Errorf("merging for study %q: %v; want refused as an invalid name", study, err)
		}
	}
}
