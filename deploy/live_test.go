package deploy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"rig/governor"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/scaleout"
)

// What the tests that start rig for real share: a Temporal dev server for
// a worker to connect to, a process whose log a test reads while it runs,
// and an HTTP GET as a probe or a scraper makes it.

// startEngine starts the provisioned Temporal CLI's dev server on loopback:
// the cluster a deploy file's worker would reach.
func startEngine(t *testing.T) string {
	t.Helper()
	testenv.Long(t, "the Temporal dev server and a real rig worker")
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned Temporal CLI", err)
	if in.Temporal == "" {
		testenv.NeedsSetup(t, "the provisioned Temporal CLI", provision.ErrNotProvisioned)
	}
	dir := t.TempDir()
	s := &scaleout.DevServer{Bin: in.Temporal, DB: filepath.Join(dir, "temporal.db"), Log: filepath.Join(dir, "temporal.log")}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.Address()
}

// syncBuffer is a process's output, read while the process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a process a test started and stops at its end.
type proc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// start starts cmd with its output gathered; the test's cleanup sends it
// SIGTERM, then SIGKILL after 20 s, and waits for it.
func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitFor waits until the process's output matches re, and returns the
// match; it fails the test at the deadline or when the process exits.
func (p *proc) waitFor(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited (%v) before its output matched %s:\n%s", p.cmd.Path, err, re, p.out)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s in its output within %s:\n%s", p.cmd.Path, re, within, p.out)
		}
	}
}

// get is one HTTP GET, as the kubelet's probe or Prometheus' scrape makes
// it: the status and the body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// writeStandInPass stores a passing fault-suite record made at `at` in the
// governor state folder dir: a stand-in for the suite's own record, so
// that a test of a launcher's worker need not run the 90 s suite first.
// The tests that run the real suite are the ones that call needSuite.
func writeStandInPass(t *testing.T, dir string, at time.Time) {
	t.Helper()
	host, _ := os.Hostname()
	if _, err := governor.WriteRecord(dir, governor.Record{At: at.UTC(), Pass: true, Host: host, NVML: "stand-in record written by a deploy test"}); err != nil {
		t.Fatal(err)
	}
}
