package runtimes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRedTeamGitFilterInSandboxWrittenRepo plants what contained code can
// write in its repository (a clean filter in .git/config, switched on for
// every path in .git/info/attributes) and makes a same-size edit of a tracked
// file, the case in which git runs the filter to compare contents. rig's own
// changed-file check then runs on the host, as the daemon. The attack works if
// the filter's command ran; it fails if the marker never appears and the edit
// is still reported.
func TestRedTeamGitFilterInSandboxWrittenRepo(t *testing.T) {
	repo := gitRepo(t, map[string]string{"calc.py": "def add(a, b):\n    return a - b\n"})
	before, err := repoManifest(repo)
	if err != nil {
		t.Fatal(err)
	}

	marker := filepath.Join(t.TempDir(), "filter-ran-on-the-host")
	config, err := os.OpenFile(filepath.Join(repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// git runs a filter through the shell; the quotes keep the ';' from
	// starting a comment in the config file.
	config.WriteString("[filter \"x\"]\n\tclean = \"id > " + marker + "; cat\"\n\tsmudge = cat\n")
	config.Close()
	os.MkdirAll(filepath.Join(repo, ".git", "info"), 0o755)
	if err := os.WriteFile(filepath.Join(repo, ".git", "info", "attributes"), []byte("* filter=x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Same size, different bytes: git must read the file to see the change.
	time.Sleep(1100 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(repo, "calc.py"), []byte("def add(a, b):\n    return a + b\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	after, err := repoManifest(repo)
	if err != nil {
		t.Fatal(err)
	}
	edited := before.Changed(after)

	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the repository's filter ran on the host: %s", strings.TrimSpace(string(b)))
	}
	if !slices.Contains(edited, "calc.py") {
		t.Errorf("the same-size edit of calc.py was not reported: edited %v", edited)
	}
}

// TestRedTeamAiderLogSwappedFromInside runs a hostile harness in Aider's real
// sandbox (standing in for code Aider runs: a test command or a /run). It
// replaces the run's log with a link to a root-only file outside, then exits.
// rig's result, its log tail and its summary must not quote that file.
func TestRedTeamAiderLogSwappedFromInside(t *testing.T) {
	secret := rootOnlySecret(t)
	repo := gitRepo(t, map[string]string{"calc.py": "x = 1\n"})
	res := runHostileHarness(t, repo, `
log="$HOME/../aider.log"
rm -f "$log"; ln -s `+secret.path+` "$log" && echo "planted the link" || echo "could not plant the link"
echo "edited" > planted.txt
`)
	for what, text := range map[string]string{"log tail": res.LogTail, "summary": res.Describe()} {
		if strings.Contains(text, secret.text) {
			t.Errorf("the %s quotes the root-only file the link points at: %q", what, text)
		}
	}
	if !slices.Contains(res.EditedFiles, "planted.txt") {
		t.Errorf("the harness's write was not reported: edited %v", res.EditedFiles)
	}
	if !strings.Contains(res.LogTail, "could not plant the link") {
		t.Errorf("the log tail lost what the harness wrote: %q", res.LogTail)
	}
}

// TestRedTeamAiderRepoConfigFromInside has the contained code itself plant a
// clean filter in its repository's .git/config, switch it on for every path
// and make a same-size edit; and leave a link to a root-only file in the
// tree. The run's changed-file list is then taken on the host: the filter
// must never run there, the edit must be listed, and the link listed as an
// entry without its target's content being read.
func TestRedTeamAiderRepoConfigFromInside(t *testing.T) {
	secret := rootOnlySecret(t)
	marker := filepath.Join(t.TempDir(), "filter-ran-on-the-host")
	repo := gitRepo(t, map[string]string{"calc.py": "def add(a, b):\n    return a - b\n"})
	res := runHostileHarness(t, repo, `
printf '[filter "x"]\n\tclean = "id > `+marker+`; cat"\n\tsmudge = cat\n' >> .git/config
mkdir -p .git/info && echo '* filter=x' > .git/info/attributes
sleep 1.1
printf 'def add(a, b):\n    return a + b\n' > calc.py
ln -s `+secret.path+` leak
echo planted
`)
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the repository's filter ran on the host: %s", strings.TrimSpace(string(b)))
	}
	if !slices.Contains(res.EditedFiles, "calc.py") || !slices.Contains(res.EditedFiles, "leak") {
		t.Errorf("edited %v, want calc.py and the link", res.EditedFiles)
	}
	if strings.Contains(res.Describe()+res.LogTail, secret.text) {
		t.Errorf("rig quoted the link's target: %s %s", res.Describe(), res.LogTail)
	}
}

// runHostileHarness runs script (sh, in the repository) as the harness
// binary through the real RunAider and its sandbox, pointed at a fake arm it
// never calls. The script is the attacker: it does what code Aider runs (a
// test command, a /run) could do, then exits 3.
func runHostileHarness(t *testing.T, repo, script string) AiderResult {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "harness")
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	// /usr/bin/sh, not /bin/sh: the sandbox binds a program's install
	// folder, and /bin/sh's is / itself.
	body := "#!/usr/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo \"hostile-harness 1\"; exit 0; fi\n" + script + "\nexit 3\n"
	if err := os.WriteFile(bin, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	res, err := RunAider(context.Background(), AiderConfig{
		Binary: bin, Arm: &fakeArm{}, WorkDir: t.TempDir(), Caps: AiderCaps{Turns: 1, Wall: time.Minute, Tokens: 16},
	}, AiderTask{Repo: repo, Message: "anything"})
	if errors.Is(err, ErrNoSandbox) {
		t.Skipf("no sandbox here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("harness: %s; log: %q", res.Describe(), res.LogTail)
	if res.ExitCode != 3 {
		t.Fatalf("the hostile harness did not run to its end: exit %d, log %q", res.ExitCode, res.LogTail)
	}
	return res
}

type secretFile struct{ path, text string }

// rootOnlySecret is a file with mode 0600 owned by the test's user (root
// when the daemon's case is tested), in a folder only that user may enter.
func rootOnlySecret(t *testing.T) secretFile {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s := secretFile{path: filepath.Join(dir, "shadow"), text: "root-only-secret-4b1f9"}
	if err := os.WriteFile(s.path, []byte(s.text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}
