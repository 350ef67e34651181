package scaleout

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/temporal"

	"rig/internal/atomicfile"
	"rig/internal/layout"
	"rig/studies"
	"rig/tasks"
)

// The spool is a folder every worker and the coordinator reach (a shared
// filesystem: NFS, CephFS, a cluster's scratch). Per execution it holds the
// published snapshot and banks the workers run from, and one entry per
// trial attempt a worker ran:
//
//	SPOOL/STUDY/EXECUTION/snapshot.json
//	SPOOL/STUDY/EXECUTION/banks/JOBKIND.jsonl
//	SPOOL/STUDY/EXECUTION/trials/KEY#ATTEMPT.WORKER/receipt.json
//	                                               /generations.jsonl
//	                                               /repos/...
//
// An entry is written under a .partial name and renamed when whole, and the
// digests of its files travel in the activity's result, so a cut transfer
// or an edited file is never merged. The paths are layout.Spool's: the
// study, the execution and the entry's name come from a workflow's input or
// a worker's result, and the layout checks each before it is joined.

// partial marks a spool entry a worker is still writing.
const partial = ".partial"

func execSpool(spool, study, execution string) (layout.SpoolExecution, error) {
	return layout.Spool(spool).Execution(study, execution)
}

// entryName is a trial attempt's folder name: the key escaped into one path
// element, the attempt and the worker (two workers that both ran an attempt
// thought lost never share a folder).
func entryName(key string, attempt int, worker string) string {
	return fmt.Sprintf("%s#%d.%s", url.PathEscape(strings.ReplaceAll(key, "/", "|")), attempt, url.PathEscape(worker))
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

func spoolError(format string, args ...any) error {
	return temporal.NewApplicationError(fmt.Sprintf(format, args...), ErrSpool)
}

// publish writes the snapshot the workers run from, with its banks copied
// beside it (a worker needs no access to the coordinator's home) and the
// execution's derived walls when it has auto wall caps. It is idempotent:
// the same publication twice writes the same files.
func publish(spool, study, execution string, snap *studies.Snapshot, walls map[string]studies.WallDerivation) error {
	x, err := execSpool(spool, study, execution)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(x.Banks(), 0o755); err != nil {
		return fmt.Errorf("spool %s: %w", spool, err)
	}
	// Workers of a fleet need not share a uid, with each other or with the
	// coordinator: trials/ takes an entry from any of them, and is sticky
	// (as /tmp is), so no worker's uid can remove or rename another's. What
	// lands there is only a transport: the coordinator merges an entry only
	// when its digests match what the engine reported (trust.go).
	if err := os.MkdirAll(x.Trials(), 0o755); err != nil {
		return fmt.Errorf("spool %s: %w", spool, err)
	}
	if err := os.Chmod(x.Trials(), 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("spool %s: %w", spool, err)
	}
	pub := *snap
	pub.Banks = append([]studies.FrozenBank(nil), snap.Banks...)
	for i, fb := range pub.Banks {
		data, err := os.ReadFile(fb.Path)
		if err != nil {
			return err
		}
		dst := filepath.Join(x.Banks(), fb.JobKind+".jsonl")
		if err := atomicfile.WriteBytes(dst, data, 0o644); err != nil {
			return err
		}
		b, err := tasks.LoadBank(dst)
		if err != nil {
			return err
		}
		if b.Hash != fb.SHA256 {
			return &studies.StaleAssetError{Asset: "bank " + fb.Path, Want: fb.SHA256, Got: b.Hash}
		}
		pub.Banks[i].Path = dst
	}
	if walls != nil {
		if err := atomicfile.WriteJSON(x.Walls(), walls, 0o644); err != nil {
			return err
		}
	}
	return atomicfile.WriteJSON(x.Snapshot(), &pub, 0o644)
}

// NoSnapshotError names a study whose snapshot the spool does not hold.
type NoSnapshotError struct {
	Study, Execution, Path string
	Err                    error
}

func (e *NoSnapshotError) Error() string {
	return fmt.Sprintf("no snapshot of study %s (execution %s) at %s: %v (the coordinator publishes it when the execution is submitted with --engine temporal; is this worker's --spool the coordinator's?)",
		e.Study, e.Execution, e.Path, e.Err)
}

// readPublished reads a published snapshot, checks its design hash, and
// reads the execution's derived walls when its design has auto wall caps.
func readPublished(spool, study, execution, designHash string) (*studies.Snapshot, map[string]studies.WallDerivation, error) {
	x, err := execSpool(spool, study, execution)
	if err != nil {
		return nil, nil, err
	}
	path := x.Snapshot()
	var snap studies.Snapshot
	if err := atomicfile.ReadJSON(path, &snap); err != nil {
		return nil, nil, &NoSnapshotError{Study: study, Execution: execution, Path: path, Err: err}
	}
	if snap.DesignHash != designHash {
		return nil, nil, fmt.Errorf("%s: design hash %s, the trial's is %s", path, snap.DesignHash, designHash)
	}
	d, err := snap.DesignValue()
	if err != nil {
		return nil, nil, err
	}
	var walls map[string]studies.WallDerivation
	if len(d.AutoWallJobKinds()) > 0 {
		if err := atomicfile.ReadJSON(x.Walls(), &walls); err != nil {
			return nil, nil, &NoSnapshotError{Study: study, Execution: execution, Path: x.Walls(), Err: err}
		}
	}
	return &snap, walls, nil
}

// parseEntryName reads entryName's form back.
func parseEntryName(name string) (key studies.TrialKey, attempt int, worker string, err error) {
	hash := strings.LastIndex(name, "#")
	dot := strings.Index(name[hash+1:], ".")
	if hash < 0 || dot < 0 {
		return key, 0, "", fmt.Errorf("spool entry %q: not KEY#ATTEMPT.WORKER", name)
	}
	esc, rest := name[:hash], name[hash+1:]
	if _, err := fmt.Sscanf(rest[:dot], "%d", &attempt); err != nil {
		return key, 0, "", fmt.Errorf("spool entry %q: attempt: %w", name, err)
	}
	if worker, err = url.PathUnescape(rest[dot+1:]); err != nil {
		return key, 0, "", fmt.Errorf("spool entry %q: worker: %w", name, err)
	}
	raw, err := url.PathUnescape(esc)
	if err != nil {
		return key, 0, "", fmt.Errorf("spool entry %q: key: %w", name, err)
	}
	key, err = studies.ParseTrialKey(strings.ReplaceAll(raw, "|", "/"))
	return key, attempt, worker, err
}
