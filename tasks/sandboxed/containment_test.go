package sandboxed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
	"rig/tasks"
)

// treeDigest hashes every name, mode and size under root, and the contents of
// files under contentLimit bytes (the store, receipts and small records; model
// files are covered by their size and mtime).
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %v %d %d\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() && fi.Size() < 1<<20 {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestCodeGraderContainsHostileOutputs grades model outputs that try to get
// out through the real code grader and its sandboxed runner. Each output is
// the module the task's test imports, so its attack runs as the tests start;
// it then defines the correct function, so only containment stops a pass.
func TestCodeGraderContainsHostileOutputs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: contained processes run as rig-sandbox only when rig is root (as another user the sandbox maps that user alone)")
	}
	bank, err := tasks.LoadBank("../../tasks/banks/fix-test.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	task, ok := bank.Task("ft-off-by-one-1")
	if !ok {
		t.Fatal("task ft-off-by-one-1 missing from the bundled bank")
	}
	// A rig home with a store, a study folder and a daemon socket, as a
	// studio machine has them.
	home := t.TempDir()
	studies := filepath.Join(home, "studies", "other-study")
	if err := os.MkdirAll(studies, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"store.db": "receipts", "studies/other-study/design.json": "{}", "studies/other-study/generations.jsonl": "{}\n"} {
		if err := os.WriteFile(filepath.Join(home, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sockDir, err := os.MkdirTemp("", "rigd-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	daemonSock := filepath.Join(sockDir, "rig.sock")
	ul, err := net.Listen("unix", daemonSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	installed := provision.Path()
	cache := filepath.Dir(installed)
	watched := []string{home}
	if _, err := os.Stat(cache); err == nil {
		watched = append(watched, cache)
	}
	before := map[string]string{}
	for _, w := range watched {
		before[w] = treeDigest(t, w)
	}

	fixed := "def sum_to(n):\n    return sum(range(n + 1))\n"
	attack := func(body string) string {
		return "import os, sys, socket, shutil, ctypes, signal\n" +
			"def blocked(what, e):\n    print('BLOCKED', what, type(e).__name__, e, flush=True)\n" +
			body + "\n" + fixed
	}
	try := func(what, stmt string) string {
		return fmt.Sprintf("try:\n    %s\n    print('ESCAPED %s', flush=True)\nexcept Exception as e:\n    blocked(%q, e)\n", stmt, what, what)
	}
	cases := []struct {
		name   string
		module string
		limit  string // the limit that must end it; "" when a rule stops it and the output says which
		rule   string // what the output must show
	}{
		{"writes the store", attack(try("write-store", fmt.Sprintf("open(%q, 'w').write('gone')", filepath.Join(home, "store.db")))), "", "BLOCKED write-store FileNotFoundError"},
		{"deletes a study", attack(try("rmtree", fmt.Sprintf("shutil.rmtree(%q)", studies))), "", "BLOCKED rmtree FileNotFoundError"},
		{"lists other studies", attack(try("list-studies", fmt.Sprintf("print(os.listdir(%q))", filepath.Join(home, "studies")))), "", "BLOCKED list-studies FileNotFoundError"},
		{"reads installed.env", attack(try("read-installed", fmt.Sprintf("print(open(%q).read())", installed))), "", "BLOCKED read-installed FileNotFoundError"},
		{"writes the system", attack(try("write-usr", "open('/usr/lib/rig-was-here', 'w')")), "", "BLOCKED write-usr OSError [Errno 30] Read-only file system"},
		{"becomes root", attack(try("setuid", "os.setuid(0)")), "", "BLOCKED setuid PermissionError"},
		{"signals the daemon", attack(try("kill", fmt.Sprintf("os.kill(%d, signal.SIGTERM)", os.Getpid()))), "", "BLOCKED kill ProcessLookupError"},
		{"traces the daemon", attack(try("ptrace", fmt.Sprintf("libc = ctypes.CDLL(None, use_errno=True)\n    r = libc.ptrace(16, %d, 0, 0)\n    if r != 0: raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))", os.Getpid()))), "", "BLOCKED ptrace PermissionError [Errno 1] Operation not permitted"}, // the seccomp filter, before the PID namespace
		{"dials the daemon socket", attack(try("unix-socket", fmt.Sprintf("s = socket.socket(socket.AF_UNIX); s.connect(%q)", daemonSock))), "", "BLOCKED unix-socket FileNotFoundError"},
		{"dials a host port", attack(try("tcp", fmt.Sprintf("socket.create_connection(('127.0.0.1', %d), timeout=2)", tl.Addr().(*net.TCPAddr).Port))), "", "BLOCKED tcp ConnectionRefusedError"},
		{"fork bomb", attack("n = 0\nwhile n < 5000:\n    try:\n        os.fork(); n += 1\n    except OSError:\n        os._exit(0)\nos._exit(0)"), "processes", ""},
		{"allocates past the cap", attack("x = bytearray(3 << 30)"), "memory", ""},
		{"fills the disk", attack("i = 0\nwhile True:\n    with open('fill%d' % i, 'wb') as f:\n        f.write(b'0' * (64 << 20))\n    i += 1"), "scratch_bytes", ""},
	}
	grader := &tasks.Code{Runner: Runner{}, Limit: 60 * time.Second, TempDir: t.TempDir()}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := grader.Grade(context.Background(), task, tasks.Output{TaskID: task.ID, Files: map[string]string{"series.py": c.module}})
			if err != nil {
				t.Fatal(err)
			}
			out, _ := g.Details["output_tail"].(string)
			if strings.Contains(out, "ESCAPED") {
				t.Fatalf("the attack got through:\n%s", out)
			}
			if c.limit != "" {
				if g.Pass || g.Details["limit_hit"] != c.limit {
					t.Fatalf("want a failed grade with limit_hit %q, got pass=%v details=%v", c.limit, g.Pass, g.Details)
				}
				return
			}
			if !strings.Contains(out, c.rule) {
				t.Fatalf("the output does not show the rule that stopped it (%q):\n%s", c.rule, out)
			}
		})
	}
	for _, w := range watched {
		if got := treeDigest(t, w); got != before[w] {
			t.Errorf("%s changed while hostile outputs were graded", w)
		}
	}
}
