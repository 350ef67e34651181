package runtimes

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Outbound forwards (a port inside the sandbox to a socket on the host, as
// Aider reaches its arm's proxy) are dialled by rig, not by the sandbox's
// init stage. rig opens each socket once, at start, by a descriptor that does
// not follow links (O_PATH|O_NOFOLLOW) and must be a socket, and connects
// through that descriptor (/proc/self/fd/N names the inode, not the path);
// init asks for a connection over a private socket pair and receives the
// connected descriptor. So a path swapped after start (a symlink to a
// root-only socket) is never followed, and init needs no rights of its own to
// forward: it drops them once the namespaces are made.

// outboundBroker is rig's side: it answers init's requests for connections.
type outboundBroker struct {
	pinned []int // O_PATH descriptors of the forwarded sockets, by index
	conn   *net.UnixConn
}

// pinSocket opens path without following a link and checks it is a socket.
func pinSocket(path string) (int, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return -1, fmt.Errorf("sandbox: outbound socket %s is a symbolic link; a forwarded socket must be the listening socket itself", path)
		}
		return -1, fmt.Errorf("sandbox: outbound socket %s: %w (start its server before the sandbox)", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sandbox: outbound socket %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		unix.Close(fd)
		return -1, fmt.Errorf("sandbox: outbound socket %s is not a socket (mode %o)", path, st.Mode)
	}
	return fd, nil
}

// newOutboundBroker pins every outbound socket and returns the broker and
// init's end of the pair (passed to init as a descriptor).
func newOutboundBroker(fwds []Forward) (*outboundBroker, *os.File, error) {
	b := &outboundBroker{}
	for _, f := range fwds {
		fd, err := pinSocket(f.Socket)
		if err != nil {
			b.close()
			return nil, nil, err
		}
		b.pinned = append(b.pinned, fd)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.close()
		return nil, nil, fmt.Errorf("sandbox: socket pair for the forwarders: %w", err)
	}
	mine := os.NewFile(uintptr(pair[0]), "forward-broker")
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		unix.Close(pair[1])
		b.close()
		return nil, nil, err
	}
	b.conn = c.(*net.UnixConn)
	return b, os.NewFile(uintptr(pair[1]), "forward-init"), nil
}

// serve answers requests until init's end closes. A request is one byte, the
// forward's index; the answer is a status byte (0 ok, 1 failed, then why)
// with the connected socket attached.
func (b *outboundBroker) serve() {
	req := make([]byte, 8)
	for {
		n, _, _, _, err := b.conn.ReadMsgUnix(req, nil)
		if err != nil || n == 0 {
			return
		}
		i := int(req[0])
		if i >= len(b.pinned) {
			_, _, _ = b.conn.WriteMsgUnix([]byte("\x01no such forward"), nil, nil)
			continue
		}
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err := d.Dial("unix", "/proc/self/fd/"+strconv.Itoa(b.pinned[i]))
		if err != nil {
			_, _, _ = b.conn.WriteMsgUnix([]byte("\x01"+err.Error()), nil, nil)
			continue
		}
		f, err := c.(*net.UnixConn).File()
		c.Close()
		if err != nil {
			_, _, _ = b.conn.WriteMsgUnix([]byte("\x01"+err.Error()), nil, nil)
			continue
		}
		_, _, err = b.conn.WriteMsgUnix([]byte{0}, unix.UnixRights(int(f.Fd())), nil)
		f.Close()
		if err != nil {
			return
		}
	}
}

func (b *outboundBroker) close() {
	if b == nil {
		return
	}
	for _, fd := range b.pinned {
		unix.Close(fd)
	}
	b.pinned = nil
	if b.conn != nil {
		b.conn.Close()
	}
}

// outboundDialer is init's side: it asks rig for a connection to forward i.
type outboundDialer struct {
	mu   sync.Mutex
	conn *net.UnixConn
}

func newOutboundDialer(f *os.File) (*outboundDialer, error) {
	c, err := net.FileConn(f) // a close-on-exec copy: the exec stage never holds it
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("the forwarders' socket pair: %w", err)
	}
	return &outboundDialer{conn: c.(*net.UnixConn)}, nil
}

func (d *outboundDialer) dial(i int) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, _, err := d.conn.WriteMsgUnix([]byte{byte(i)}, nil, nil); err != nil {
		return nil, err
	}
	buf, oob := make([]byte, 512), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := d.conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return nil, err
	}
	if n == 0 || buf[0] != 0 {
		if n > 1 {
			return nil, errors.New(string(buf[1:n]))
		}
		return nil, errors.New("rig refused the connection")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("rig's answer carried no connection")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, errors.New("rig's answer carried no connection")
	}
	f := os.NewFile(uintptr(fds[0]), "forwarded")
	defer f.Close()
	return net.FileConn(f)
}

// serveForward copies every accepted connection to a fresh connection from
// dial.
func serveForward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func(in net.Conn) {
			defer in.Close()
			out, err := dial()
			if err != nil {
				return
			}
			defer out.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
			}
			go pipe(out, in)
			go pipe(in, out)
			wg.Wait()
		}(c)
	}
}

// checkForwardPlaces refuses a forwarded socket inside a folder the contained
// process sees: there it could remove the socket and plant a link in its
// place, which rig (inbound: its clients dial the path) would follow.
// socketPath names a place outside them all.
func checkForwardPlaces(spec SandboxSpec) error {
	// What the contained process sees is exactly what jobBinds mounts (it
	// never binds "/" itself, which a /bin/sh script's install prefix names).
	var bound []string
	for _, b := range jobBinds(spec) {
		bound = append(bound, b.path)
	}
	resolve := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			return filepath.Join(r, filepath.Base(p))
		}
		return filepath.Clean(p)
	}
	for kind, fwds := range map[string][]Forward{"inbound": spec.Inbound, "outbound": spec.Outbound} {
		for i, f := range fwds {
			sock := resolve(f.Socket)
			for _, b := range bound {
				if b == "" {
					continue
				}
				if within(sock, resolve(b)) || within(f.Socket, b) {
					return fmt.Errorf("sandbox: %s[%d].socket %s lies inside %s, which the contained process sees: it could swap the socket for a link; name the socket with socketPath (rig's own folder)", kind, i, f.Socket, b)
				}
			}
		}
	}
	return nil
}
