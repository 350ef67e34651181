package preflight

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"rig/internal/gguf"
	"rig/internal/provision"
	"rig/internal/testenv"
)

// tableRow is one measured row of a committed bench table.
type tableRow struct {
	file, model, runtime, kv string
	context                  int
	measuredMiB, rigMiB      float64
	rigErr                   float64 // as the table prints it, a fraction
}

// committedTables reads every bench table of the committed calibration's
// date (preflight/testdata/calibration-DATE-*.md): the measurements its
// constants were fitted on, each table naming the calibration its rig
// column was predicted with.
func committedTables(t *testing.T, cal *Calibration) []tableRow {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "calibration-"+cal.Date+"*.md"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata/calibration-%s*.md: the committed calibration (preflight/calibration.json, %s) must keep the table it was fitted on", cal.Date, cal.Date)
	}
	var rows []tableRow
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if want := "calibration: " + cal.Date + " on " + cal.Machine; !strings.Contains(string(b), want) {
			t.Errorf("%s: its rig column was not predicted with the committed calibration (want the line %q); rerun rig bench preflight --from it", p, want)
		}
		for n, line := range strings.Split(string(b), "\n") {
			c := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
			if len(c) < 12 || strings.TrimSpace(c[0]) == "model" || strings.HasPrefix(strings.TrimSpace(c[0]), "---") {
				continue
			}
			for i := range c {
				c[i] = strings.TrimSpace(c[i])
			}
			ctx, e1 := strconv.Atoi(c[2])
			meas, e2 := strconv.ParseFloat(c[4], 64)
			rig, e3 := strconv.ParseFloat(c[5], 64)
			pct, e4 := strconv.ParseFloat(strings.TrimSuffix(c[6], "%"), 64)
			if e1 != nil || e2 != nil || e3 != nil || e4 != nil {
				t.Fatalf("%s:%d: context, measured, rig and rig err must be numbers: %q", p, n+1, line)
			}
			rows = append(rows, tableRow{file: p, model: c[0], runtime: c[1], context: ctx, kv: c[3], measuredMiB: meas, rigMiB: rig, rigErr: pct / 100})
		}
	}
	return rows
}

var printedError = regexp.MustCompile(`measured error of (\d+)%`)

// printedBound is the measured error, in percent, a verdict prints for
// runtime rt: that of a card just past the prediction.
func printedBound(t *testing.T, cal *Calibration, rt string) int {
	t.Helper()
	f := fakeModel(t, "llama", 4, 256, 4, 2, 64, 0, 1000)
	p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 2048, Simulated: true}
	e, err := Predict(f, p, rt, cal)
	if err != nil {
		t.Fatal(err)
	}
	p.CardMemory = e.Card + 1
	reason := Decide(e, p, time.Unix(0, 0)).Reason
	m := printedError.FindStringSubmatch(reason)
	if m == nil {
		t.Fatalf("%s: the verdict prints no measured error: %s", rt, reason)
	}
	printed, _ := strconv.Atoi(m[1])
	return printed
}

// TestCalibrationTableIsCovered reads the committed measurements and checks
// that the error a verdict prints for each runtime is never smaller than the
// largest error measured on it, and every error is within the 10% goal.
func TestCalibrationTableIsCovered(t *testing.T) {
	cal := mustCal(t)
	rows := committedTables(t, cal)
	worst := map[string]float64{}
	for _, r := range rows {
		worst[r.runtime] = max(worst[r.runtime], math.Abs(r.rigErr))
		if math.Abs(r.rigErr) > 0.10 {
			t.Errorf("%s: %s on %s at context %d (%s): rig %+.1f%%, past the 10%% goal", r.file, r.model, r.runtime, r.context, r.kv, 100*r.rigErr)
		}
	}
	for _, rt := range []string{RuntimeLlamaServer, RuntimeOllama} {
		if _, ok := worst[rt]; !ok {
			t.Errorf("no measured row for %s in testdata/calibration-%s*.md", rt, cal.Date)
			continue
		}
		printed := printedBound(t, cal, rt)
		if float64(printed)/100 < worst[rt] {
			t.Errorf("%s: the verdict prints a measured error of %d%%, the committed table measured %.1f%%", rt, printed, 100*worst[rt])
		}
		t.Logf("%s: verdicts print %d%%, worst measured %.1f%%", rt, printed, 100*worst[rt])
	}
}

