package daemon

import (
	"context"
	"encoding/json"
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
	"testing"
	"time"

	"rig/analysis"
	"rig/api"
	"rig/internal/atomicfile"
	"rig/internal/provision"
	"rig/studies"
	"rig/studies/studytest"
)

// The attacks in this file come from real OS accounts over the daemon's real
// socket, under a policy file, as on a studio's machine. Each passes only
// when the attack fails.

// policyDaemon is a daemon's service serving a policy on a real socket, and
// the test binary copied where every account may run it (callAs).
type policyDaemon struct {
	svc    *Service
	bin    string
	socket string
}

// startPolicyDaemon serves svc under a policy granting roles to groups (so
// that a renamed account keeps its roles, as it does on a real machine).
// methods, when set, replaces the served methods (to put a fake analysis
// under decide).
func startPolicyDaemon(t *testing.T, socketGroup string, grants []map[string]any, methods func(*Service) map[string]handler) policyDaemon {
	t.Helper()
	policyDir, err := os.MkdirTemp("", "rig-policy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(policyDir) })
	policyFile := filepath.Join(policyDir, "policy.json")
	b, _ := json.Marshal(map[string]any{"schema_version": 1, "socket_group": socketGroup, "grants": grants})
	if err := os.WriteFile(policyFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadPolicy(policyFile)
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := os.MkdirTemp("", "rig-redteam-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	bin := filepath.Join(binDir, "daemon.test")
	copyFile(t, self, bin)
	sockDir, err := os.MkdirTemp("", "rig-redteam-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "rig.sock")

	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	svc.Access().SetPolicy(p)
	l, err := listenSocket(socket, socketGroup)
	if err != nil {
		t.Fatal(err)
	}
	m := svc.methods()
	if methods != nil {
		m = methods(svc)
	}
	srv := svc.httpServer(m)
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	waitForSocket(t, socket)
	return policyDaemon{svc: svc, bin: bin, socket: socket}
}

// needAccounts skips a test that cannot make real accounts here.
func needAccounts(t *testing.T, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates real OS accounts and acts as each through the socket")
	}
	for _, tool := range append([]string{"useradd", "userdel", "groupadd", "groupdel"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (Debian package passwd) to create the test's accounts: %v", tool, err)
		}
	}
}

// rename gives acc a new login name, keeping its uid and groups, as an
// administrator renaming an account does; the account is removed under its
// new name after the test.
func (u osUsers) rename(acc *user.User, to string) *user.User {
	u.t.Helper()
	u.run("usermod", "--login", to, acc.Username)
	// Cleanups run last first: the account goes, then the private group
	// useradd made under its old name (userdel removes only a group of the
	// account's new name).
	u.t.Cleanup(func() { _ = exec.Command("groupdel", acc.Username).Run() })
	u.t.Cleanup(func() { _ = exec.Command("userdel", to).Run() })
	renamed, err := user.Lookup(to)
	if err != nil {
		u.t.Fatal(err)
	}
	if renamed.Uid != acc.Uid {
		u.t.Fatalf("renamed %s to %s: uid %s, want %s", acc.Username, to, renamed.Uid, acc.Uid)
	}
	return renamed
}

// display is how the daemon names an account in its records.
func display(acc *user.User) string { return acc.Username + " (uid " + acc.Uid + ")" }

// fakeDecidable records, as the daemon's earlier requests would have, a
// study registered by registrant, reviewed by reviewer, approved by director,
// frozen and run to the end, with a snapshot for decide to read. The records
// carry the actors' display strings only, as daemons before uids were stored
// wrote them. Its analysis is fakeDecidableAnalysis: decide's checks, not
// the statistics, are under test.
func fakeDecidable(t *testing.T, s *Service, name string, registrant, reviewer, director *user.User) {
	t.Helper()
	ctx := context.Background()
	dh, canon := fakeRegistered(t, s, name, registrant)
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	review := &studies.Review{Reviewer: display(reviewer), Verdict: "pass", LicenceLine: "licences: smollm2-135m-instruct (Apache-2.0) and every other item checked against the bundled registry", DesignHash: dh}
	for _, ev := range []studies.Event{
		{Kind: studies.EventReview, Actor: display(reviewer), At: at.Add(time.Minute), Why: "read", Review: review},
		{Kind: studies.EventApprove, Actor: display(director), At: at.Add(2 * time.Minute), Why: "go"},
		{Kind: studies.EventFreeze, Actor: display(registrant), At: at.Add(3 * time.Minute), SnapshotHash: strings.Repeat("3", 64), Why: "frozen"},
		{Kind: studies.EventRun, Actor: display(registrant), At: at.Add(4 * time.Minute), Execution: "exec-1", Why: "run"},
		{Kind: studies.EventFinish, Actor: "rig daemon", At: at.Add(5 * time.Minute), Execution: "exec-1", Why: "finished"},
	} {
		if _, err := s.apply(ctx, name, ev); err != nil {
			t.Fatal(err)
		}
	}
	snap := &studies.Snapshot{Version: studies.SnapshotVersion, DesignHash: dh, Design: canon}
	var err error
	if snap.Hash, err = studies.Hash(snap); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(studyDir(t, s, name).Snapshot(), snap, 0o400); err != nil {
		t.Fatal(err)
	}
}

// fakeRegistered records, as register would have, the demo design as a
// draft study registered by registrant (a display string only, as daemons
// before uids were stored wrote it).
func fakeRegistered(t *testing.T, s *Service, name string, registrant *user.User) (designHash string, canonical []byte) {
	t.Helper()
	d := studytest.DemoDesign(t)
	dh, err := studies.DesignHash(d)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := studies.Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	reg := &studies.Registration{Name: name, DesignHash: dh, Design: canon, Lifecycle: studies.NewLifecycle(dh, display(registrant), at)}
	if err := s.Studies().create(context.Background(), reg, display(registrant), "registered from test"); err != nil {
		t.Fatal(err)
	}
	return dh, canon
}

// fakeDecidableAnalysis stands in for the analysis of exec-1: the rule
// ships the challenger gemma.
func fakeDecidableAnalysis(_ context.Context, name, _ string) (*Analysis, error) {
	hash, err := analysis.ComparisonHash(analysis.Input{})
	if err != nil {
		return nil, err
	}
	return &Analysis{Study: name, Execution: "exec-1", Input: analysis.Input{},
		Report: &analysis.Report{ComparisonHash: hash, Decision: analysis.Decision{Action: "ship gemma", Verdict: analysis.Ship, Arm: "gemma", NextBaseline: "gemma", Trace: []string{"clause 1"}, ComparisonHash: hash}}}, nil
}

// TestRedTeamDecideByRegistrant: a registrant who is also a Director decides
// their own study; a reviewer who is also a Director decides the study they
// reviewed; each again after their account is renamed (same uid, new name);
// and a Director approves the publish proposal their own decision wrote,
// after a rename. Every one is refused, naming the duty.
func TestRedTeamDecideByRegistrant(t *testing.T) {
	needAccounts(t, "usermod")
	u := osUsers{t: t, prefix: fmt.Sprintf("rigd%d", os.Getpid()%100000)}
	studio, staffG, revG, dirG := u.name("studio"), u.name("staffg"), u.name("revg"), u.name("dirg")
	for _, g := range []string{studio, staffG, revG, dirG} {
		u.addGroup(g)
	}
	reg := u.addUser(u.name("reg"), studio, staffG, dirG)
	rev := u.addUser(u.name("rev"), studio, revG, dirG)
	dir := u.addUser(u.name("dir"), studio, dirG)
	dir2 := u.addUser(u.name("dir2"), studio, dirG)
	grants := []map[string]any{
		{"group": staffG, "roles": []string{"staff"}},
		{"group": revG, "roles": []string{"reviewer"}},
		{"group": dirG, "roles": []string{"director"}},
	}
	pd := startPolicyDaemon(t, studio, grants, func(s *Service) map[string]handler {
		m := s.methods()
		m["decide"] = method(func(ctx context.Context, r DecideRequest, _ io.Writer) (any, error) {
			return s.Reports().decide(ctx, r, fakeDecidableAnalysis)
		})
		return m
	})
	hash, err := analysis.ComparisonHash(analysis.Input{})
	if err != nil {
		t.Fatal(err)
	}
	decide := func(acc *user.User, study string) childReply {
		return callAs(t, pd.bin, pd.socket, acc, "decide", DecideRequest{Study: study, ComparisonHash: hash, Rationale: "the rule ships gemma"})
	}
	refused := func(what string, rep childReply, mention string) {
		t.Helper()
		if rep.Error == "" {
			t.Errorf("%s: the attack succeeded: %s", what, rep.Result)
			return
		}
		if rep.Code != "forbidden" || !strings.Contains(rep.Error, mention) {
			t.Errorf("%s: refused, but not by separation of duties (want code forbidden naming %q): code %q: %s", what, mention, rep.Code, rep.Error)
		}
	}

	for _, study := range []string{"by-reg", "by-reg-renamed", "by-rev", "by-rev-renamed", "proposal"} {
		fakeDecidable(t, pd.svc, study, reg, rev, dir)
	}
	refused("the registrant decides", decide(reg, "by-reg"), "registered")
	refused("the reviewer decides", decide(rev, "by-rev"), "reviewed")
	regRenamed := u.rename(reg, u.name("reg2"))
	refused("the registrant, renamed, decides", decide(regRenamed, "by-reg-renamed"), "registered")
	revRenamed := u.rename(rev, u.name("rev2"))
	refused("the reviewer, renamed, decides", decide(revRenamed, "by-rev-renamed"), "reviewed")

	// A reviewer who is also a Director reviews a draft claiming another's
	// uid in the request, then approves: the review is recorded under the
	// caller's uid, so the approval is refused.
	fakeRegistered(t, pd.svc, "forged", reg)
	other, _ := strconv.Atoi(dir2.Uid)
	forged := api.Review{Verdict: "pass", LicenceLine: "licences: smollm2-135m-instruct (Apache-2.0) and every other item checked against the bundled registry", ReviewerUID: &other}
	if rep := callAs(t, pd.bin, pd.socket, revRenamed, "review", ReviewRequest{Name: "forged", Review: forged, Why: "read"}); rep.Error != "" {
		t.Fatalf("review: %s", rep.Error)
	}
	refused("the reviewer, having claimed another uid in the review, approves",
		callAs(t, pd.bin, pd.socket, revRenamed, "approve", NameRequest{Name: "forged", Why: "mine"}), "reviewed")

	// A Director with no part in the study decides it; their decision
	// proposes gemma, and they may not approve that proposal, renamed or not.
	rep := decide(dir, "proposal")
	if rep.Error != "" {
		t.Fatalf("a Director with no part in the study may decide it: %s", rep.Error)
	}
	var rec DecisionRecord
	if err := json.Unmarshal(rep.Result, &rec); err != nil || rec.Proposal == "" {
		t.Fatalf("decision %s (%v): want a publish proposal", rep.Result, err)
	}
	dirRenamed := u.rename(dir, u.name("dir3"))
	refused("the decider, renamed, approves their own proposal",
		callAs(t, pd.bin, pd.socket, dirRenamed, "proposal-approve", ProposalRequest{ID: rec.Proposal, Why: "mine"}), "proposed")
	// Another Director may.
	if rep := callAs(t, pd.bin, pd.socket, dir2, "proposal-approve", ProposalRequest{ID: rec.Proposal, Why: "read the report"}); rep.Error != "" {
		t.Fatalf("another Director approving: %s", rep.Error)
	}
	uid, _ := strconv.Atoi(dir2.Uid)
	p, err := pd.svc.Proposals().Get(rec.Proposal)
	if err != nil || p.State != ProposalApproved || p.DecidedBy != display(dir2) {
		t.Fatalf("proposal %+v (%v): want approved by %s (uid %d)", p, err, display(dir2), uid)
	}
}

// TestRedTeamRegisterRootOnlyFile: an account with the staff role registers
// a root-only file (mode 0600) as the design, through a link it planted, as
// a design's task bank, as its licence registry, as --registry and as a
// model file. The
// daemon runs as root and could read every one; each is refused, and no
// line of the file appears in the reply. Last, the same account registers a
// design it may read, so the refusals were the files' rights' doing.
func TestRedTeamRegisterRootOnlyFile(t *testing.T) {
	needAccounts(t)
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (register fingerprints them)", err)
	u := osUsers{t: t, prefix: fmt.Sprintf("rigf%d", os.Getpid()%100000)}
	studio := u.name("studio")
	u.addGroup(studio)
	staff := u.addUser(u.name("staff"), studio)
	pd := startPolicyDaemon(t, studio, []map[string]any{{"group": studio, "roles": []string{"staff"}}}, nil)

	// Root's files: a folder every account may enter, files only root may read.
	secrets := mkdirMode(t, 0o755)
	pid := strconv.Itoa(os.Getpid())
	leaks := []string{"RIGSECRET-" + pid, "RIGSECRETHASH" + pid, "vault opens with 4417"}
	shadow := filepath.Join(secrets, "shadow")
	writeMode(t, shadow, "root:$6$RIGSECRETHASH"+pid+":19000:0:99999:7:::\nRIGSECRET-"+pid+": the vault opens with 4417\n", 0o600)
	bank := filepath.Join(secrets, "bank.jsonl")
	writeMode(t, bank, `{"schema_version":1,"job_kind":"extract-json","bank_version":"1","RIGSECRET-`+pid+`":"the vault opens with 4417"}`+"\n", 0o600)
	registry := filepath.Join(secrets, "registry.json")
	writeMode(t, registry, `{"schema_version":1,"RIGSECRET-`+pid+`":"the vault opens with 4417","entries":[]}`, 0o600)

	// The account's own folder: designs naming root's files, and a link.
	mine := mkdirMode(t, 0o755)
	uid, _ := strconv.Atoi(staff.Uid)
	if err := os.Chown(mine, uid, -1); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(mine, "design.yaml")
	if err := os.Symlink(shadow, link); err != nil {
		t.Fatal(err)
	}
	design := func(name string, edit func(map[string]any)) (string, []byte) {
		var d map[string]any
		if err := json.Unmarshal(studytest.JudgedStudyDesign(t, name), &d); err != nil {
			t.Fatal(err)
		}
		edit(d)
		b, _ := json.Marshal(d)
		path := filepath.Join(mine, name+".json")
		writeMode(t, path, string(b), 0o644)
		return path, b
	}
	withBank, withBankContent := design("names-bank", func(d map[string]any) {
		d["job_kinds"].([]any)[0].(map[string]any)["task_bank"] = bank
	})
	withRegistry, _ := design("names-registry", func(d map[string]any) { d["licence_registry"] = registry })
	withModel, _ := design("names-model", func(d map[string]any) {
		d["arms"].([]any)[0].(map[string]any)["model"].(map[string]any)["file"] = shadow
	})
	plain, plainContent := design("plain", func(map[string]any) {})

	for _, c := range []struct {
		what string
		req  RegisterRequest
	}{
		{"the file as design_file", RegisterRequest{DesignFile: shadow}},
		{"a link the caller planted", RegisterRequest{DesignFile: link}},
		{"a design naming it as task bank", RegisterRequest{DesignFile: withBank}},
		{"a design's content naming it as task bank", RegisterRequest{DesignFile: withBank, Design: withBankContent}},
		{"a design naming it as licence registry", RegisterRequest{DesignFile: withRegistry}},
		{"--registry", RegisterRequest{DesignFile: plain, Registry: registry}},
		{"a design naming it as a model file", RegisterRequest{DesignFile: withModel}},
	} {
		rep := callAs(t, pd.bin, pd.socket, staff, "register", c.req)
		whole := rep.Error + rep.Text + string(rep.Result)
		for _, leak := range leaks {
			if strings.Contains(whole, leak) {
				t.Errorf("%s: the reply quotes root's file (%q): %s", c.what, leak, whole)
			}
		}
		if rep.Error == "" {
			t.Errorf("%s: registered: %s", c.what, rep.Result)
			continue
		}
		if rep.Code != "forbidden" {
			t.Errorf("%s: refused, but not because the caller may not read the file (want code forbidden): code %q: %s", c.what, rep.Code, rep.Error)
		}
		t.Logf("%s: refused: %s", c.what, rep.Error)
	}
	if names, _ := pd.svc.Studies().List(); len(names) != 0 {
		t.Fatalf("refused registrations left studies: %v", names)
	}
	if rep := callAs(t, pd.bin, pd.socket, staff, "register", RegisterRequest{DesignFile: plain, Design: plainContent}); rep.Error != "" {
		t.Fatalf("a design the caller may read: %s", rep.Error)
	}
}

func mkdirMode(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rig-redteam-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeMode(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
