package daemon

import (
	"context"
	"encoding/json"
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
// sentinel api.Sentinel names for it, with the daemon's message kept and the
// sentinel's own text the same on both sides.
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
		case want.Error() != c.err.Error():
			// A client's copy of a sentinel (api.ErrStaleAsset for
			// studies.ErrStaleAsset) reads as the original does.
			t.Errorf("%s: the client's sentinel says %q, the daemon's %q", c.code, want, c.err)
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
	if info.Name != "alpha" || info.DesignHash != hash || info.State != api.Draft || len(info.Audit) == 0 || info.Audit[0].Actor != "alice" {
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
// types they are converted from, at every depth, so the bytes on the wire are
// what they were before the api package owned them. (A Go conversion already
// checks the field names; the tags it does not, and a type converted field by
// field, such as api.Pins with its api.Sampling, it does not check at all.)
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
		// The study's data, which api has its own copy of.
		{api.Review{}, studies.Review{}},
		{api.AuditEntry{}, studies.AuditEntry{}},
		{api.LicenceTerm{}, studies.LicenceTerm{}},
		{api.Speed{}, studies.Speed{}},
		{api.Model{}, studies.Model{}},
		{api.Binary{}, studies.Binary{}},
		{api.Pins{}, studies.Pins{}},
		{api.Estimate{}, studies.Estimate{}},
	}
	for _, p := range pairs {
		a, o := jsonNames(reflect.TypeOf(p.api)), jsonNames(reflect.TypeOf(p.own))
		if !slices.Equal(a, o) {
			t.Errorf("%T has JSON names %v that %T has not; it has %v", p.api, without(a, o), p.own, without(o, a))
		}
	}
	if api.ExecStatusRunning != string(receipts.Running) {
		t.Errorf("api.ExecStatusRunning %q, the store's %q", api.ExecStatusRunning, receipts.Running)
	}
	if api.ReplayReproduced != string(genrecord.StatusReproduced) {
		t.Errorf("api.ReplayReproduced %q, genrecord's %q", api.ReplayReproduced, genrecord.StatusReproduced)
	}
	states := map[api.State]studies.State{api.Draft: studies.Draft, api.Reviewed: studies.Reviewed, api.Approved: studies.Approved,
		api.Frozen: studies.Frozen, api.Running: studies.Running, api.Decided: studies.Decided, api.Withdrawn: studies.Withdrawn}
	for a, o := range states {
		if string(a) != string(o) {
			t.Errorf("api's state %q is studies' %q", a, o)
		}
	}
}

// without is the names in a that are not in b.
func without(a, b []string) []string {
	return slices.DeleteFunc(slices.Clone(a), func(n string) bool { return slices.Contains(b, n) })
}

// opaque are the JSON members the protocol passes on as the daemon wrote
// them (json.RawMessage on api's side), whose insides it does not type.
var opaque = []string{"containment", "validation.containment"}

// jsonNames is the sorted JSON member paths encoding/json gives a type,
// nested members as "outer.inner", embedded structs flattened, through
// pointers, slices and maps; a type that marshals itself (time.Time) is one
// member, and members under an opaque one are left out.
func jsonNames(t reflect.Type) []string {
	var out []string
	collectNames(t, "", &out, 0)
	out = slices.DeleteFunc(out, func(n string) bool {
		return slices.ContainsFunc(opaque, func(o string) bool { return strings.HasPrefix(n, o+".") })
	})
	slices.Sort(out)
	return out
}

func collectNames(t reflect.Type, prefix string, out *[]string, depth int) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	marshaler := reflect.TypeFor[json.Marshaler]()
	if t.Kind() != reflect.Struct || t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) || depth > 8 {
		return
	}
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
			collectNames(f.Type, prefix, out, depth)
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		*out = append(*out, prefix+tag)
		collectNames(f.Type, prefix+tag+".", out, depth+1)
	}
}

