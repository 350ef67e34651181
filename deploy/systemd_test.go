package deploy

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
	"rig/internal/testenv"
)

// The systemd units are read as systemd reads them and their ExecStart
// lines run with the environment systemd would give them: the unit's
// Environment= and EnvironmentFile=, specifiers expanded, no $HOME (a
// system service without User= has none). Every absolute path in a unit is
// taken under a test root: the root's /usr/local/bin/rig is the real rig
// binary, its /var/cache/rig the provisioned cache, its /var/lib empty.

// unit is a parsed unit file: section → key → values in file order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		case strings.HasSuffix(line, `\`):
			t.Fatalf("%s:%d: a continued line; this test reads one line per setting", path, n)
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is neither a section nor KEY=VALUE", path, n, line)
			}
			k = strings.TrimSpace(k)
			u[section][k] = append(u[section][k], strings.TrimSpace(v))
		}
	}
	return u
}

// host is the test's stand-in for one machine systemd runs the units on.
type host struct {
	root     string // the machine's / for every absolute path a unit names
	hostname string
}

func newHost(t *testing.T) *host {
	t.Helper()
	h := &host{root: t.TempDir()}
	h.hostname, _ = os.Hostname()
	for _, d := range []string{"usr/local/bin", "var/lib", "var/cache", "etc/rig", "etc/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(h.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(rigBin, filepath.Join(h.root, "usr/local/bin/rig")); err != nil {
		t.Fatalf("linking the rig binary into the test root: %v", err)
	}
	// What `RIG_CACHE=/var/cache/rig make setup` would have provisioned.
	if err := os.Symlink(provision.CacheDir(), filepath.Join(h.root, "var/cache/rig")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rig-daemon.service", "rig-governor-faults.service", "rig-governor-faults.timer", "rig-worker@.service"} {
		b, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.root, "etc/systemd/system", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// path is where the machine's absolute path p lies in the test.
func (h *host) path(p string) string { return filepath.Join(h.root, p) }

// specifiers are systemd's, for a system unit named name (instance after @).
func (h *host) specifiers(name string) map[byte]string {
	base := strings.TrimSuffix(name, filepath.Ext(name))
	prefix, inst, _ := strings.Cut(base, "@")
	return map[byte]string{'n': name, 'N': base, 'p': prefix, 'i': inst, 'I': inst, 'H': h.hostname,
		'S': h.path("/var/lib"), 'C': h.path("/var/cache"), '%': "%"}
}

var specifier = regexp.MustCompile(`%.`)

func expandSpecifiers(t *testing.T, s string, spec map[byte]string) string {
	t.Helper()
	return specifier.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := spec[m[1]]
		if !ok {
			t.Fatalf("%q: specifier %s is not one this test knows; add it to host.specifiers", s, m)
		}
		return v
	})
}

// service is what systemd would start for one unit: its command line and
// environment.
type service struct {
	name string
	argv []string
	env  []string
	u    unit
}

