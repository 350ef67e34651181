package tasks

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRedTeamRepoStateKeepsNoLinkOrGitConfig leaves in a repository what
// contained code can: a link to a root-only file, a link to a folder outside,
// a fifo, and a clean filter in .git/config switched on for every path.
// RepoState is what rig keeps of that repository (studies.KeepRepo stores
// it; rig grade --regrade grades it again): it must hold the plain files
// only, nothing read through a link, nothing of .git, and must not hang on
// the fifo.
func TestRedTeamRepoStateKeepsNoLinkOrGitConfig(t *testing.T) {
	requireTools(t)
	secretDir := t.TempDir()
	os.Chmod(secretDir, 0o700)
	secret := "root-only-secret-91d3"
	os.WriteFile(filepath.Join(secretDir, "shadow"), []byte(secret), 0o600)
	os.WriteFile(filepath.Join(secretDir, "inner.py"), []byte(secret), 0o600)

	dir := t.TempDir()
	if err := Materialize(context.Background(), dir, map[string]string{"calc.py": "x = 1\n"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "calc.py"), []byte("x = 2\n"), 0o644)
	os.Symlink(filepath.Join(secretDir, "shadow"), filepath.Join(dir, "leak.py"))
	os.Symlink(secretDir, filepath.Join(dir, "outside"))
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.OpenFile(filepath.Join(dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	cfg.WriteString("[filter \"x\"]\n\tclean = \"touch " + filepath.Join(secretDir, "ran") + "; cat\"\n")
	cfg.Close()
	os.WriteFile(filepath.Join(dir, ".git", "info", "attributes"), []byte("* filter=x\n"), 0o644)

	done := make(chan struct{})
	var got map[string]string
	var err error
	go func() { got, err = RepoState(dir); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("RepoState hung (on the fifo?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k, v := range got {
		keys = append(keys, k)
		if strings.Contains(v, secret) {
			t.Errorf("%s holds the root-only file's content, read through a link", k)
		}
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"calc.py"}) || got["calc.py"] != "x = 2\n" {
		t.Errorf("kept %v, want calc.py alone with its edit", got)
	}
	if _, err := os.Stat(filepath.Join(secretDir, "ran")); err == nil {
		t.Error("the repository's git filter ran on the host")
	}
}

// TestRedTeamRegradeCarriesNoGitConfig grades a kept repository whose files
// name .git/config (a filter) and a path above the repository, as a forged or
// stale kept repository could. The grader must refuse both paths: the tests
// run in a repository whose .git is rig's own, and nothing is written
// outside it.
func TestRedTeamRegradeCarriesNoGitConfig(t *testing.T) {
	requireTools(t)
	key, _ := json.Marshal(codeKey{Files: map[string]string{"calc.py": "x = 2\n"}, Tests: []string{"check.sh"}})
	task := Task{ID: "redteam-1", Key: key, Input: Input{
		Files:       map[string]string{"calc.py": "x = 1\n", "check.sh": "grep -q 'x = 2' calc.py && ! grep -q filter .git/config\n"},
		TestCommand: []string{"sh", "check.sh"},
	}}
	tmp := t.TempDir()
	g := &Code{Runner: ExecRunner{}, Limit: 20 * time.Second, TempDir: tmp}
	grade, err := g.Grade(context.Background(), task, Output{TaskID: task.ID, Files: map[string]string{
		"calc.py":           "x = 2\n",
		".git/config":       "[filter \"x\"]\n\tclean = \"touch /tmp/should-not-run; cat\"\n",
		"../escaped.txt":    "written above the repository",
		"sub/../../esc.txt": "the same, spelled otherwise",
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !grade.Pass {
		t.Errorf("the grade failed: the forged .git/config reached the graded repository? %v", grade.Details)
	}
	rejected, _ := grade.Details["rejected_paths"].([]string)
	for _, p := range []string{".git/config", "../escaped.txt", "sub/../../esc.txt"} {
		if !slices.Contains(rejected, p) {
			t.Errorf("%s was not rejected: rejected %v", p, rejected)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "escaped.txt")); err == nil {
		t.Error("a kept repository's file was written above the graded repository")
	}
}
