package scaleout

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/provision"
	"rig/internal/testenv"
)

func startDevServer(t *testing.T) *DevServer {
	t.Helper()
	testenv.Long(t, "starts the real Temporal dev server")
	in, err := provision.Load()
	if err != nil {
		t.Fatal(err)
	}
	if in.Temporal == "" {
		t.Fatal("installed.env names no TEMPORAL_BIN: run make setup (it builds the Temporal CLI)")
	}
	dir := t.TempDir()
	s := &DevServer{Bin: in.Temporal, DB: filepath.Join(dir, "temporal.db"), Log: filepath.Join(dir, "temporal.log")}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// listeners are the local addresses (hex, as /proc/net/tcp* writes them)
// of the listening sockets the process pid holds.
func listeners(t *testing.T, pid int) []string {
	t.Helper()
	inodes := map[string]bool{}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(link, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// local_address is field 1, st field 3 (0A = LISTEN), inode field 9.
			if len(fields) > 9 && fields[3] == "0A" && inodes[fields[9]] {
				out = append(out, fields[1])
			}
		}
		f.Close()
	}
	return out
}

// TestDevServerListensOnLoopbackOnly reads the dev server's listening
// sockets from the kernel: each is bound to 127.0.0.1. Nothing is sent
// anywhere to show it.
func TestDevServerListensOnLoopbackOnly(t *testing.T) {
	s := startDevServer(t)
	ls := listeners(t, s.cmd.Process.Pid)
	if len(ls) == 0 {
		t.Fatal("the dev server holds no listening socket")
	}
	for _, l := range ls {
		host := strings.Split(l, ":")[0]
		// 127.0.0.1 is 0100007F in /proc/net/tcp; v4-mapped in tcp6.
		if host != "0100007F" && host != "0000000000000000FFFF00000100007F" {
			t.Errorf("the dev server listens on %s, not on 127.0.0.1", l)
		}
	}
	t.Logf("listening sockets, all on 127.0.0.1: %v", ls)
}

func TestWrongNamespaceAndMissingSnapshotAreNamed(t *testing.T) {
	s := startDevServer(t)
	cfg := Config{Address: s.Address(), Namespace: "no-such-namespace", Spool: t.TempDir()}
	_, err := cfg.Dial(context.Background(), "test", nil)
	if err == nil || !strings.Contains(err.Error(), `no namespace "no-such-namespace"`) || !strings.Contains(err.Error(), s.Address()) {
		t.Errorf("a wrong namespace: %v", err)
	}
	cfg.Namespace = ""
	in, _ := provision.Load()
	_, err = NewWorker(context.Background(), WorkerOptions{Config: cfg, ID: "w", Installed: in, Study: "absent", Execution: "exec-1"})
	if err == nil || !strings.Contains(err.Error(), "no snapshot of study absent") {
		t.Errorf("a worker for a study the spool lacks: %v", err)
	}
}

// Requests go uncompressed only to a server on this machine's loopback: a
// cluster elsewhere keeps the SDK's gzip.
func TestOnLoopbackDecidesCompression(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7233": true, "127.3.4.5:7233": true, "[::1]:7233": true, "localhost:7233": true,
		"10.0.0.5:7233": false, "temporal.example:7233": false, "[2001:db8::1]:7233": false, "127.0.0.1": false,
	} {
		if got := onLoopback(addr); got != want {
			t.Errorf("onLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestDevServerNamesATakenPort: a port the caller fixed that another
// process holds is an error that quotes the server's own reason and names
// the port, after one try (a fixed port is not tried again).
func TestDevServerNamesATakenPort(t *testing.T) {
	testenv.Long(t, "starts the real Temporal dev server")
	in, err := provision.Load()
	if err != nil {
		t.Fatal(err)
	}
	port := heldPort(t)
	dir := t.TempDir()
	s := &DevServer{Bin: in.Temporal, DB: filepath.Join(dir, "temporal.db"), Port: port, Log: filepath.Join(dir, "temporal.log")}
	err = s.Start(context.Background())
	if err == nil {
		s.Stop()
		t.Fatalf("the dev server started on port %d, which another socket holds", port)
	}
	for _, want := range []string{"exited at start", "address already in use", fmt.Sprintf("port %d is the one asked for", port)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	log, _ := os.ReadFile(s.Log)
	if n := strings.Count(string(log), "address already in use"); n != 1 {
		t.Errorf("the log holds %d failed starts, want 1 (a fixed port is not retried):\n%s", n, log)
	}
}

// TestDevServerStartIsNotFooledByAnotherSocket: a fake temporal binary (a
// shell script) that fails to bind the port only after a second, as the
// real one does on a busy machine, while another socket holds the port.
// A TCP connect to the port succeeds against that socket; Start must still
// wait for Temporal's own answer and report the failed start, not return a
// server that is not there.
func TestDevServerStartIsNotFooledByAnotherSocket(t *testing.T) {
	port := heldPort(t)
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-temporal")
	script := fmt.Sprintf("#!/bin/sh\nsleep 1\necho 'listen tcp 127.0.0.1:%d: bind: address already in use'\nexit 1\n", port)
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &DevServer{Bin: fake, Port: port, Log: filepath.Join(dir, "temporal.log")}
	err := s.Start(context.Background())
	if err == nil {
		s.Stop()
		t.Fatalf("Start returned a server on port %d, which only another socket held", port)
	}
	if !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("the error does not say why: %v", err)
	}
}

// heldPort is a loopback port another socket holds until the test ends.
func heldPort(t *testing.T) int {
	t.Helper()
	holder, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	return holder.Addr().(*net.TCPAddr).Port
}
