package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// daemonLockEnv overrides the machine-wide lock file. The card is one per
// machine, so one daemon per machine is the rule; tests that start a private
// daemon per RIG_HOME set it to a file under their home.
const daemonLockEnv = "RIG_DAEMON_LOCK"

// LockPath is the machine-wide lock file: /run/lock is world-writable
// (sticky) on Linux for both root and other users, so daemons of every user
// and RIG_HOME meet at the same file; the temporary directory is the fallback
// where it is absent.
func LockPath() string {
	if p := os.Getenv(daemonLockEnv); p != "" {
		return p
	}
	if fi, err := os.Stat("/run/lock"); err == nil && fi.IsDir() {
		return "/run/lock/rig-daemon.lock"
	}
	return filepath.Join(os.TempDir(), "rig-daemon.lock")
}

// Lock takes the machine-wide daemon lock (an flock the kernel drops
// when the process dies, so a killed daemon never leaves it held) and writes
// who holds it. A second daemon is refused with the holder's pid and home.
func Lock(path, home, socket string) (release func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("daemon lock %s: %w (set %s to a writable file)", path, err, daemonLockEnv)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, os.ErrPermission) {
		// Another user's daemon created it; flock works on a read-only
		// descriptor, only the holder note cannot be rewritten.
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("daemon lock %s: %w (set %s to a writable file)", path, err, daemonLockEnv)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another rig daemon already runs on this machine (%s), holding %s: one daemon per machine, because it owns the card; stop it, or talk to it with --home/--socket (only tests that need a private daemon set %s to another file)",
				holderText(holder), path, daemonLockEnv)
		}
		return nil, fmt.Errorf("daemon lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d\nhome %s\nsocket %s\n", os.Getpid(), home, socket)
	}
	return func() {
		f.Truncate(0)
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// holderText reads the note the holding daemon wrote.
func holderText(note []byte) string {
	var pid, home string
	for _, line := range strings.Split(string(note), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "pid":
			if _, err := strconv.Atoi(v); err == nil {
				pid = v
			}
		case "home":
			home = v
		}
	}
	if pid == "" {
		return "holder unknown: its note is unreadable"
	}
	return fmt.Sprintf("pid %s, RIG_HOME %s", pid, home)
}
