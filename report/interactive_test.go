package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"rig/analysis"
	"rig/internal/testenv"
)

// artifactDir is where a browser test keeps its pages and screenshots:
// $RIG_TEST_ARTIFACTS/TEST when set, the test's artifact directory
// otherwise (kept with -artifacts).
func artifactDir(t testing.TB) string {
	if d := os.Getenv("RIG_TEST_ARTIFACTS"); d != "" {
		dir := filepath.Join(d, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.ArtifactDir()
}

// openReport writes d's page and opens it in headless Chromium driven over
// the DevTools protocol, with networking off and every host name mapped
// to nothing. It skips, saying why, when no Chromium is installed.
func openReport(t testing.TB, d Data, dir string) (context.Context, string) {
	t.Helper()
	bin, err := FindBrowser()
	if errors.Is(err, ErrNoBrowser) {
		testenv.NeedsSetup(t, "Chromium (make setup installs the Debian package chromium)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, d); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ctx := chromeContext(t, bin)
	if err := chromedp.Run(ctx, chromedp.Navigate("file://"+page), waitReady()); err != nil {
		t.Fatalf("opening %s: %v", page, err)
	}
	return ctx, page
}

// browserProfile is a fresh profile directory removed when the test ends,
// once Chromium's helper processes have stopped writing into it.
func browserProfile(t testing.TB) string {
	dir, remove, err := TempProfile()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := remove(); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// chromeContext starts a headless Chromium for the test's lifetime. Its
// profile is removed last (cleanups run last-registered first), after the
// browser is stopped, and removal waits out helpers still writing there.
func chromeContext(t testing.TB, bin string) context.Context {
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(browserProfile(t)),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func waitReady() chromedp.Action {
	return chromedp.Poll(`document.documentElement.dataset.ready === "1"`, nil, chromedp.WithPollingTimeout(60*time.Second))
}

// eval runs a JavaScript expression in the page and decodes its value.
func eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	var v T
	await := func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &v, await)); err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// kindTasks is the job kind's embedded values as the analysis holds them.
func kindTasks(k Kind) analysis.KindTasks {
	kt := analysis.KindTasks{JobKind: k.Name, Gate: k.Gate, Arms: k.Scores.Arms, Tasks: k.Scores.Tasks}
	for t := range k.Scores.Tasks {
		row := make([]float64, len(k.Scores.Arms))
		for a := range row {
			row[a] = math.NaN()
			if v := k.Scores.Values[a][t]; v != nil {
				row[a] = *v
			}
		}
		kt.Values = append(kt.Values, row)
	}
	return kt
}

func setGate(t testing.TB, ctx context.Context, id string, gate string) {
	eval[bool](t, ctx, fmt.Sprintf(`(()=>{const s=document.getElementById("gate-%s");s.value=%q;s.dispatchEvent(new Event("input"));return true})()`, id, gate))
}

// checkGate moves the slider and reads every pass rate and pair back from
// the page; each must equal what the analysis computes at the same gate.
func checkGate(t *testing.T, ctx context.Context, k Kind, id string, gates []string) {
	kt := kindTasks(k)
	for _, g := range gates {
		setGate(t, ctx, id, g)
		gate, _ := strconv.ParseFloat(g, 64)
		want := kt.At(gate)
		got := eval[[]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll("#live-%s td[data-arm]")].map(td=>td.dataset.value)`, id))
		if len(got) != len(want.PassRate) {
			t.Fatalf("gate %s: %d pass rates on the page, want %d", g, len(got), len(want.PassRate))
		}
		for a, s := range got {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v != float64(want.PassRate[a]) {
				t.Errorf("%s at gate %s: page says pass rate %s, the analysis %v", kt.Arms[a], g, s, want.PassRate[a])
			}
		}
		for j, p := range k.Pairs {
			wp := kt.Pair(slices.Index(kt.Arms, p.Challenger), slices.Index(kt.Arms, p.Baseline), gate)
			cells := eval[map[string]string](t, ctx, fmt.Sprintf(`Object.fromEntries([...document.querySelectorAll('#livepairs-%s tr[data-pair="%d"] td')].map(td=>[td.dataset.f,td.dataset.value]))`, id, j))
			for f, w := range map[string]float64{"paired": float64(wp.Paired), "fixed": float64(wp.NewlyFixed), "failing": float64(wp.NewlyFailing), "delta": float64(wp.PassDelta)} {
				if v, err := strconv.ParseFloat(cells[f], 64); err != nil || v != w {
					t.Errorf("%s vs %s at gate %s: page says %s %s, the analysis %v", p.Challenger, p.Baseline, g, f, cells[f], w)
				}
			}
		}
	}
}

// checkFilters applies each filter and a free-text search and counts the
// rows the page says it shows against the data; the rows in the DOM are
// only those in view, and each drawn row passes the filter.
func checkFilters(t *testing.T, ctx context.Context, k Kind, id string, gate float64) {
	for _, f := range Filters {
		for _, q := range []string{"", "christmas"} {
			eval[bool](t, ctx, fmt.Sprintf(`(()=>{const s=document.getElementById("filter-%[1]s");s.value=%[2]q;s.dispatchEvent(new Event("change"));const q=document.getElementById("q-%[1]s");q.value=%[3]q;q.dispatchEvent(new Event("input"));return true})()`, id, f, q))
			want := 0
			for _, r := range k.Rows {
				if k.Shows(r, f, q, gate) {
					want++
				}
			}
			got := eval[string](t, ctx, fmt.Sprintf(`document.getElementById("count-%s").dataset.shown`, id))
			if got != strconv.Itoa(want) {
				t.Errorf("filter %s, text %q: page shows %s rows, the data has %d", f, q, got, want)
			}
			drawn := eval[[]int](t, ctx, fmt.Sprintf(`[...document.querySelectorAll("#space-%s .vrow")].map(e=>+e.dataset.row)`, id))
			if limit := 480/30 + 2*6 + 2; len(drawn) > limit || len(drawn) > want || (want > 0 && len(drawn) == 0) {
				t.Errorf("filter %s, text %q: %d rows in the DOM for %d shown (at most %d fit the view)", f, q, len(drawn), want, limit)
			}
			for _, i := range drawn {
				if !k.Shows(k.Rows[i], f, q, gate) {
					t.Errorf("filter %s, text %q: row %d (%s) is drawn but does not pass", f, q, i, k.Rows[i].Task)
					break
				}
			}
		}
	}
	eval[bool](t, ctx, fmt.Sprintf(`(()=>{const s=document.getElementById("filter-%[1]s");s.value="all";s.dispatchEvent(new Event("change"));const q=document.getElementById("q-%[1]s");q.value="";q.dispatchEvent(new Event("input"));return true})()`, id))
}

// checkDetail filters to tool errors, opens the first row and finds both
// outputs as text and the receipt fields in the panel.
func checkDetail(t *testing.T, ctx context.Context, k Kind, id string) {
	eval[bool](t, ctx, fmt.Sprintf(`(()=>{const s=document.getElementById("filter-%s");s.value="tool_error";s.dispatchEvent(new Event("change"));return true})()`, id))
	if err := chromedp.Run(ctx, chromedp.Click("#space-"+id+" .vrow", chromedp.ByQuery), chromedp.WaitVisible("#detail-"+id, chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	i := eval[int](t, ctx, fmt.Sprintf(`+document.getElementById("detail-%s").dataset.row`, id))
	r := k.Rows[i]
	fields := eval[[]map[string]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll("#detail-%s .side > div")].map(d=>Object.fromEntries([...d.querySelectorAll("[data-field]")].map(e=>[e.dataset.field,e.textContent])))`, id))
	if len(fields) != 2 {
		t.Fatalf("detail panel has %d sides, want 2", len(fields))
	}
	for n, s := range []RowSide{r.Baseline, r.Challenger} {
		got := fields[n]
		if got["output"] != s.Output {
			t.Errorf("row %s side %d: output %q, want %q", r.Task, n, got["output"], s.Output)
		}
		for _, f := range []string{"trial", "attempt", "pins", "tokens", "wall", "memory", "governor", "replay"} {
			if got[f] == "" {
				t.Errorf("row %s side %d: no %s in the detail panel (have %v)", r.Task, n, f, got)
			}
		}
		if got["attempt"] != strconv.Itoa(s.Receipt.Attempt) || got["trial"] != s.Receipt.Trial {
			t.Errorf("row %s side %d: attempt %q trial %q, want %d %q", r.Task, n, got["attempt"], got["trial"], s.Receipt.Attempt, s.Receipt.Trial)
		}
	}
	if !r.Challenger.ToolError || fields[1]["flags"] != "tool error" {
		t.Errorf("opened row %s under the tool-error filter: flags %q", r.Task, fields[1]["flags"])
	}
	if n := eval[int](t, ctx, `document.querySelectorAll("main img, main script, main iframe").length`); n != 0 {
		t.Errorf("%d img/script/iframe elements in the page's body: an output became markup", n)
	}
}

var sections = []string{"summary", "variants", "rows", "flipped", "metrics", "traces", "decision-part", "evidence"}

// TestBrowserInteractiveReport drives the sample report: the gate slider,
// every filter, a row's detail, and a screenshot of each section.
func TestBrowserInteractiveReport(t *testing.T) {
	d := SampleData()
	dir := artifactDir(t)
	ctx, _ := openReport(t, d, dir)
	v, err := newView(d)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range d.Kinds {
		checkGate(t, ctx, k, v.Kinds[i].ID, []string{"0", "0.35", strconv.FormatFloat(k.Gate, 'g', -1, 64), "0.72", "1"})
		setGate(t, ctx, v.Kinds[i].ID, "0.45")
		checkFilters(t, ctx, k, v.Kinds[i].ID, 0.45)
	}
	checkDetail(t, ctx, d.Kinds[0], v.Kinds[0].ID)
	for _, s := range sections {
		var png []byte
		if err := chromedp.Run(ctx, chromedp.ScrollIntoView("#"+s, chromedp.ByID), chromedp.Screenshot("#"+s, &png, chromedp.ByID)); err != nil {
			t.Fatalf("screenshot of %s: %v", s, err)
		}
		if len(png) < 2000 {
			t.Errorf("screenshot of %s is %d bytes: nothing drawn", s, len(png))
		}
		if err := os.WriteFile(filepath.Join(dir, "section-"+s+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("page and screenshots in %s", dir)
}

// LargeData is a one-kind, one-pair study with n tasks: the paired matrix
// has n rows, for the browser test and benchmark of the virtualized rows.
func LargeData(n int) Data {
	d := SampleData()
	d.Cards, d.Replay = nil, nil
	k := d.Kinds[0]
	k.Arms = k.Arms[:2]
	k.Pairs = k.Pairs[:1]
	k.Sweep.Lines = k.Sweep.Lines[:2]
	k.Cost.Points = k.Cost.Points[:2]
	k.Failures, k.Paired, k.NoOutput = nil, nil, nil
	k.Scores = &Scores{Arms: []string{k.Arms[0].Arm, k.Arms[1].Arm}, Values: make([][]*float64, 2)}
	k.Rows = make([]Row, 0, n)
	rng := newRand(17)
	for t := range n {
		task := fmt.Sprintf("task-%06d", t)
		k.Scores.Tasks = append(k.Scores.Tasks, task)
		b, c := rng.Float64(), math.Min(1, rng.Float64()*1.1)
		k.Scores.Values[0] = append(k.Scores.Values[0], &b)
		if t%97 == 0 {
			k.Scores.Values[1] = append(k.Scores.Values[1], nil)
		} else {
			k.Scores.Values[1] = append(k.Scores.Values[1], &c)
		}
		r := sampleRow(rng, 0, task, k.Arms[0].Arm, k.Arms[1].Arm, b >= k.Gate, c >= k.Gate)
		r.Baseline.Output = "ok " + task
		r.Challenger.Output = "ok " + task
		k.Rows = append(k.Rows, r)
	}
	d.Kinds = []Kind{k}
	return d
}

// TestBrowserLargeReport: 50,000 rows, the slider and filters still agree
// with the data, and scrolling to the end keeps only the rows in view in
// the DOM.
func TestBrowserLargeReport(t *testing.T) {
	if testing.Short() {
		t.Skip("50,000 rows in a browser: not in -short")
	}
	d := LargeData(50_000)
	ctx, _ := openReport(t, d, artifactDir(t))
	id := "kind-" + slug(d.Kinds[0].Name)
	checkGate(t, ctx, d.Kinds[0], id, []string{"0.6", "0.35"})
	checkFilters(t, ctx, d.Kinds[0], id, 0.35)
	for _, at := range []string{"0.5", "1"} {
		last := eval[[]int](t, ctx, fmt.Sprintf(`new Promise(r=>{const vp=document.getElementById("vp-%[1]s");vp.scrollTop=(vp.scrollHeight-vp.clientHeight)*%[2]s;requestAnimationFrame(()=>requestAnimationFrame(()=>r([...document.querySelectorAll("#space-%[1]s .vrow")].map(e=>+e.dataset.row))))})`, id, at))
		if len(last) == 0 || len(last) > 480/30+2*6+2 {
			t.Fatalf("scrolled to %s: %d rows in the DOM", at, len(last))
		}
		if at == "1" && slices.Max(last) != len(d.Kinds[0].Rows)-1 {
			t.Errorf("scrolled to the end: the last row drawn is %d, want %d", slices.Max(last), len(d.Kinds[0].Rows)-1)
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 3)) }
