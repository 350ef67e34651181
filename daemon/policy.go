package daemon

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"rig/api"
	"rig/internal/jsonerr"
	"rig/internal/sizecap"
	"rig/internal/textcheck"
)

// Role is a set of methods a user may call.
type Role string

// The roles of the seed's process: staff run studies, a reviewer gives the
// outside review, the Director approves and decides, an operator looks after
// the machine.
const (
	RoleStaff    Role = "staff"
	RoleReviewer Role = "reviewer"
	RoleDirector Role = "director"
	RoleOperator Role = "operator"
)

var allRoles = []Role{RoleStaff, RoleReviewer, RoleDirector, RoleOperator}

// methodRoles is the role each method needs. withdraw is absent because
// two kinds of people may (the registrant or a Director): Withdraw decides.
// Any other method absent here (status,
// list, check, export: reading what is recorded) needs any role.
var methodRoles = map[string]Role{
	api.MethodRegister: RoleStaff, api.MethodFreeze: RoleStaff, api.MethodPreflight: RoleStaff, api.MethodValidate: RoleStaff,
	api.MethodDryRun: RoleStaff, api.MethodRun: RoleStaff, api.MethodCancel: RoleStaff, api.MethodReport: RoleStaff,
	api.MethodGrade: RoleStaff, api.MethodMerge: RoleStaff, api.MethodEngineReplay: RoleStaff,
	api.MethodReview:  RoleReviewer,
	api.MethodApprove: RoleDirector, api.MethodDecide: RoleDirector, api.MethodAmendDecision: RoleDirector,
	api.MethodProposalApprove: RoleDirector, api.MethodProposalReject: RoleDirector,
	api.MethodBudgetSet: RoleOperator,
	api.MethodTry:       RoleStaff, api.MethodTryPrune: RoleStaff,
}

// ErrPolicy means the policy file is unreadable, malformed or not trusted.
var ErrPolicy = api.ErrPolicy

// Policy says who holds which roles. It is read from a file the governed
// users cannot change; with no file, the daemon's own user holds every role
// and nobody else may connect.
type Policy struct {
	SchemaVersion int `json:"schema_version"`
	// SocketGroup, when set, is the group whose members may connect: the
	// socket is made 0660 and owned by it.
	SocketGroup string  `json:"socket_group,omitempty"`
	Grants      []Grant `json:"grants"`

	file   string
	digest string
	owner  int // single-user mode: the one uid allowed
	single bool
}

// Grant gives roles to a user or to every member of a group.
type Grant struct {
	User  string `json:"user,omitempty"`
	Group string `json:"group,omitempty"`
	Roles []Role `json:"roles"`
}

// SingleUser is the policy of a daemon started with no policy file.
func SingleUser(uid int) *Policy { return &Policy{single: true, owner: uid} }

// Single reports whether this is the no-file policy, under which separation
// of duties cannot be enforced (one person holds every role).
func (p *Policy) Single() bool { return p.single }

// File and Digest name the file the policy came from and its sha256.
func (p *Policy) File() string   { return p.file }
func (p *Policy) Digest() string { return p.digest }

// Describe says in a line what the policy is, for the daemon's start and its
// reload log.
func (p *Policy) Describe() string {
	if p.single {
		name := strconv.Itoa(p.owner)
		if u, err := user.LookupId(name); err == nil {
			name = u.Username
		}
		return fmt.Sprintf("single-user mode (no policy file): %s holds every role, nobody else may connect, and separation of duties is not enforced", name)
	}
	return fmt.Sprintf("policy %s (sha256 %s): %d grants, socket group %q", p.file, p.digest[:12], len(p.Grants), p.SocketGroup)
}

// LoadPolicy reads and checks a policy file. It is trusted only if those it
// governs cannot change it: the file and its folder owned by root or by the
// daemon's own user and writable by nobody else.
func LoadPolicy(path string) (*Policy, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{abs, filepath.Dir(abs)} {
		fi, err := os.Lstat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrPolicy, p, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: %s is a symbolic link; name the file itself", ErrPolicy, p)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != 0 && int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("%w: %s is owned by uid %d; it must belong to root or to the daemon's user (uid %d) (chown root %s)", ErrPolicy, p, st.Uid, os.Geteuid(), p)
		}
		if perm := fi.Mode().Perm(); perm&0o022 != 0 {
			return nil, fmt.Errorf("%w: %s has mode %04o: group or others may change it, so it cannot be trusted (chmod go-w %s)", ErrPolicy, p, perm, p)
		}
	}
	b, err := policyCap.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	return ParsePolicy(abs, b)
}

