package metrics

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// PortHolder is who listens on a TCP port: the account that owns the
// listening socket (the uid column of /proc/net/tcp or tcp6) and, when this
// process may read its descriptors (its own account's processes, or every
// process as root), the process.
type PortHolder struct {
	Addr    netip.AddrPort // where it listens
	UID     int
	User    string // "" when the uid has no name
	PID     int    // 0 when not found
	Command string // /proc/PID/comm
}

func (h PortHolder) String() string {
	s := fmt.Sprintf("uid %d", h.UID)
	if h.User != "" {
		s = fmt.Sprintf("%s (uid %d)", h.User, h.UID)
	}
	if h.PID != 0 {
		s += fmt.Sprintf(", pid %d", h.PID)
		if h.Command != "" {
			s += " (" + h.Command + ")"
		}
	}
	return s + ", listening on " + h.Addr.String()
}

// FindPortHolder names who listens where binding addr (IP:PORT) would
// collide: on its port, at its address or at an unspecified one (0.0.0.0,
// ::). It reads /proc/net/tcp and tcp6, which list every socket of this
// network namespace whatever its owner; false when none listens there (a
// socket bound and not listening is not listed, nor is one that has just
// closed).
func FindPortHolder(addr netip.AddrPort) (PortHolder, bool) {
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		h, inode, ok := listenerIn(f, addr)
		f.Close()
		if !ok {
			continue
		}
		if u, err := user.LookupId(strconv.Itoa(h.UID)); err == nil {
			h.User = u.Username
		}
		h.PID, h.Command = socketOwner(inode)
		return h, true
	}
	return PortHolder{}, false
}

// tcpListen is the st column of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// listenerIn finds, in a /proc/net/tcp or tcp6 table, a listening socket
// that binding want would collide with: its holder (uid and address) and
// its inode.
func listenerIn(table io.Reader, want netip.AddrPort) (PortHolder, string, bool) {
	sc := bufio.NewScanner(table)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		local, err := parseProcAddr(f[1])
		if err != nil || local.Port() != want.Port() {
			continue
		}
		if ip := local.Addr().Unmap(); !ip.IsUnspecified() && !want.Addr().Unmap().IsUnspecified() && ip != want.Addr().Unmap() {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		if err != nil {
			continue
		}
		return PortHolder{Addr: local, UID: uid}, f[9], true
	}
	return PortHolder{}, "", false
}

// parseProcAddr reads a local_address of /proc/net/tcp ("0100007F:2507")
// or tcp6: the address in hex, as 32-bit words in the host's order
// (little-endian on every machine rig runs on), and the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%q: no port", s)
	}
	b, err := hex.DecodeString(host)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, fmt.Errorf("%q: not an address", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%q: port: %w", s, err)
	}
	ip, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(ip, uint16(p)), nil
}

// socketOwner finds the process holding the socket with inode among the
// descriptors this process may read: 0 when none.
func socketOwner(inode string) (pid int, command string) {
	target := "socket:[" + inode + "]"
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		id, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", p.Name(), "fd")
		fds, _ := os.ReadDir(dir)
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && l == target {
				comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
				return id, strings.TrimSpace(string(comm))
			}
		}
	}
	return 0, ""
}

// holderOf is FindPortHolder for a HOST:PORT that CheckAddr accepted
// ("localhost" is 127.0.0.1, where the listener binds).
func holderOf(addr string) (PortHolder, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return PortHolder{}, false
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return PortHolder{}, false
	}
	p, err := net.LookupPort("tcp", port)
	if err != nil {
		return PortHolder{}, false
	}
	return FindPortHolder(netip.AddrPortFrom(ip, uint16(p)))
}
