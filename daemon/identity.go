package daemon

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os/user"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"rig/api"
)

// Caller is who sent a request, as the kernel says: the peer credentials of
// the unix socket connection, resolved to names. Nothing the caller typed goes
// into it.
type Caller struct {
	UID    int      `json:"uid"`
	GID    int      `json:"gid"`
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// GIDs are the ids of Groups and GID: whose rights a file the request
	// names is read with (callerfiles.go).
	GIDs []int `json:"gids,omitempty"`
}

// String is the identity as the audit records it: the user name, with the uid
// so that a renamed or deleted account stays traceable.
func (c Caller) String() string { return fmt.Sprintf("%s (uid %d)", c.User, c.UID) }

// ErrIdentity means a request named someone other than its caller.
var ErrIdentity = api.ErrIdentity

// ErrForbidden means the caller lacks the role a method needs, or separation
// of duties forbids the caller this step on this study.
var ErrForbidden = api.ErrForbidden

type callerKey struct{}

func withCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller of the request being served, if the request
// came through the socket.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// peerCaller reads the connection's peer credentials (SO_PEERCRED).
func peerCaller(conn net.Conn) (Caller, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return Caller{}, fmt.Errorf("connection is %T, not a unix socket", conn)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Caller{}, err
	}
	if credErr != nil {
		return Caller{}, fmt.Errorf("reading the peer's credentials: %w", credErr)
	}
	return resolveCaller(int(cred.Uid), int(cred.Gid)), nil
}

// resolveCaller names a uid and its groups; an account without a name is
// recorded by number.
func resolveCaller(uid, gid int) Caller {
	c := Caller{UID: uid, GID: gid, User: "uid-" + strconv.Itoa(uid), GIDs: []int{gid}}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return c
	}
	c.User = u.Username
	ids, _ := u.GroupIds()
	if !slices.Contains(ids, strconv.Itoa(gid)) {
		ids = append(ids, strconv.Itoa(gid))
	}
	for _, id := range ids {
		if n, err := strconv.Atoi(id); err == nil && !slices.Contains(c.GIDs, n) {
			c.GIDs = append(c.GIDs, n)
		}
		if g, err := user.LookupGroupId(id); err == nil {
			c.Groups = append(c.Groups, g.Name)
		}
	}
	slices.Sort(c.Groups)
	slices.Sort(c.GIDs)
	return c
}

// actor is who a request acts as: the caller the socket names. A name the
// request typed (a --director, --reviewer or --actor flag kept for
// readability) must be that caller. A call made inside the daemon's own
// process (the daemon itself, tests of the service) acts as the daemon's user.
func (s *Service) actor(ctx context.Context, typed string) (string, error) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return cmp.Or(typed, currentUser()), nil
	}
	if typed != "" && typed != c.User && typed != c.String() {
		return "", fmt.Errorf("%w: the request names %q but comes from %s; rig records who calls, so drop the flag or run the command as %s", ErrIdentity, typed, c, typed)
	}
	return c.String(), nil
}
