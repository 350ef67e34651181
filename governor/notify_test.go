package governor

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func listenNotify(t *testing.T) (string, *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return path, c
}

func TestNotifier(t *testing.T) {
	path, c := listenNotify(t)
	if err := NewNotifier(path).Notify("READY=1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Fatalf("got %q %v", buf[:n], err)
	}
	if (Notifier{}).Notify("READY=1") != nil || (Notifier{}).Enabled() {
		t.Fatal("zero Notifier is not a no-op")
	}
	if err := NewNotifier(filepath.Join(t.TempDir(), "none.sock")).Notify("READY=1"); err == nil {
		t.Fatal("notify to a missing socket succeeded")
	}
}

func TestGovernorFeedsSystemd(t *testing.T) {
	path, c := listenNotify(t)
	cfg := SuiteConfig()
	g, err := New(Options{Config: cfg, Sensors: allSimulated(), Sink: &eventLog{}, Notifier: NewNotifier(path)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = g.Run(ctx) }()
	got := map[string]bool{}
	buf := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	for !(got["READY=1"] && got["WATCHDOG=1"]) {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("got %v then %v", got, err)
		}
		got[strings.TrimSpace(string(buf[:n]))] = true
	}
}
