package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParsePolicyRefusesNamingTheField(t *testing.T) {
	for _, c := range []struct{ body, mention string }{
		{`{"schema_version":2,"grants":[{"user":"a","roles":["staff"]}]}`, "schema_version"},
		{`{"schema_version":1,"grants":[]}`, "grants: is empty"},
		{`{"schema_version":1,"grants":[{"user":"a","group":"g","roles":["staff"]}]}`, "grants[0]: name exactly one of user or group"},
		{`{"schema_version":1,"grants":[{"user":"a","roles":[]}]}`, "grants[0].roles: is empty"},
		{`{"schema_version":1,"grants":[{"user":"a","roles":["admin"]}]}`, `grants[0].roles[0]: "admin" is not a role`},
		{`{"schema_version":1,"grants":[{"user":"a","roles":["staff"]}],"socket_group":"no-such-group-rig"}`, `socket_group: group "no-such-group-rig" does not exist`},
		{`{"schema_version":1,"grants":[{"user":"a","roles":["staff"]}],"extra":1}`, `unknown field "extra"`},
		{`{"schema_version":1,"grants":[{"user":"a","roles":["staff"]}]} {}`, "more than one JSON value"},
		{"{\"schema_version\":1,\"grants\":[{\"user\":\"\xff\",\"roles\":[\"staff\"]}]}", "UTF-8"},
	} {
		_, err := ParsePolicy("/etc/rig/policy.json", []byte(c.body))
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), c.mention) || !strings.Contains(err.Error(), "/etc/rig/policy.json") {
			t.Errorf("%s: want ErrPolicy naming the file and %q, got %v", c.body, c.mention, err)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"grants":[{"user":"a","roles":["staff","director"]},{"group":"g","roles":["reviewer"]}]}`))
	f.Add([]byte(`{"schema_version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePolicy("policy.json", b)
		if err != nil {
			if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), "policy.json") {
				t.Fatalf("an error that is not ErrPolicy naming the file: %v", err)
			}
			return
		}
		// A policy that loads grants only known roles, each to a user or a group.
		for _, g := range p.Grants {
			if (g.User == "") == (g.Group == "") || len(g.Roles) == 0 {
				t.Fatalf("accepted grant %+v", g)
			}
			for _, r := range g.Roles {
				if !slices.Contains(allRoles, r) {
					t.Fatalf("accepted role %q", r)
				}
			}
		}
	})
}

// The schema editors read and the loader agree on the roles.
func TestPolicySchemaNamesTheRoles(t *testing.T) {
	var s struct {
		Properties struct {
			Grants struct {
				Items struct {
					Properties struct {
						Roles struct {
							Items struct {
								Enum []Role `json:"enum"`
							} `json:"items"`
						} `json:"roles"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"grants"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(PolicySchema(), &s); err != nil {
		t.Fatal(err)
	}
	if got := s.Properties.Grants.Items.Properties.Roles.Items.Enum; !slices.Equal(got, allRoles) {
		t.Fatalf("schema roles %v, loader roles %v", got, allRoles)
	}
}

func TestLoadPolicyRefusesAFileOthersCanChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, []byte(`{"schema_version":1,"grants":[{"user":"a","roles":["staff"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(path); err != nil {
		t.Fatalf("a 0644 file of the daemon's user: %v", err)
	}
	for _, mode := range []os.FileMode{0o664, 0o666, 0o646} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := LoadPolicy(path)
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("mode %04o: want refused naming the file and the fix, got %v", mode, err)
		}
	}
	os.Chmod(path, 0o644)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPolicy(path); !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), dir) {
		t.Errorf("a folder others can write (and so replace the file): %v", err)
	}
}

func TestSingleUserPolicyAdmitsOnlyTheDaemonsUser(t *testing.T) {
	p := SingleUser(1000)
	if err := p.authorize(Caller{UID: 1000, User: "me"}, "approve"); err != nil {
		t.Fatalf("the daemon's user holds every role: %v", err)
	}
	err := p.authorize(Caller{UID: 1001, User: "other"}, "list")
	if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "single-user mode") {
		t.Fatalf("another user: %v", err)
	}
	if !strings.Contains(p.Describe(), "separation of duties is not enforced") {
		t.Errorf("the start message hides that one person holds every role: %s", p.Describe())
	}
}

// A handler that panics answers its own caller with ErrInternal; the daemon
// goes on (the stack is in the log).
func TestAPanickingRequestIsAnErrorNotACrash(t *testing.T) {
	var log bytes.Buffer
	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	boom := func(context.Context, json.RawMessage, io.Writer) (any, error) {
		panic("a bug in a handler")
	}
	_, err = svc.guarded(context.Background(), "boom", boom, nil, io.Discard)
	if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "keeps running") {
		t.Fatalf("want ErrInternal, got %v", err)
	}
	if !strings.Contains(log.String(), "goroutine") {
		t.Errorf("the log has no stack:\n%s", log.String())
	}
}

func TestPolicyReloadsOnHangupAndIsAudited(t *testing.T) {
	home := t.TempDir()
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.json")
	write := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"schema_version":1,"grants":[{"user":"a","roles":["staff"]}]}`)
	p, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(home, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	svc.Access().SetPolicy(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloadOnHangup(ctx, svc, path, svc.Log)
	write(`{"schema_version":1,"grants":[{"user":"a","roles":["staff","director"]}]}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for svc.Access().Policy().Digest() == p.Digest() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := svc.Access().Policy().RolesOf(Caller{User: "a"}); !slices.Contains(got, RoleDirector) {
		t.Fatalf("after SIGHUP a holds %v", got)
	}
	audit, err := os.ReadFile(filepath.Join(home, "audits", "policy.jsonl"))
	if err != nil || !strings.Contains(string(audit), "reloaded on SIGHUP") || !strings.Contains(string(audit), p.Digest()) {
		t.Fatalf("the reload is not audited with what it replaced: %v\n%s", err, audit)
	}
	// A file that no longer loads leaves the policy in force.
	before := svc.Access().Policy().Digest()
	write(`{"schema_version":1,"grants":[]}`)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	time.Sleep(300 * time.Millisecond)
	if svc.Access().Policy().Digest() != before {
		t.Fatal("a broken policy file replaced the one in force")
	}
}
