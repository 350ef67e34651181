package metrics

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// A /proc/net/tcp and a tcp6 as the kernel writes them (abridged columns
// after inode): which listener does binding each address collide with?
const (
	procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0500000A:2507 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 11111 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:2507 01 00000000:00000000 00:00000000 00000000     0        0 22222 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:2507 00000000:0000 0A 00000000:00000000 00:00000000 00000000   999        0 33333 1 0000000000000000 100 0 0 10 0
   3: 00000000:2508 00000000:0000 0A 00000000:00000000 00:00000000 00000000   998        0 44444 1 0000000000000000 100 0 0 10 0
`
	procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:2509 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 55555 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:250A 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1003        0 66666 1 0000000000000000 100 0 0 10 0
   2: 00000000000000000000000000000000:250B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1004        0 77777 1 0000000000000000 100 0 0 10 0
`
)

func TestListenerInProcNetTCP(t *testing.T) {
	for _, c := range []struct {
		table, want   string
		uid           int
		inode, listen string // "" inode: no collision
	}{
		// 9479 on 127.0.0.1 (uid 999); the connection from 40000 to it and
		// the listener on 10.0.0.5 do not collide with 127.0.0.1.
		{procTCP, "127.0.0.1:9479", 999, "33333", "127.0.0.1:9479"},
		{procTCP, "10.0.0.5:9479", 1001, "11111", "10.0.0.5:9479"},
		// 0.0.0.0:9480 collides with every address.
		{procTCP, "127.0.0.1:9480", 998, "44444", "0.0.0.0:9480"},
		{procTCP, "127.0.0.1:40000", 0, "", ""},
		// ::1 is not 127.0.0.1; ::ffff:127.0.0.1 is; :: is every address.
		{procTCP6, "127.0.0.1:9481", 0, "", ""},
		{procTCP6, "[::1]:9481", 1002, "55555", "[::1]:9481"},
		{procTCP6, "127.0.0.1:9482", 1003, "66666", "[::ffff:127.0.0.1]:9482"},
		{procTCP6, "127.0.0.1:9483", 1004, "77777", "[::]:9483"},
	} {
		h, inode, ok := listenerIn(strings.NewReader(c.table), netip.MustParseAddrPort(c.want))
		if c.inode == "" {
			if ok {
				t.Errorf("%s: found %v (inode %s), want no collision", c.want, h, inode)
			}
			continue
		}
		if !ok || inode != c.inode || h.UID != c.uid || h.Addr.String() != c.listen {
			t.Errorf("%s: %v uid %d inode %s at %s, want uid %d inode %s at %s", c.want, ok, h.UID, inode, h.Addr, c.uid, c.inode, c.listen)
		}
	}
}

// TestTakenPortNamesItsHolder: a taken port's error names the account and
// the process that listen there (this test's own, here); the default port
// held by this same account gives way, and Start's warning names the
// holder. Another account's holder is daemon's red-team test (it needs a
// second account).
func TestTakenPortNamesItsHolder(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()
	h, ok := holderOf(addr)
	if !ok || h.UID != os.Geteuid() || h.PID != os.Getpid() || h.Addr.String() != addr {
		t.Fatalf("holder of %s: %v %+v, want uid %d pid %d", addr, ok, h, os.Geteuid(), os.Getpid())
	}
	_, err = Listen(addr, false)
	for _, want := range []string{addr, fmt.Sprintf("uid %d", os.Geteuid()), fmt.Sprintf("pid %d", os.Getpid()), "--metrics"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a taken named port: %v; want it to name %q", err, want)
		}
	}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, err := New(Daemon, Known{}).Start(ctx, addr, true, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("the default held by this account: %v", err)
	}
	if got.String() == addr || !strings.Contains(logs.String(), "taken by another process of this account") || !strings.Contains(logs.String(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Errorf("served on %s; log:\n%s", got, logs.String())
	}
}
