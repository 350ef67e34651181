package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"rig/internal/testenv"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/api"
	"rig/internal/provision"
	"rig/studies"
)

// The test binary doubles as a client run under another OS user: with these
// variables set it makes one call through the real socket, prints the reply
// as JSON and exits before any test runs.
const (
	asUserMethod = "_RIG_TEST_CALL_METHOD"
	asUserBody   = "_RIG_TEST_CALL_BODY"
	asUserSocket = "_RIG_TEST_CALL_SOCKET"
)

func init() {
	if m := os.Getenv(asUserMethod); m != "" {
		os.Exit(callAsChild(m))
	}
}

type childReply struct {
	Result json.RawMessage `json:"result"`
	Text   string          `json:"text"`
	Error  string          `json:"error"`
	Code   string          `json:"code"`
}

func callAsChild(method string) int {
	var out json.RawMessage
	var text bytes.Buffer
	err := api.Client{Socket: os.Getenv(asUserSocket)}.Call(context.Background(), method, json.RawMessage(os.Getenv(asUserBody)), &out, &text)
	rep := childReply{Result: out, Text: text.String()}
	if err != nil {
		rep.Error = err.Error()
		var re *api.RemoteError
		if errors.As(err, &re) {
			rep.Code = re.Code
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return 0
}

// osUsers creates real accounts and a group for one test and removes them
// after it.
type osUsers struct {
	t      *testing.T
	prefix string
}

func (u osUsers) name(role string) string { return u.prefix + "-" + role }

func (u osUsers) run(args ...string) {
	u.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		u.t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func (u osUsers) addGroup(name string) {
	u.run("groupadd", name)
	u.t.Cleanup(func() { _ = exec.Command("groupdel", name).Run() })
}

func (u osUsers) addUser(name string, groups ...string) *user.User {
	u.t.Helper()
	args := []string{"useradd", "--no-create-home", "--shell", "/usr/sbin/nologin"}
	if len(groups) > 0 {
		args = append(args, "--groups", strings.Join(groups, ","))
	}
	u.run(append(args, name)...)
	u.t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
	acc, err := user.Lookup(name)
	if err != nil {
		u.t.Fatal(err)
	}
	return acc
}

// callAs makes one call through the socket as the OS user acc.
func callAs(t *testing.T, bin, socket string, acc *user.User, method string, req any) childReply {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(acc.Uid)
	gid, _ := strconv.Atoi(acc.Gid)
	var groups []uint32
	ids, _ := acc.GroupIds()
	for _, id := range ids {
		g, _ := strconv.Atoi(id)
		groups = append(groups, uint32(g))
	}
	cmd := exec.Command(bin, "-test.run", "^$")
	cmd.Env = []string{asUserMethod + "=" + method, asUserBody + "=" + string(body), asUserSocket + "=" + socket, "HOME=/nonexistent"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("calling %s as %s: %v\n%s", method, acc.Username, err, out)
	}
	var rep childReply
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("reply of %s as %s: %v\n%s", method, acc.Username, err, out)
	}
	return rep
}

// TestRolesAndIdentitiesWithRealUsers starts the daemon's server with a policy
// and acts as real OS users through the real socket: the socket keeps
// outsiders out, roles and separation of duties hold, and every step is
// recorded under the identity the kernel gave, not a typed name.
func TestRolesAndIdentitiesWithRealUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates real OS users and a group, and acts as each through the socket")
	}
	for _, tool := range []string{"useradd", "userdel", "groupadd", "groupdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (Debian package passwd) to create the test's users: %v", tool, err)
		}
	}
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (register fingerprints them)", err)
	u := osUsers{t: t, prefix: fmt.Sprintf("rigt%d", os.Getpid()%100000)}
	group := u.name("studio")
	u.addGroup(group)
	staff := u.addUser(u.name("staff"), group)
	rev := u.addUser(u.name("rev"), group)
	dir := u.addUser(u.name("dir"), group)
	outsider := u.addUser(u.name("out"))

	policyDir, err := os.MkdirTemp("", "rig-policy-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(policyDir)
	policyFile := filepath.Join(policyDir, "policy.json")
	policy := map[string]any{"schema_version": 1, "socket_group": group, "grants": []map[string]any{
		{"user": staff.Username, "roles": []string{"staff", "reviewer"}},
		{"user": rev.Username, "roles": []string{"reviewer", "director"}},
		{"user": dir.Username, "roles": []string{"director"}},
		// A role does not get past the socket: this user is not in the group.
		{"user": outsider.Username, "roles": []string{"staff"}},
	}}
	b, _ := json.Marshal(policy)
	if err := os.WriteFile(policyFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(policyFile)
	if err != nil {
		t.Fatal(err)
	}

	binDir, err := os.MkdirTemp("", "rig-ident-bin-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(binDir)
	self, _ := os.Executable()
	bin := filepath.Join(binDir, "daemon.test")
	copyFile(t, self, bin)
	for _, d := range []string{binDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sockDir, err := os.MkdirTemp("", "rig-ident-sock-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	socket := filepath.Join(sockDir, "rig.sock")

	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	svc.Access().SetPolicy(p)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- svc.Serve(ctx, socket) }()
	waitForSocket(t, socket)
	if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode: %v %v, want 0660", fi.Mode().Perm(), err)
	}

	const name = "roles"
	want := func(rep childReply, code, mention string) {
		t.Helper()
		if rep.Code != code || !strings.Contains(rep.Error, mention) {
			t.Fatalf("want code %q with %q, got code %q: %s", code, mention, rep.Code, rep.Error)
		}
	}
	ok := func(rep childReply) {
		t.Helper()
		if rep.Error != "" {
			t.Fatalf("refused: %s", rep.Error)
		}
	}

	// Outside the group: the socket's folder cannot even be entered.
	rep := callAs(t, bin, socket, outsider, "list", struct{}{})
	if !strings.Contains(rep.Error, "permission denied") {
		t.Fatalf("an outsider reached the daemon: %+v", rep)
	}
	// The command line reads the design with the caller's rights and sends
	// it; the daemon reads no file of the test's (closed to staff) for them.
	designFile := judgedStudyDesign(t, name)
	design, err := os.ReadFile(designFile)
	if err != nil {
		t.Fatal(err)
	}
	want(callAs(t, bin, socket, staff, "register", RegisterRequest{DesignFile: designFile}), "forbidden", "may not enter this folder")
	ok(callAs(t, bin, socket, staff, "register", RegisterRequest{DesignFile: designFile, Design: design}))
	// Staff cannot approve, and the error names the role needed.
	want(callAs(t, bin, socket, staff, "approve", NameRequest{Name: name}), "forbidden", "needs the director role")
	// The registrant cannot review their own study, though they hold the role.
	review := api.Review{Verdict: "pass", LicenceLine: "licences: smollm2-135m-instruct (Apache-2.0) and the rest checked; all items allowed for evaluation"}
	want(callAs(t, bin, socket, staff, "review", ReviewRequest{Name: name, Review: review}), "forbidden", "registered study roles")
	// A typed reviewer that is not the caller is refused, naming both.
	typed := review
	typed.Reviewer = "outside-model"
	want(callAs(t, bin, socket, rev, "review", ReviewRequest{Name: name, Review: typed}), "identity_mismatch", `names "outside-model" but comes from `+rev.Username)
	ok(callAs(t, bin, socket, rev, "review", ReviewRequest{Name: name, Review: review}))
	// The reviewer cannot approve the study they reviewed.
	want(callAs(t, bin, socket, rev, "approve", NameRequest{Name: name}), "forbidden", "reviewed study roles")
	// A typed --director that differs is refused; the director's own call is recorded as them.
	want(callAs(t, bin, socket, dir, "approve", NameRequest{Name: name, Actor: "the-director"}), "identity_mismatch", "the-director")
	ok(callAs(t, bin, socket, dir, "approve", NameRequest{Name: name, Actor: dir.Username, Why: "go"}))

	rep = callAs(t, bin, socket, staff, "status", NameRequest{Name: name})
	ok(rep)
	var info StudyInfo
	if err := json.Unmarshal(rep.Result, &info); err != nil {
		t.Fatal(err)
	}
	wantActors := map[string]string{"register": staff.Username, "review": rev.Username, "approve": dir.Username}
	for _, e := range info.Audit {
		if w, ok := wantActors[e.Event]; ok {
			if want := fmt.Sprintf("%s (uid %s)", w, map[string]string{"register": staff.Uid, "review": rev.Uid, "approve": dir.Uid}[e.Event]); e.Actor != want {
				t.Errorf("%s recorded as %q, want %q", e.Event, e.Actor, want)
			}
			delete(wantActors, e.Event)
		}
	}
	if len(wantActors) > 0 || info.State != studies.Approved {
		t.Fatalf("state %s, audit missing %v: %+v", info.State, wantActors, info.Audit)
	}
	rep = callAs(t, bin, socket, staff, "export", NameRequest{Name: name, Audit: true})
	ok(rep)
	if !strings.Contains(rep.Text, dir.Username+" (uid "+dir.Uid+")") {
		t.Errorf("the store's export does not show the Director's identity:\n%.2000s", rep.Text)
	}
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}

	// A world-writable policy stops the daemon at start, naming the file.
	if err := os.Chmod(policyFile, 0o666); err != nil {
		t.Fatal(err)
	}
	err = Run(context.Background(), Options{Home: t.TempDir(), Socket: filepath.Join(t.TempDir(), "rig.sock"), Policy: policyFile})
	if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), policyFile) || !strings.Contains(err.Error(), "0666") {
		t.Fatalf("want the daemon refused naming %s and its mode, got %v", policyFile, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

func waitForSocket(t *testing.T, socket string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(socket); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no socket at %s", socket)
}
