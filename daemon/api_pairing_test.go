package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"rig/api"
	"rig/genrecord"
	"rig/receipts"
	"rig/run"
	"rig/scaleout"
	"rig/studies"
	"rig/studies/studytest"
)

// Every method the api package names is served, by exactly one resource's
// table, and the daemon serves nothing the api package does not name: a
// method added on one side only fails here, not as ErrNoMethod at a user.
func TestEveryMethodIsServed(t *testing.T) {
	svc := lcService(t, t.TempDir())
	names := api.Methods()
	if len(slices.Compact(slices.Sorted(slices.Values(names)))) != len(names) {
		t.Errorf("api.Methods names a method twice: %v", names)
	}
	servedBy := map[string]int{}
	for _, part := range svc.resources() {
		for name := range part {
			servedBy[name]++
		}
	}
	for name, n := range servedBy {
		if n > 1 {
			t.Errorf("method %q is in %d resources' tables", name, n)
		}
		if !slices.Contains(names, name) {
			t.Errorf("the daemon serves %q, which package api does not name (add a Method constant and a Client method)", name)
		}
	}
	served := svc.methods()
	for _, name := range names {
		if _, ok := served[name]; !ok {
			t.Errorf("api.%s names %q, which the daemon does not serve", constName(name), name)
		}
	}
	for name := range methodRoles {
		if !slices.Contains(names, name) {
			t.Errorf("the policy gives a role to %q, which package api does not name", name)
		}
	}
}

