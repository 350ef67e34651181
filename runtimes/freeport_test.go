package runtimes

import (
	"fmt"
	"net"
	"testing"
)

// TestFreeLoopbackPortIsNotHandedOutAgain: a port just chosen is kept from
// the kernel's next choices (TIME_WAIT), yet a server can bind it at once.
func TestFreeLoopbackPortIsNotHandedOutAgain(t *testing.T) {
	chosen := map[int]bool{}
	for range 200 {
		p, err := FreeLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		if chosen[p] {
			t.Fatalf("port %d was handed out twice in 200 choices", p)
		}
		chosen[p] = true
	}
	p, err := FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("a server cannot bind the port just chosen: %v", err)
	}
	l.Close()
}
