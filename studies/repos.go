package studies

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"rig/internal/atomicfile"
	"strings"
)

// A code trial's output is the repository the harness left, not text: it is
// kept per trial so the code grader can run again on it (rig grade
// --regrade) after the scratch directory is gone.

// repoFile is where a trial's final repository is kept, under the
// execution's directory. Call ids hold '/' and '#', so the name is the id
// made safe plus a short hash that keeps distinct ids apart.
func repoFile(recDir, callID string) string {
	sum := sha256.Sum256([]byte(callID))
	safe := strings.NewReplacer("/", "_", "#", "_", "@", "_").Replace(callID)
	return filepath.Join(recDir, "repos", safe+"-"+hex.EncodeToString(sum[:4])+".json")
}

// KeepRepo stores a code trial's final repository.
func KeepRepo(recDir, callID string, files map[string]string) error {
	if err := os.MkdirAll(filepath.Join(recDir, "repos"), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteJSON(repoFile(recDir, callID), files, 0o600)
}

// KeptRepo reads a code trial's kept repository; ok is false when none was
// kept (an execution from before repositories were kept).
func KeptRepo(recDir, callID string) (files map[string]string, ok bool) {
	if err := atomicfile.ReadJSON(repoFile(recDir, callID), &files); err != nil {
		return nil, false
	}
	return files, true
}