func constName(method string) string {
	var b strings.Builder
	b.WriteString("Method")
	for _, part := range strings.Split(method, "-") {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// Every code the api package defines is one the daemon gives, in the same
// order, and each crosses a real socket: the daemon's sentinel (wherever it
// lives) goes out as its code, and the client's errors.Is matches the
// sentinel api.Sentinel names for it, with the daemon's message kept.
func TestEveryCodeCrossesTheSocket(t *testing.T) {
	var server []string
	for _, c := range errorCodes {
		server = append(server, c.code)
	}
	if !slices.Equal(server, api.Codes()) {
		t.Fatalf("the daemon's codes %v differ from api.Codes %v", server, api.Codes())
	}
	svc := lcService(t, t.TempDir())
	methods := map[string]handler{}
	for i, c := range errorCodes {
		methods[fmt.Sprint("code-", i)] = method(func(context.Context, struct{}, io.Writer) (any, error) {
			return nil, fmt.Errorf("handling it: %w (code %s)", c.err, c.code)
		})
	}
	client := serveOn(t, svc, methods)
	for i, c := range errorCodes {
		err := client.Call(context.Background(), fmt.Sprint("code-", i), struct{}{}, nil, nil)
		want := api.Sentinel(c.code)
		var re *api.RemoteError
		switch {
		case want == nil:
			t.Errorf("%s: api.Sentinel has no error for it", c.code)
		case !errors.As(err, &re) || re.Code != c.code:
			t.Errorf("%s: the client got %v, not a RemoteError with this code", c.code, err)
		case !errors.Is(err, want):
			t.Errorf("%s: errors.Is(%v, %v) is false on the client side", c.code, err, want)
		case !strings.Contains(err.Error(), "(code "+c.code+")"):
			t.Errorf("%s: the daemon's message was lost: %q", c.code, err)
		}
	}
}

// The typed client against the daemon's own dispatch over a real socket:
// each call reaches its method and decodes the api type the daemon sent.
func TestTypedClientRoundTrip(t *testing.T) {
	svc := lcService(t, t.TempDir())
	// The demo design, recorded as register records a study that passed
	// its checks (registering for real needs the provisioned models).
	d := studytest.DemoDesign(t)
	hash, err := studies.DesignHash(d)
	if err != nil {
		t.Fatal(err)
	}
	canon, err := studies.Canonical(d)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	reg := &studies.Registration{Name: "alpha", DesignHash: hash, Design: canon, Lifecycle: studies.NewLifecycle(hash, "alice", at)}
	if err := svc.Studies().create(context.Background(), reg, "alice", "registered from test"); err != nil {
		t.Fatal(err)
	}
	c := serveOn(t, svc, svc.methods())
	ctx := context.Background()

	names, err := c.List(ctx)
	if err != nil || !slices.Equal(names, []string{"alpha"}) {
		t.Fatalf("List = %v, %v; want [alpha]", names, err)
	}
	info, err := c.Status(ctx, api.NameRequest{Name: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "alpha" || info.DesignHash != hash || info.State != studies.Draft || len(info.Audit) == 0 || info.Audit[0].Actor != "alice" {
		t.Errorf("Status = %+v; want alpha, draft, its design hash and alice's registration in the audit", info)
	}
	if _, err := c.Status(ctx, api.NameRequest{Name: "nosuch"}); !errors.Is(err, api.ErrNoStudy) {
		t.Errorf("Status(nosuch) = %v, want api.ErrNoStudy", err)
	}
	sum, err := c.Check(ctx, api.NameRequest{Name: "alpha"})
	if err != nil || sum.Audit == 0 || sum.Executions != 0 {
		t.Errorf("Check = %+v, %v; want the registration's audit entry and no execution", sum, err)
	}
	if _, ok, err := c.Baseline(ctx); ok || err != nil {
		t.Errorf("Baseline with none approved: ok %v, err %v", ok, err)
	}
	if ps, err := c.Proposals(ctx); err != nil || len(ps) != 0 {
		t.Errorf("Proposals = %v, %v; want none", ps, err)
	}
	if _, err := c.Proposal(ctx, api.ProposalRequest{ID: "alpha-0123456789ab"}); !errors.Is(err, api.ErrNoProposal) {
		t.Errorf("Proposal(alpha-0123456789ab) = %v, want api.ErrNoProposal", err)
	}
	set, err := c.SetBudget(ctx, api.BudgetRequest{WallTime: "10h", EnergyWh: 100, Why: "round trip"})
	if err != nil || set.WallTime != "10h" || set.SetBy == "" {
		t.Fatalf("SetBudget = %+v, %v", set, err)
	}
	month, err := c.Budget(ctx)
	if err != nil || month.Cap == nil || month.LeftSeconds != 10*3600 || month.Month != time.Now().UTC().Format("2006-01") {
		t.Errorf("Budget = %+v, %v; want this month, the 10h cap, all of it left", month, err)
	}
	var export strings.Builder
	if err := c.Export(ctx, api.NameRequest{Name: "alpha", Audit: true}, &export); err != nil || !strings.Contains(export.String(), "registered from test") {
		t.Errorf("Export(audit) = %q, %v; want the registration's audit line", export.String(), err)
	}
}

// The api types the daemon converts to carry the same JSON names as the
// types they are converted from, so the bytes on the wire are what they
// were before the api package owned them. (A Go conversion already checks
// the field names; the tags it does not.)
func TestAPITypesKeepTheWireNames(t *testing.T) {
	pairs := []struct{ api, own any }{
		{api.StudyInfo{}, StudyInfo{}},
		{api.ExecInfo{}, run.ExecInfo{}},
		{api.ValidationRecord{}, run.ValidationRecord{}},
		{api.StoreSummary{}, receipts.Summary{}},
		{api.MergeSummary{}, scaleout.RemergeSummary{}},
		{api.ReplayResult{}, scaleout.ReplayResult{}},
		{api.MergeRequest{}, MergeRequest{}},
		{api.EngineReplayRequest{}, EngineReplayRequest{}},
		{api.ReportFiles{}, ReportFiles{}},
		{api.RegradeReport{}, run.RegradeReport{}},
		{api.RegradeRow{}, run.RegradeRow{}},
	}
	for _, p := range pairs {
		a, o := jsonNames(reflect.TypeOf(p.api)), jsonNames(reflect.TypeOf(p.own))
		if !slices.Equal(a, o) {
			t.Errorf("%T has JSON names %v; %T has %v", p.api, a, p.own, o)
		}
	}
	if api.ExecStatusRunning != string(receipts.Running) {
		t.Errorf("api.ExecStatusRunning %q, the store's %q", api.ExecStatusRunning, receipts.Running)
	}
	if api.ReplayReproduced != string(genrecord.StatusReproduced) {
		t.Errorf("api.ReplayReproduced %q, genrecord's %q", api.ReplayReproduced, genrecord.StatusReproduced)
	}
}

// jsonNames is the sorted JSON member names encoding/json gives a struct,
// embedded structs flattened.
func jsonNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonNames(f.Type)...)
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, tag)
	}
	slices.Sort(out)
	return out
}