// policyCap bounds the daemon's policy file, read at start and on SIGHUP.
var policyCap = sizecap.Cap{What: "policy file", Limit: 4 << 20, Fix: "a policy is a few kilobytes of roles and limits: name the file meant"}

// ParsePolicy reads a policy file's bytes; file names it in errors. The
// checks of who owns the file are LoadPolicy's.
func ParsePolicy(file string, b []byte) (*Policy, error) {
	if int64(len(b)) > policyCap.Limit {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, &sizecap.Error{Path: file, What: policyCap.What, Size: int64(len(b)), Limit: policyCap.Limit, Fix: policyCap.Fix, Exact: true})
	}
	if err := textcheck.UTF8(file, b); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %s: %s (the format: rig schema policy, docs/security.md)", ErrPolicy, file, jsonerr.Message(err))
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: %s: more than one JSON value", ErrPolicy, file)
	}
	if err := p.check(file); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	p.file, p.digest = file, hex.EncodeToString(sum[:])
	return &p, nil
}

//go:embed schema/policy.schema.json
var policySchema []byte

// PolicySchema is the JSON Schema of a policy file, as `rig schema policy`
// prints it.
func PolicySchema() []byte { return bytes.Clone(policySchema) }

func (p *Policy) check(file string) error {
	bad := func(field, msg string) error {
		return fmt.Errorf("%w: %s: %s: %s", ErrPolicy, file, field, msg)
	}
	if p.SchemaVersion != 1 {
		return bad("schema_version", fmt.Sprintf("is %d; this rig reads version 1", p.SchemaVersion))
	}
	if len(p.Grants) == 0 {
		return bad("grants", "is empty: name at least one user or group and their roles")
	}
	if len(p.Grants) > 10000 {
		return bad("grants", "holds more than 10000 entries")
	}
	if p.SocketGroup != "" {
		if _, err := user.LookupGroup(p.SocketGroup); err != nil {
			return bad("socket_group", fmt.Sprintf("group %q does not exist (groupadd %s)", p.SocketGroup, p.SocketGroup))
		}
	}
	for i, g := range p.Grants {
		field := fmt.Sprintf("grants[%d]", i)
		if (g.User == "") == (g.Group == "") {
			return bad(field, "name exactly one of user or group")
		}
		if len(g.Roles) == 0 {
			return bad(field+".roles", "is empty; roles are "+rolesList())
		}
		for j, r := range g.Roles {
			if !slices.Contains(allRoles, r) {
				return bad(fmt.Sprintf("%s.roles[%d]", field, j), fmt.Sprintf("%q is not a role; roles are %s", r, rolesList()))
			}
		}
	}
	return nil
}

func rolesList() string {
	var s []string
	for _, r := range allRoles {
		s = append(s, string(r))
	}
	return strings.Join(s, ", ")
}

// RolesOf lists the roles the caller holds.
func (p *Policy) RolesOf(c Caller) []Role {
	if p.single {
		if c.UID == p.owner {
			return allRoles
		}
		return nil
	}
	var out []Role
	for _, g := range p.Grants {
		if g.User == c.User || (g.Group != "" && slices.Contains(c.Groups, g.Group)) {
			for _, r := range g.Roles {
				if !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// authorize refuses a caller who holds no role at all, or not the one the
// method needs, naming what is missing.
func (p *Policy) authorize(c Caller, method string) error {
	roles := p.RolesOf(c)
	if len(roles) == 0 {
		if p.single {
			return fmt.Errorf("%w: %s may not use this daemon: it runs in single-user mode (no policy file) for its own user; ask for a policy file naming you (docs/security.md)", ErrForbidden, c)
		}
		return fmt.Errorf("%w: %s holds no role in %s", ErrForbidden, c, p.file)
	}
	need, ok := methodRoles[method]
	if ok && !slices.Contains(roles, need) {
		return fmt.Errorf("%w: %s needs the %s role; %s holds %v (policy %s)", ErrForbidden, method, need, c, roles, p.file)
	}
	return nil
}