// load reads the unit file behind name (rig-worker@1.service reads
// rig-worker@.service) as systemd would for that name.
func (h *host) load(t *testing.T, name string) service {
	t.Helper()
	file := name
	if pre, post, ok := strings.Cut(name, "@"); ok {
		file = pre + "@" + post[strings.Index(post, "."):]
	}
	u := readUnit(t, filepath.Join("systemd", file))
	spec := h.specifiers(name)
	s := u["Service"]
	vars := map[string]string{}
	for _, e := range s["Environment"] {
		for _, kv := range strings.Fields(expandSpecifiers(t, e, spec)) {
			if strings.ContainsAny(kv, `"'`) {
				t.Fatalf("%s: Environment=%s: quoted assignments are not read by this test", name, e)
			}
			k, v, _ := strings.Cut(kv, "=")
			vars[k] = v
		}
	}
	// Files override Environment= (systemd.exec(5)).
	for _, ef := range s["EnvironmentFile"] {
		ef = expandSpecifiers(t, ef, spec)
		optional := strings.HasPrefix(ef, "-")
		b, err := os.ReadFile(h.path(strings.TrimPrefix(ef, "-")))
		if err != nil {
			if optional {
				continue
			}
			t.Fatalf("%s: EnvironmentFile=%s: %v", name, ef, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			k, v, _ := strings.Cut(line, "=")
			vars[k] = v
		}
	}
	// systemd's default PATH for system services; no HOME without User=.
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	if len(s["ExecStart"]) != 1 {
		t.Fatalf("%s: %d ExecStart= lines, want 1", name, len(s["ExecStart"]))
	}
	var argv []string
	for _, w := range strings.Fields(expandSpecifiers(t, s["ExecStart"][0], spec)) {
		// $VAR alone is split into words; ${VAR} is one word (systemd.service(5)).
		if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "${") {
			argv = append(argv, strings.Fields(vars[w[1:]])...)
			continue
		}
		argv = append(argv, os.Expand(w, func(k string) string { return vars[k] }))
	}
	if !filepath.IsAbs(argv[0]) {
		t.Fatalf("%s: ExecStart=%s: the program is not an absolute path", name, argv[0])
	}
	argv[0] = h.path(argv[0])
	// systemd makes StateDirectory= and CacheDirectory= before ExecStart.
	for key, base := range map[string]string{"StateDirectory": "/var/lib", "CacheDirectory": "/var/cache"} {
		for _, v := range s[key] {
			for _, d := range strings.Fields(expandSpecifiers(t, v, spec)) {
				if err := os.MkdirAll(h.path(filepath.Join(base, d)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return service{name: name, argv: argv, env: env, u: u}
}

// confined is s under its unit's CapabilityBoundingSet= and
// NoNewPrivileges=, applied by setpriv (util-linux) as systemd applies them
// before ExecStart: the part of the units' hardening a test can apply
// without systemd as PID 1. The units run as root, and so must this.
func (s service) confined(t *testing.T) service {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	testenv.NeedsSetup(t, "setpriv (Debian package util-linux)", err)
	if os.Geteuid() != 0 {
		testenv.NeedsSetup(t, "root (the units run as root; setpriv applies their bounding set only as root)", fmt.Errorf("running as uid %d", os.Geteuid()))
	}
	sv := s.u["Service"]
	if len(sv["CapabilityBoundingSet"]) != 1 {
		t.Fatalf("%s: %d CapabilityBoundingSet= lines, want 1", s.name, len(sv["CapabilityBoundingSet"]))
	}
	var keep []string
	for _, c := range strings.Fields(sv["CapabilityBoundingSet"][0]) {
		keep = append(keep, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	argv := []string{setpriv, "--bounding-set", "-all," + strings.Join(keep, ","), "--inh-caps=-all"}
	if slices.Equal(sv["NoNewPrivileges"], []string{"yes"}) {
		argv = append(argv, "--no-new-privs")
	}
	s.argv = append(argv, s.argv...)
	return s
}

func (s service) getenv(k string) string {
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// run runs the service's command line with its environment in an empty
// working directory (systemd's is /), and fails the test if the command
// left anything there: a path that fell back to relative for want of $HOME.
func (s service) run(t *testing.T, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cwd := t.TempDir()
	cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
	cmd.Env, cmd.Dir = s.env, cwd
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s", s.name, strings.Join(s.argv, " "), err, out)
	}
	if left, _ := os.ReadDir(cwd); len(left) > 0 {
		t.Errorf("%s wrote %s in its working directory (relative paths, no $HOME under systemd)", s.name, left[0].Name())
	}
	return string(out)
}

// verify runs systemd-analyze verify on units under the host's root; any
// word it says is a failure (an unknown key is only a warning to it).
func (h *host) verify(units ...string) error {
	// systemd-analyze finds sysinit.target and the like in the root's
	// /usr/lib/systemd/system: the machine's own.
	sys := h.path("/usr/lib/systemd/system")
	if _, err := os.Lstat(sys); err != nil {
		if err := os.MkdirAll(filepath.Dir(sys), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/lib/systemd/system", sys); err != nil {
			return err
		}
	}
	out, err := exec.Command("systemd-analyze", append([]string{"verify", "--root=" + h.root}, units...)...).CombinedOutput()
	if err != nil || len(out) > 0 {
		return fmt.Errorf("systemd-analyze verify %s: %v\n%s", strings.Join(units, " "), err, out)
	}
	return nil
}

func writeWorkerEnv(t *testing.T, h *host, spool string) {
	t.Helper()
	env := fmt.Sprintf("# /etc/rig/worker.env as the unit's comment says to write it\nRIG_TEMPORAL=127.0.0.1:7233\nRIG_SPOOL=%s\nRIG_WORKER_FLAGS=--dry-run\n", spool)
	if err := os.WriteFile(h.path("/etc/rig/worker.env"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSystemdUnitsVerify runs systemd-analyze verify on the units as
// shipped, under a test root whose /usr/local/bin/rig (their ExecStart) is
// the real rig binary built for this test: verify refuses a unit whose
// program does not exist.
func TestSystemdUnitsVerify(t *testing.T) {
	_, err := exec.LookPath("systemd-analyze")
	testenv.NeedsSetup(t, "systemd-analyze (Debian package systemd)", err)
	_, err = os.Stat("/lib/systemd/system/sysinit.target")
	testenv.NeedsSetup(t, "/lib/systemd/system/sysinit.target, which systemd-analyze resolves the units' dependencies against (Debian package systemd)", err)
	h := newHost(t)
	writeWorkerEnv(t, h, t.TempDir())
	if err := h.verify("rig-daemon.service", "rig-governor-faults.service", "rig-governor-faults.timer", "rig-worker@0.service", "rig-worker@1.service"); err != nil {
		t.Fatal(err)
	}
	// The check can fail: a misspelt key is caught.
	bad := h.path("/etc/systemd/system/rig-misspelt.service")
	if err := os.WriteFile(bad, []byte("[Service]\nExecStart=/usr/local/bin/rig daemon\nWatchdogSecs=10s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := h.verify("rig-misspelt.service"); err == nil || !strings.Contains(err.Error(), "WatchdogSecs") {
		t.Fatalf("systemd-analyze verify passed a unit with an unknown key: %v", err)
	}
}

// TestSystemdWorkersReadTheTimersPass runs what rig-governor-faults.timer
// starts, the real fault suite (its runtime in rig's sandbox) under the
// unit's capability bounding set and NoNewPrivileges, then each
// rig-worker@N's command line in its dry run: every worker must find that
// pass, watch its own card, and keep its own home and heartbeat.
func TestSystemdWorkersReadTheTimersPass(t *testing.T) {
	h := newHost(t)
	writeWorkerEnv(t, h, t.TempDir())
	daemon := h.load(t, "rig-daemon.service")
	timer := readUnit(t, filepath.Join("systemd", "rig-governor-faults.timer"))
	if got := timer["Timer"]["Unit"]; len(got) > 0 && got[0] != "rig-governor-faults.service" {
		t.Fatalf("the timer starts %s", got[0])
	}
	faults := h.load(t, "rig-governor-faults.service")
	if !slices.Equal(faults.argv[1:], []string{"governor", "faults"}) {
		t.Fatalf("rig-governor-faults.service runs %v; this test expects `rig governor faults` and its default state folder", faults.argv)
	}
	state := filepath.Join(faults.getenv("RIG_STATE_DIR"), "governor")
	if d := daemon.getenv("RIG_STATE_DIR"); d != faults.getenv("RIG_STATE_DIR") {
		t.Errorf("rig-daemon.service's RIG_STATE_DIR %s differs from the fault suite's %s", d, faults.getenv("RIG_STATE_DIR"))
	}

	// Before the suite has run, a worker says it would find no pass.
	before := settings(t, h.load(t, "rig-worker@0.service").run(t, time.Minute))
	if !strings.HasPrefix(before["fault-suite pass"], "none") {
		t.Errorf("before the suite ran, a worker reports %q", before["fault-suite pass"])
	}

	needSuite(t)
	out := faults.confined(t).run(t, 10*time.Minute)
	if strings.Contains(out, "unsandboxed") {
		t.Errorf("under the unit's hardening the fault suite ran its runtime outside the sandbox:\n%s", out)
	}
	if recs := records(t, state); len(recs) != 1 {
		t.Fatalf("the fault suite left %d records in %s, want 1:\n%s", len(recs), state, out)
	}
	var heartbeats []string
	for card := range 2 {
		w := h.load(t, fmt.Sprintf("rig-worker@%d.service", card))
		s := settings(t, w.run(t, time.Minute))
		wantPassFor(t, s, state)
		if s["card"] != fmt.Sprint(card) || s["cuda visible devices"] != fmt.Sprint(card) {
			t.Errorf("rig-worker@%d watches card %s with CUDA_VISIBLE_DEVICES=%s", card, s["card"], s["cuda visible devices"])
		}
		if want := h.path(fmt.Sprintf("/var/lib/rig/worker-%d", card)); s["home"] != want {
			t.Errorf("rig-worker@%d's home is %s, want %s", card, s["home"], want)
		}
		if want := h.path("/var/cache/rig/installed.env"); s["installed env"] != want {
			t.Errorf("rig-worker@%d reads %s, want %s", card, s["installed env"], want)
		}
		heartbeats = append(heartbeats, s["heartbeat"])
	}
	if heartbeats[0] == heartbeats[1] {
		t.Errorf("two workers share the heartbeat %s", heartbeats[0])
	}
}
