package daemon

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"rig/governor"
	"rig/internal/metrics"
)

// docMetric is one row of docs/scale-out.md's table of metrics.
type docMetric struct {
	typ, where string
	labels     []string
}

var (
	backticked  = regexp.MustCompile("`([^`]+)`")
	parenthesis = regexp.MustCompile(`\([^)]*\)`)
)

// docMetrics reads the table of metrics in docs/scale-out.md: each row's
// name, type, label names (the values in parentheses left out) and where
// it is exported (daemon, worker or both).
func docMetrics(t *testing.T) map[string]docMetric {
	t.Helper()
	b, err := os.ReadFile("../docs/scale-out.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| metric | type | labels | where | what |\n|---|---|---|---|---|\n")
	if !ok {
		t.Fatal("docs/scale-out.md has no table of metrics (| metric | type | labels | where | what |)")
	}
	rows := map[string]docMetric{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(line, "|")
		if len(cells) < 6 {
			t.Fatalf("docs/scale-out.md: a row of the metrics table has %d cells: %s", len(cells), line)
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		d := docMetric{typ: strings.TrimSpace(cells[2]), where: strings.TrimSpace(cells[4])}
		for _, m := range backticked.FindAllStringSubmatch(parenthesis.ReplaceAllString(cells[3], ""), -1) {
			d.labels = append(d.labels, m[1])
		}
		sort.Strings(d.labels)
		if _, dup := rows[name]; dup {
			t.Errorf("docs/scale-out.md lists %s twice", name)
		}
		rows[name] = d
	}
	return rows
}

// exposed is what a Set exports of rig's own: each rig_ family's type and
// label names.
func exposed(t *testing.T, m *metrics.Set) map[string]docMetric {
	t.Helper()
	fams, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[dto.MetricType]string{dto.MetricType_COUNTER: "counter", dto.MetricType_GAUGE: "gauge", dto.MetricType_HISTOGRAM: "histogram"}
	out := map[string]docMetric{}
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "rig_") {
			continue
		}
		d := docMetric{typ: types[f.GetType()]}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if !slices.Contains(d.labels, l.GetName()) {
					d.labels = append(d.labels, l.GetName())
				}
			}
		}
		sort.Strings(d.labels)
		out[f.GetName()] = d
	}
	return out
}

// TestDocsListWhatEachProcessExports builds the daemon's and a worker's
// Set as the daemon and `rig worker` do, and holds docs/scale-out.md's table
// to what each exports: the same names, types and label names, each where
// the table says (daemon, worker, both). The card is sampled as WatchCard
// does on a machine with one (without NVML its rows are absent, as the docs
// say).
func TestDocsListWhatEachProcessExports(t *testing.T) {
	docs := docMetrics(t)
	for _, role := range []metrics.Role{metrics.Daemon, metrics.Worker} {
		m := NewMetrics(role)
		if role == metrics.Worker {
			m.TaskQueues([]string{"rig.trials.llama-server.abc.cpu"}) // as RunWorker does
		}
		m.CardSample(metrics.CardSample{Index: 0, UUID: "GPU-0", HasEnergy: true})
		got := exposed(t, m)
		want := map[string]docMetric{}
		for name, d := range docs {
			if d.where == role.String() || d.where == "both" {
				want[name] = docMetric{typ: d.typ, labels: d.labels}
			}
		}
		for name, w := range want {
			g, ok := got[name]
			switch {
			case !ok:
				t.Errorf("%s: docs/scale-out.md lists %s (%s), which it does not export", role, name, docs[name].where)
			case g.typ != w.typ:
				t.Errorf("%s: %s is a %s; docs/scale-out.md says %s", role, name, g.typ, w.typ)
			case !slices.Equal(g.labels, w.labels):
				t.Errorf("%s: %s has labels %v; docs/scale-out.md says %v", role, name, g.labels, w.labels)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				where := "not at all"
				if d, listed := docs[name]; listed {
					where = "as " + d.where + "'s"
				}
				t.Errorf("%s: exports %s, which docs/scale-out.md lists %s", role, name, where)
			}
		}
	}
}

// TestFirstPreemptionIsAnIncrease: each outcome's and each governor event's
// series is in the exposition at 0 from the start, on the daemon and on a
// worker, so the first preemption after a start is an increase (0 → 1)
// that increase() and an alert see, not a series born at 1.
func TestFirstPreemptionIsAnIncrease(t *testing.T) {
	for _, c := range []struct {
		role    metrics.Role
		preempt func(*metrics.Set)
		series  []string
	}{
		{metrics.Daemon, func(m *metrics.Set) { m.TrialFinished("preempted", 1) },
			[]string{`rig_trials_total{outcome="preempted"}`, `rig_governor_events_total{kind="preempt"}`}},
		{metrics.Worker, func(m *metrics.Set) { m.TrialStarted("q"); m.AttemptFinished("preempted", 1) },
			[]string{`rig_trial_attempts_total{outcome="preempted"}`, `rig_governor_events_total{kind="preempt"}`}},
	} {
		m := NewMetrics(c.role)
		ctx, cancel := context.WithCancel(context.Background())
		addr, err := m.Start(ctx, "127.0.0.1:0", false, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		scrape := func() string {
			resp, err := http.Get("http://" + addr.String() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		before := scrape()
		for _, s := range c.series {
			if !strings.Contains(before, "\n"+s+" 0\n") {
				t.Errorf("%s at start: no %s 0 in the exposition", c.role, s)
			}
		}
		c.preempt(m)
		_ = GovernorMetrics{M: m}.Emit(ctx, governor.Event{Kind: governor.EventPreempt})
		after := scrape()
		for _, s := range c.series {
			if !strings.Contains(after, "\n"+s+" 1\n") {
				t.Errorf("%s after the first preemption: no %s 1 in the exposition", c.role, s)
			}
		}
		cancel()
	}
}

// TestKnownLabelValuesAreEveryConstant holds the label values the daemon
// gives package metrics to the constants they copy: every receipts.Outcome
// and every governor.EventKind declared in those packages' source.
func TestKnownLabelValuesAreEveryConstant(t *testing.T) {
	var haveOutcomes, haveKinds []string
	for _, o := range outcomes {
		haveOutcomes = append(haveOutcomes, string(o))
	}
	for _, k := range governorEvents {
		haveKinds = append(haveKinds, string(k))
	}
	for _, c := range []struct {
		dir, typ string
		have     []string
	}{
		{"../receipts", "Outcome", haveOutcomes},
		{"../governor", "EventKind", haveKinds},
	} {
		want := constantsOfType(t, c.dir, c.typ)
		sort.Strings(want)
		have := slices.Sorted(slices.Values(c.have))
		if len(want) == 0 || !slices.Equal(have, want) {
			t.Errorf("the %s values given to package metrics are %v; %s declares %v (daemon/metrics.go)", c.typ, have, c.dir, want)
		}
	}
}

// constantsOfType is the string values of the constants of type typ that
// the non-test Go files in dir declare.
func constantsOfType(t *testing.T, dir, typ string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, dir+"/"+e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != typ {
					continue
				}
				for _, val := range v.Values {
					if lit, ok := val.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}
