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
		// The bound as a verdict prints it: a card just past the prediction.
		f := fakeModel(t, "llama", 4, 256, 4, 2, 64, 0, 1000)
		p := Profile{Name: "sim", CardMemory: 8 * GiB, Context: 2048, Simulated: true}
		e, err := Predict(f, p, rt, cal)
		if err != nil {
			t.Fatal(err)
		}
		p.CardMemory = e.Card + 1
		m := printedError.FindStringSubmatch(Decide(e, p, time.Unix(0, 0)).Reason)
		if m == nil {
			t.Fatalf("%s: the verdict prints no measured error: %s", rt, Decide(e, p, time.Unix(0, 0)).Reason)
		}
		printed, _ := strconv.Atoi(m[1])
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