// The converters at the boundary keep every field: a value of the daemon's
// type with every field set, converted, is the same JSON as the value itself,
// as it was when the daemon sent its own type. So are a value with every
// slice empty (null and [] differ on the wire) and the zero value.
func TestBoundaryKeepsEveryField(t *testing.T) {
	for _, mode := range []fillMode{fillAll, fillEmpty, fillZero} {
		var info StudyInfo
		fill(reflect.ValueOf(&info).Elem(), mode)
		sameJSON(t, mode, "apiStudy", info, apiStudy(info))

		var est studies.Estimate
		fill(reflect.ValueOf(&est).Elem(), mode)
		sameJSON(t, mode, "apiEstimate", &est, apiEstimate(&est))

		var pins studies.Pins
		fill(reflect.ValueOf(&pins).Elem(), mode)
		sameJSON(t, mode, "apiPins", pins, apiPins(pins))

		var fa studies.FrozenArm
		fill(reflect.ValueOf(&fa).Elem(), mode)
		sameJSON(t, mode, "apiBinary", fa.Binaries, convertAll(fa.Binaries, apiBinary))

		var m studies.Model
		fill(reflect.ValueOf(&m).Elem(), mode)
		sameJSON(t, mode, "api.Model", m, api.Model(m))

		// A review comes in: api's, as the command line sent it, to studies'.
		var r api.Review
		fill(reflect.ValueOf(&r).Elem(), mode)
		sameJSON(t, mode, "studies.Review", r, studies.Review(r))
	}
	if got := apiEstimate(nil); got != nil {
		t.Errorf("apiEstimate(nil) = %+v", got)
	}
}

func sameJSON(t *testing.T, mode fillMode, what string, own, converted any) {
	t.Helper()
	a, err := json.Marshal(own)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(converted)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		i := 0
		for i < min(len(a), len(b)) && a[i] == b[i] {
			i++
		}
		t.Errorf("%s (%s) changes the wire from byte %d:\n own  …%s\n sent …%s", what, mode, i, a[max(0, i-40):], b[max(0, i-40):])
	}
}

type fillMode string

const (
	fillAll   fillMode = "every field set"
	fillEmpty fillMode = "slices empty"
	fillZero  fillMode = "zero value"
)

// fill sets every exported field of v to a value that is not its zero (each
// string and number its own), slices and maps to two elements (none with
// fillEmpty), pointers to a filled value; fillZero leaves v as it is.
func fill(v reflect.Value, mode fillMode) {
	n := 0
	fillValue(v, mode, &n, 0)
}

func fillValue(v reflect.Value, mode fillMode, n *int, depth int) {
	if mode == fillZero || !v.CanSet() || depth > 8 {
		return
	}
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprint("s", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(*n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(*n) + 0.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillValue(p.Elem(), mode, n, depth+1)
		v.Set(p)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(fmt.Sprintf(`{"n":%d}`, *n)))
			return
		}
		l := 2
		if mode == fillEmpty {
			l = 0
		}
		s := reflect.MakeSlice(v.Type(), l, l)
		for i := range l {
			fillValue(s.Index(i), mode, n, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		if mode != fillEmpty {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillValue(k, mode, n, depth+1)
			fillValue(e, mode, n, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 5, 1, 0, 0, *n, 0, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillValue(v.Field(i), mode, n, depth+1)
			}
		}
	}
}

// The command line tells a reviewer which names a licence line may use
// (api.LicenceTerm.Names); the daemon accepts the line by studies' Names. The
// two give the same names.
func TestLicenceTermNamesAgree(t *testing.T) {
	for _, term := range []studies.LicenceTerm{
		{EntryID: "gemma-3-270m", Licence: "Gemma Terms of Use (last modified 2025-03-24)"},
		{EntryID: "smollm2", Licence: "Apache-2.0"},
		{EntryID: "bank", Licence: "  "},
		{EntryID: "odd", Licence: "(custom)"},
		{EntryID: "x", Licence: "MIT (see LICENSE"},
	} {
		if a, o := apiLicenceTerm(term).Names(), term.Names(); !slices.Equal(a, o) {
			t.Errorf("%+v: api names %q, studies %q", term, a, o)
		}
	}
}
