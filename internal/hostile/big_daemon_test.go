package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"rig/internal/testenv"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/api"
	"rig/daemon"
	"rig/internal/provision"
	"rig/licences"
	"rig/studies"
	"rig/tasks"
)

// daemonEnv makes a re-executed test binary a daemon (daemon.Run on the
// home and socket it names, "HOME:SOCKET") until it is sent SIGTERM, so
// the test can read that process's own CPU time and peak memory.
const daemonEnv = "RIG_HOSTILE_DAEMON"

// runDaemonChild is the child's side of daemonEnv.
func runDaemonChild(spec string) int {
	home, sock, _ := strings.Cut(spec, ":")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := daemon.Run(ctx, daemon.Options{Home: home, Socket: sock, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// procCPU is a process's CPU time so far (user and system), from
// /proc/PID/stat.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 12th and 13th of them, in clock ticks (100 a second on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// procPeakRSS is a process's peak resident memory (VmHWM) in bytes.
func procPeakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// TestBigInputsThroughDaemon sends the big inputs to a real daemon in its
// own process, as `rig study register` does: a design with 10,000 arms and
// one with a 50 MiB sentence (by path, and the first also by content),
// banks with a 100 MB and a 20 MB prompt, and a 60 MB licence registry.
// Each is refused naming the file and the cap or count, having read no more
// of it than that cap, and the daemon's peak memory over the whole run stays
// under 512 MiB. Its CPU per refusal is logged; the under-a-second goal is
// BenchmarkBigInputRefusals's.
func TestBigInputsThroughDaemon(t *testing.T) {
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (register fingerprints them)", err)
	materialize(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	abs := func(rel string) string {
		p, err := filepath.Abs(filepath.Join(corpusDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	tmp := t.TempDir()
	home := filepath.Join(tmp, "rig")
	sock := filepath.Join(home, "rig.sock")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), daemonEnv+"="+home+":"+sock, "HOME="+tmp, "RIG_CACHE="+provision.CacheDir(),
		"RIG_DAEMON_LOCK="+filepath.Join(tmp, "daemon.lock"))
	for v, f := range validGGUF {
		cmd.Env = append(cmd.Env, v+"="+abs("valid/"+kindGGUF+"/"+f))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("daemon: %v\n%s", err, stderr.Bytes())
		}
	})
	c := api.Client{Socket: sock}
	for deadline := time.Now().Add(60 * time.Second); ; {
		var names []string
		if err := c.Call(context.Background(), "list", struct{}{}, &names, nil); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer: %v\n%s", err, stderr.Bytes())
		}
		time.Sleep(100 * time.Millisecond)
	}

	dir := t.TempDir()
	base := readJSON(t, abs("valid/"+kindDesigns+"/demo.json")).(map[string]any)
	bankOf := func(d map[string]any) map[string]any { return d["job_kinds"].([]any)[0].(map[string]any) }
	validBank, _ := filepath.Abs(filepath.Join(corpusDir, "valid", kindDesigns, bankOf(base)["task_bank"].(string)))
	// design writes the valid design with edits, its bank by absolute path.
	design := func(name string, edit func(d map[string]any)) string {
		d := deepCopy(base).(map[string]any)
		d["allow_paths_outside"] = true
		bankOf(d)["task_bank"] = validBank
		edit(d)
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := map[string]string{}
	for _, c := range bigCases() {
		p := filepath.Join(dir, c.kind+"-"+c.name)
		c.write(t, p)
		big[c.kind+"/"+c.name] = p
	}
	armsFile := design("10000-arms.design.json", func(d map[string]any) {
		arms := d["arms"].([]any)
		var many []any
		for i := 0; i < 10000; i++ {
			a := deepCopy(arms[i%len(arms)]).(map[string]any)
			a["name"], a["role"] = fmt.Sprintf("arm-%05d", i), "candidate"
			many = append(many, a)
		}
		d["arms"] = many
	})
	armsBytes, err := os.ReadFile(armsFile)
	if err != nil {
		t.Fatal(err)
	}
	// readCap is the cap that refuses each input, the most of it the daemon
	// may read first (a design sent on the socket is read there: rchar
	// counts a socket's reads too).
	cases := []struct {
		name, names, want string
		readCap           int64
		req               daemon.RegisterRequest
	}{
		{"10,000 arms by path", "10000-arms.design.json", "10000 arms", studies.DesignCap.Limit, daemon.RegisterRequest{DesignFile: armsFile}},
		{"10,000 arms as sent by the command line", "10000-arms.design.json", "10000 arms", studies.DesignCap.Limit, daemon.RegisterRequest{DesignFile: armsFile, Design: armsBytes}},
		{"a 50 MiB sentence", "50mib-sentence.json", "cap", studies.DesignCap.Limit, daemon.RegisterRequest{DesignFile: big["designs/50mib-sentence.json"]}},
		{"a 100 MB prompt", "100mb-prompt.jsonl", "cap", tasks.BankLineCap.Limit, daemon.RegisterRequest{DesignFile: design("100mb-bank.design.json", func(d map[string]any) {
			bankOf(d)["task_bank"] = big["banks/100mb-prompt.jsonl"]
		})}},
		{"a 20 MB prompt", "20mb-prompt.jsonl", "cap", tasks.BankLineCap.Limit, daemon.RegisterRequest{DesignFile: design("20mb-bank.design.json", func(d map[string]any) {
			bankOf(d)["task_bank"] = big["banks/20mb-prompt.jsonl"]
		})}},
		{"a 60 MB registry", "60mb.json", "cap", licences.RegistryCap.Limit, daemon.RegisterRequest{DesignFile: design("registry.design.json", func(map[string]any) {}), Registry: big["registries/60mb.json"]}},
	}
	daemonProc := strconv.Itoa(pid)
	for _, tc := range cases {
		before, readBefore := procCPU(t, pid), bytesRead(daemonProc)
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		err := c.Call(ctx, "register", tc.req, nil, nil)
		cancel()
		cost, read := procCPU(t, pid)-before, bytesRead(daemonProc)-readBefore
		t.Logf("%s: read %d KiB, %.2fs of the daemon's CPU: %v", tc.name, read>>10, cost.Seconds(), err)
		switch {
		case err == nil:
			t.Errorf("%s: registered", tc.name)
		case !strings.Contains(err.Error(), tc.names):
			t.Errorf("%s: the refusal does not name %s: %v", tc.name, tc.names, err)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s: the refusal does not say %q: %v", tc.name, tc.want, err)
		case goSpeak.MatchString(err.Error()):
			t.Errorf("%s: the refusal speaks Go: %v", tc.name, err)
		}
		// The daemon's own reads beside the call (the registry and bank
		// beside the design, /proc for its metrics) are the slack's.
		if limit := tc.readCap + 2*readSlack; read > limit {
			t.Errorf("%s: the daemon read %d MiB before refusing, over the %d MiB the cap allows: it read the input before checking its size", tc.name, read>>20, limit>>20)
		}
	}
	if peak := procPeakRSS(t, pid); peak > maxRSS {
		t.Errorf("the daemon's peak memory was %d MiB, over %d MiB", peak>>20, maxRSS>>20)
	} else {
		t.Logf("the daemon's peak memory over every big input: %d MiB", peak>>20)
	}
}
