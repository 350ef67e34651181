package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A long request prints a line per interval while it runs (here with no
// daemon to say what it does) and none after it answers; the daemon's text
// comes after the last one.
func TestHeartbeatWhileARequestRuns(t *testing.T) {
	var out bytes.Buffer
	sock := filepath.Join(t.TempDir(), "none.sock")
	stop := heartbeat(context.Background(), &out, sock, "s", "validating", 20*time.Millisecond)
	time.Sleep(110 * time.Millisecond)
	stop()
	n := strings.Count(out.String(), "\n")
	if n < 2 {
		t.Fatalf("%d heartbeat lines in 110ms at 20ms, want several:\n%s", n, out.String())
	}
	if !regexp.MustCompile(`^\[\d\d:\d\d:\d\d\] still validating, \d+s so far\n`).MatchString(out.String()) {
		t.Errorf("heartbeat line %q", out.String())
	}
	time.Sleep(50 * time.Millisecond)
	if m := strings.Count(out.String(), "\n"); m != n {
		t.Errorf("%d lines printed after stop", m-n)
	}

	out.Reset()
	err := withHeartbeat(context.Background(), &out, sock, "s", "validating", func(text io.Writer) error {
		io.WriteString(text, "validation done\n")
		return nil
	})
	if err != nil || out.String() != "validation done\n" {
		t.Errorf("a quick request: %v, printed %q; want only its text", err, out.String())
	}
}