// TestCalibrationTableMatchesTheModel predicts every committed row again
// from its model file with the committed constants: the table's rig column
// must be what rig predicts today, or the coverage above checks a memory
// model that is gone. It needs the provisioned models (make setup).
func TestCalibrationTableMatchesTheModel(t *testing.T) {
	in, err := provision.Load()
	if err != nil {
		t.Skipf("models not provisioned: %v", err)
	}
	files := map[string]string{}
	for _, set := range []map[string]provision.Model{in.Models, in.OtherQuants} {
		for _, m := range set {
			if m.Path != "" {
				files[m.Name+"-"+strings.ToLower(m.Quant)] = m.Path
			}
		}
	}
	cal := mustCal(t)
	for _, r := range committedTables(t, cal) {
		path, ok := files[r.model]
		if !ok {
			t.Errorf("%s: model %s is not provisioned here (have %d files)", r.file, r.model, len(files))
			continue
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		p := Profile{Name: fmt.Sprintf("bench-%d-%s", r.context, r.kv), CardMemory: 8 * GiB, Context: r.context, KVType: r.kv, Parallel: 1, Simulated: true}
		e, err := Predict(f, p, r.runtime, cal)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.Peak.MiBf(); math.Abs(got-r.rigMiB) > 0.5 {
			t.Errorf("%s: %s on %s at context %d: the table says rig %.0f MiB, rig predicts %.1f MiB now", r.file, r.model, r.runtime, r.context, r.rigMiB, got)
		}
	}
}

// trialRow is one row of a committed table of Ollama measured as a study's
// trial runs it (testdata/calibration-trials-*.md).
type trialRow struct {
	file, model, runtime, kv            string
	context                             int
	reservation                         Size
	measured, needs, modelCopy, rigPeak float64 // MiB
	rigErr                              float64 // as printed, a fraction; NaN where the row prints "-"
	ooms                                int
	completed                           bool
}

func trialTables(t *testing.T) []trialRow {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "calibration-trials-*.md"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata/calibration-trials-*.md: the Ollama cases measured as a trial runs them are part of the calibration (%v)", err)
	}
	var rows []trialRow
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			c := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
			if len(c) != 14 || strings.TrimSpace(c[0]) == "model" || strings.HasPrefix(strings.TrimSpace(c[0]), "---") {
				continue
			}
			for i := range c {
				c[i] = strings.TrimSpace(c[i])
			}
			r := trialRow{file: p, model: c[0], runtime: c[1], kv: c[3], rigErr: math.NaN(), completed: c[13] == "true"}
			var errs [8]error
			r.context, errs[0] = strconv.Atoi(c[2])
			r.reservation, errs[1] = ParseSize(c[4])
			r.measured, errs[2] = strconv.ParseFloat(c[5], 64)
			r.needs, errs[3] = strconv.ParseFloat(c[8], 64)
			r.modelCopy, errs[4] = strconv.ParseFloat(c[9], 64)
			r.rigPeak, errs[5] = strconv.ParseFloat(c[10], 64)
			if c[11] != "-" {
				var pct float64
				pct, errs[6] = strconv.ParseFloat(strings.TrimSuffix(c[11], "%"), 64)
				r.rigErr = pct / 100
			}
			r.ooms, errs[7] = strconv.Atoi(c[12])
			for _, err := range errs {
				if err != nil {
					t.Fatalf("%s:%d: %v in %q", p, n+1, err, line)
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// roomy is the reservation of the rows that read the whole peak.
const roomy = 8 * GiB

// TestTrialTableIsWithinTheBound reads the committed Ollama cases measured
// as a study's trial runs them: every peak read with room is within the
// error a verdict prints for Ollama of rig's peak (the need and Ollama's copy
// of the model file), and every arm ran to completion, with no OOM kill, in a
// reservation of rig's need plus that error. The cases include Q8_0 and a
// context other than the demo design's 2048.
func TestTrialTableIsWithinTheBound(t *testing.T) {
	cal := mustCal(t)
	bound := float64(printedBound(t, cal, RuntimeOllama)) / 100
	type arm struct {
		model   string
		context int
	}
	withRoom, held := map[arm]int{}, map[arm]bool{}
	worst, q8, otherCtx := 0.0, false, false
	for _, r := range trialTables(t) {
		a := arm{r.model, r.context}
		if r.runtime != RuntimeOllama || r.kv != "f16" {
			t.Errorf("%s: %s on %s (%s): the trial table holds Ollama's f16 arms", r.file, r.model, r.runtime, r.kv)
		}
		if math.Abs(r.needs+r.modelCopy-r.rigPeak) > 0.11 {
			t.Errorf("%s: %s at %d: rig peak %.1f is not needs %.1f + model copy %.1f", r.file, r.model, r.context, r.rigPeak, r.needs, r.modelCopy)
		}
		q8 = q8 || strings.HasSuffix(r.model, "-q8_0")
		otherCtx = otherCtx || r.context != 2048
		if r.reservation == roomy {
			withRoom[a]++
			rel := (r.rigPeak - r.measured) / r.measured
			if math.Abs(rel-r.rigErr) > 0.0011 { // one-decimal columns and percentage
				t.Errorf("%s: %s at %d: the row prints %+.1f%%, its columns give %+.2f%%", r.file, r.model, r.context, 100*r.rigErr, 100*rel)
			}
			if math.Abs(rel) > bound {
				t.Errorf("%s: %s at %d: rig %.1f MiB is %+.1f%% from the measured %.1f MiB, past the printed bound of %.0f%%", r.file, r.model, r.context, r.rigPeak, 100*rel, r.measured, 100*bound)
			}
			worst = max(worst, math.Abs(rel))
			continue
		}
		limit := Size(math.Ceil((r.needs+0.05)*(1+bound))) * MiB // needs is printed to a tenth of a MiB
		if r.reservation > limit {
			t.Errorf("%s: %s at %d: reservation %s is more than rig's need %.1f MiB plus the bound (%s)", r.file, r.model, r.context, r.reservation, r.needs, limit)
		}
		if !r.completed || r.ooms > 0 {
			t.Errorf("%s: %s at %d: rig's need plus its bound (%s) did not hold the run (completed %v, OOM kills %d)", r.file, r.model, r.context, r.reservation, r.completed, r.ooms)
		}
		held[a] = true
	}
	for a, n := range withRoom {
		if !held[a] {
			t.Errorf("%s at %d: no run at rig's need plus the bound", a.model, a.context)
		}
		if n < 2 {
			t.Errorf("%s at %d: %d run(s) with room; the bound covers the spread between repeats, so measure it twice", a.model, a.context, n)
		}
	}
	if !q8 || !otherCtx {
		t.Errorf("the trial table has a Q8_0 arm: %v, a context other than 2048: %v; it must have both", q8, otherCtx)
	}
	t.Logf("ollama as a trial runs it: %d arms, worst %.1f%% against a printed bound of %.0f%%", len(withRoom), 100*worst, 100*bound)
}

// TestTrialTableMatchesTheModel predicts every trial row again from its
// model file: the table's rig columns must be what rig predicts today.
func TestTrialTableMatchesTheModel(t *testing.T) {
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned models", err)
	files := map[string]string{}
	for _, set := range []map[string]provision.Model{in.Models, in.OtherQuants} {
		for _, m := range set {
			if m.Path != "" {
				files[m.Name+"-"+strings.ToLower(m.Quant)] = m.Path
			}
		}
	}
	cal := mustCal(t)
	for _, r := range trialTables(t) {
		path, ok := files[r.model]
		if !ok {
			t.Errorf("%s: model %s is not provisioned here (have %d files)", r.file, r.model, len(files))
			continue
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		p := Profile{Name: "simulated-8gib", CardMemory: roomy, Context: r.context, KVType: r.kv, OffloadLayers: OffloadAll, Parallel: 1, Simulated: true}
		e, err := Predict(f, p, r.runtime, cal)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what        string
			table, want float64
		}{{"needs", r.needs, e.Peak.MiBf()}, {"model copy", r.modelCopy, e.ModelCopy.MiBf()}, {"rig peak", r.rigPeak, e.ReservationPeak().MiBf()}} {
			if math.Abs(c.table-c.want) > 0.051 {
				t.Errorf("%s: %s at %d: the table's %s is %.1f MiB, rig predicts %.2f MiB now", r.file, r.model, r.context, c.what, c.table, c.want)
			}
		}
	}
}
