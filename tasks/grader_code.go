package tasks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"rig/internal/untrusted"
)

// codeKey holds the fixed file contents and the test files that a produced
// repository may not change (they are restored before the tests run).
type codeKey struct {
	Files map[string]string `json:"files"`
	Tests []string          `json:"tests"`
}

func readCodeKey(t Task) (codeKey, error) {
	var k codeKey
	if err := decodeKey(t, &k); err != nil {
		return k, err
	}
	if len(t.Input.Files) == 0 || len(t.Input.TestCommand) == 0 {
		return k, errors.New("code tasks need input.files and input.test_command")
	}
	if len(k.Files) == 0 {
		return k, errors.New("key.files is empty")
	}
	for p := range k.Files {
		if err := checkRelPath(p); err != nil {
			return k, fmt.Errorf("key.files %q: %w", p, err)
		}
	}
	if len(k.Tests) == 0 {
		return k, errors.New("key.tests is empty (list the test files a fix may not edit)")
	}
	for _, p := range k.Tests {
		if _, ok := t.Input.Files[p]; !ok {
			return k, fmt.Errorf("key.tests %q is not in input.files", p)
		}
	}
	return k, nil
}

// Code materializes the task's repository in a scratch git repo, overlays
// the produced files, restores the protected tests and runs the task's test
// command through Runner with a time cap. Pass means exit status 0 in time.
type Code struct {
	Runner Runner
	Limit  time.Duration
	// TempDir is where scratch repos go; empty means os.TempDir().
	TempDir string
}

func (*Code) Name() string { return "code" }
func (*Code) Version() int { return 1 }

func (*Code) CheckKey(t Task) error { _, err := readCodeKey(t); return err }

func (*Code) KeyOutput(t Task) (Output, error) {
	k, err := readCodeKey(t)
	return Output{TaskID: t.ID, Files: k.Files}, err
}

func (c *Code) Grade(ctx context.Context, t Task, out Output) (Grade, error) {
	k, err := readCodeKey(t)
	if err != nil {
		return Grade{}, err
	}
	dir, err := os.MkdirTemp(c.TempDir, "rig-grade-")
	if err != nil {
		return Grade{}, err
	}
	defer os.RemoveAll(dir)
	if err := Materialize(ctx, dir, t.Input.Files); err != nil {
		return Grade{}, err
	}
	var rejected []string
	for p, content := range out.Files {
		if checkRelPath(p) != nil {
			rejected = append(rejected, p)
			continue
		}
		if err := writeFile(dir, p, content); err != nil {
			return Grade{}, err
		}
	}
	for _, p := range k.Tests {
		if err := writeFile(dir, p, t.Input.Files[p]); err != nil {
			return Grade{}, err
		}
	}
	runner := c.Runner
	if runner == nil {
		runner = ExecRunner{}
	}
	res, err := runner.Run(ctx, Command{Dir: dir, Argv: t.Input.TestCommand, Env: []string{"PYTHONDONTWRITEBYTECODE=1"}, Limit: c.Limit})
	if err != nil {
		return Grade{}, fmt.Errorf("run %s: %w", strings.Join(t.Input.TestCommand, " "), err)
	}
	pass := res.ExitCode == 0 && !res.TimedOut
	score := 0.0
	if pass {
		score = 1
	}
	d := map[string]any{"exit_code": res.ExitCode, "timed_out": res.TimedOut, "wall_ms": res.Wall.Milliseconds(), "output_tail": tail([]byte(res.Output), 2048)}
	if res.LimitHit != "" {
		// A tree ended by a limit never passes, whatever its exit status.
		pass, score = false, 0
		d["limit_hit"] = res.LimitHit
	}
	if len(rejected) > 0 {
		sort.Strings(rejected)
		d["rejected_paths"] = rejected
	}
	return Grade{Score: score, Pass: pass, Details: d}, nil
}

// CheckBaseline confirms the unfixed repository fails its tests; a task
// whose tests already pass measures nothing.
func (c *Code) CheckBaseline(ctx context.Context, t Task) error {
	g, err := c.Grade(ctx, t, Output{TaskID: t.ID})
	if err != nil {
		return err
	}
	if g.Pass {
		return errors.New("the unfixed repository already passes its tests")
	}
	return nil
}

// Materialize writes files into dir and commits them to a fresh git repo,
// so a harness such as Aider sees a clean tree and a diff can be taken.
func Materialize(ctx context.Context, dir string, files map[string]string) error {
	for p, content := range files {
		if err := checkRelPath(p); err != nil {
			return fmt.Errorf("file %q: %w", p, err)
		}
		if err := writeFile(dir, p, content); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"commit", "-q", "-m", "task"},
	} {
		if err := git(ctx, dir, args...); err != nil {
			return err
		}
	}
	return nil
}

func git(ctx context.Context, dir string, args ...string) error {
	base := []string{"-c", "user.name=rig", "-c", "user.email=rig@localhost", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}
	cmd := exec.CommandContext(ctx, "git", append(base, args...)...)
	cmd.Dir = dir
	// Keep the operator's git config out of scratch repos.
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

func writeFile(dir, p, content string) error {
	full := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, []byte(content), 0o644)
}

// A repository's files are kept up to this size each (a larger one, a
// build output or a data file, is left out), and a repository up to these
// bounds in all; past them RepoState refuses it rather than keep gigabytes.
const (
	repoFileMax    = 1 << 20
	repoMaxEntries = 100_000
	repoMaxBytes   = 256 << 20
)

// RepoState reads the files of a repository after a harness ran in it, as an
// Output's Files: regular files only, skipping .git, caches and Aider's own
// files. The tree was written by contained code, so it is walked without
// following any link (a link is left out, never read through) and without
// running git or anything else that would obey the tree's configuration.
func RepoState(dir string) (map[string]string, error) {
	files := map[string]string{}
	err := untrusted.Walk(dir, untrusted.Limits{Entries: repoMaxEntries, Bytes: repoMaxBytes}, func(rel string, e untrusted.Entry, r io.Reader) error {
		name := path.Base(rel)
		if e.Kind == untrusted.Dir {
			if name == ".git" || name == "__pycache__" || strings.HasPrefix(name, ".aider") {
				return fs.SkipDir
			}
			return nil
		}
		if e.Kind != untrusted.File || strings.HasPrefix(name, ".aider") || e.Size > repoFileMax {
			return nil
		}
		// The walk gives at most the e.Size bytes the file had when it was
		// listed (at most repoFileMax here), and at most repoMaxBytes over
		// the whole tree: one buffer of that size holds it, however the
		// contained code changes the file meanwhile. A file that shrank
		// keeps what it still had.
		b := make([]byte, e.Size)
		n, err := io.ReadFull(r, b)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return err
		}
		files[rel] = string(b[:n])
		return nil
	})
	if errors.Is(err, untrusted.ErrTooBig) {
		return files, fmt.Errorf("the repository the harness left: %w (a task's repository should stay near the size it was given; look at what the test command writes)", err)
	}
	return files, err
}
