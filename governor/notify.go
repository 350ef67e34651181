package governor

import (
	"fmt"
	"net"
	"os"
)

// Notifier sends sd_notify messages (READY=1, WATCHDOG=1) to systemd's
// $NOTIFY_SOCKET. Its zero value, or one made without the variable set, does
// nothing, so the daemon runs the same with or without systemd.
type Notifier struct{ addr string }

// NotifierFromEnv reads $NOTIFY_SOCKET.
func NotifierFromEnv() Notifier { return Notifier{addr: os.Getenv("NOTIFY_SOCKET")} }

// NewNotifier returns a notifier for a socket path ("@name" for abstract).
func NewNotifier(addr string) Notifier { return Notifier{addr: addr} }

// Enabled says whether there is a socket to notify.
func (n Notifier) Enabled() bool { return n.addr != "" }

// Notify sends one state string, e.g. "READY=1" or "WATCHDOG=1".
func (n Notifier) Notify(state string) error {
	if n.addr == "" {
		return nil
	}
	addr := n.addr
	if addr[0] == '@' {
		// Abstract namespace: Go spells the leading NUL as '@' too.
		addr = "@" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.addr, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.addr, err)
	}
	return nil
}
