package daemon

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"rig/studies"
)

// TestWithdrawByRegistrantOrDirector acts as real OS users through the real
// socket: another member of staff may not withdraw a study they did not
// register; its registrant may, and a Director may withdraw anyone's; the
// audit records who and why.
func TestWithdrawByRegistrantOrDirector(t *testing.T) {
	needAccounts(t)
	u := osUsers{t: t, prefix: fmt.Sprintf("rigw%d", os.Getpid()%100000)}
	studio, staffG, dirG := u.name("studio"), u.name("staffg"), u.name("dirg")
	for _, g := range []string{studio, staffG, dirG} {
		u.addGroup(g)
	}
	reg := u.addUser(u.name("reg"), studio, staffG)
	other := u.addUser(u.name("other"), studio, staffG)
	dir := u.addUser(u.name("dir"), studio, dirG)
	pd := startPolicyDaemon(t, studio, []map[string]any{
		{"group": staffG, "roles": []string{"staff"}},
		{"group": dirG, "roles": []string{"director"}},
	}, nil)
	fakeRegistered(t, pd.svc, "mine", reg)
	fakeRegistered(t, pd.svc, "theirs", reg)

	rep := callAs(t, pd.bin, pd.socket, other, "withdraw", NameRequest{Name: "mine", Why: "not mine to keep"})
	if rep.Code != "forbidden" || !strings.Contains(rep.Error, "only its registrant") {
		t.Fatalf("another member of staff withdrew the study: %+v", rep)
	}
	if rep := callAs(t, pd.bin, pd.socket, reg, "withdraw", NameRequest{Name: "mine"}); !strings.Contains(rep.Error, "needs a reason") {
		t.Fatalf("a withdrawal without a reason: %+v", rep)
	}
	if rep := callAs(t, pd.bin, pd.socket, reg, "withdraw", NameRequest{Name: "mine", Why: "bank fixed; going again as mine-2"}); rep.Error != "" {
		t.Fatalf("the registrant may not withdraw their study: %s", rep.Error)
	}
	if rep := callAs(t, pd.bin, pd.socket, dir, "withdraw", NameRequest{Name: "theirs", Why: "the studio dropped this comparison"}); rep.Error != "" {
		t.Fatalf("a Director may not withdraw a study: %s", rep.Error)
	}
	for name, by := range map[string]string{"mine": display(reg), "theirs": display(dir)} {
		l, err := pd.svc.lifecycle(name)
		if err != nil {
			t.Fatal(err)
		}
		last := l.Audit[len(l.Audit)-1]
		if l.State != studies.Withdrawn || last.Event != studies.EventWithdraw || last.Actor != by || last.Why == "" || last.UID == nil {
			t.Errorf("study %s: state %s, last audit %+v; want withdrawn by %s with the reason and uid", name, l.State, last, by)
		}
	}
	if rep := callAs(t, pd.bin, pd.socket, dir, "withdraw", NameRequest{Name: "theirs", Why: "again"}); !strings.Contains(rep.Error, "withdrawn already") {
		t.Errorf("a second withdrawal: %+v", rep)
	}
}
