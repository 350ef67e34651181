package analysis

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Recorded decisions cite a comparison hash, so the bytes ComparisonHash
// hashes are frozen: a renamed JSON tag, a reordered field or a field added
// without omitempty would make every recorded decision stale. These hashes
// were computed on the code before the analysis's JSON moved to snake_case
// (commit d51a3cd): re-pinning one would hide exactly what they catch.
const (
	goldenFilledHash    = "bb4a7af0f9ce784708a877ad967acbdb490f69fb206ad8cdf6753f4a17cfb480"
	goldenRealisticHash = "a8b61fa3d7321e34cc09510045e6ca6ffbe94f2d3f714e0b20105bea5f460b50"
	// goldenStoppedHash is the realistic trials with the early-stopping
	// record testdata/stop_legacy.json, as that code wrote and read it.
	goldenStoppedHash = "d476da1e88c3bb121f44342550a4d86f51b402f5135bc638e115704ad6ae7b03"
)

// hashedFields are the fields of the types the comparison hash reads, as
// they stood when the golden hashes were pinned, with the JSON name each
// is hashed under. filler fills only these, so a field added later leaves
// the filled input's hash as it was when it is omitted while zero.
var hashedFields = map[string]string{
	"Input.Design": "design", "Input.Trials": "trials", "Input.Sequential": "sequential",

	"Design.Hash": "hash", "Design.Arms": "arms", "Design.JobKinds": "jobKinds", "Design.Pairs": "pairs",
	"Design.Incumbent": "incumbent", "Design.Alpha": "alpha", "Design.PBestBar": "pBestBar", "Design.Resamples": "resamples",
	"Design.PermutationResamples": "permutationResamples", "Design.Seed": "seed", "Design.Interval": "interval",
	"Design.Level": "level", "Design.CostMeasure": "costMeasure", "Design.CostFactor": "costFactor", "Design.Power": "power",
	"Design.Rule": "rule", "Design.Guardrails": "guardrails", "Design.Policy": "winnerPolicy",
	"Arm.Name": "name", "Arm.JudgeID": "judgeId", "Arm.CalibrationID": "calibrationId",
	"JobKind.Name": "name", "JobKind.Measure": "measure", "JobKind.Gate": "gate",
	"Pair.Candidate": "candidate", "Pair.Baseline": "baseline",
	"PowerPlan.PilotDiscordance": "pilotDiscordance", "PowerPlan.Tasks": "tasks", "PowerPlan.Power": "power",
	"PowerPlan.SmallestDifference": "smallestDifference",
	"Rule.Clauses":                 "clauses", "Rule.Default": "default",
	"Clause.If": "if", "Clause.Then": "then", "Clause.Check": "check", "Clause.Number": "number", "Clause.When": "when",
	"Condition.Outcomes": "outcomes", "Condition.Candidate": "candidate", "Condition.Baseline": "baseline",
	"Condition.JobKind": "jobKind", "Condition.MinDelta": "minDelta",
	"Guardrail.Metric": "metric", "Guardrail.HigherIsBetter": "higherIsBetter", "Guardrail.MaxRelative": "maxRelative",
	"Guardrail.MaxAbsolute":         "maxAbsolute",
	"WinnerPolicy.MinPassRateDelta": "minPassRateDelta", "WinnerPolicy.MaxCostIncrease": "maxCostIncrease",
	"WinnerPolicy.MaxP95LatencyIncrease": "maxP95LatencyIncrease", "WinnerPolicy.AllowRegressions": "allowRegressions",
	"WinnerPolicy.AllowIncomparableJudges": "allowIncomparableJudges",

	"Trial.DesignHash": "designHash", "Trial.Arm": "arm", "Trial.JobKind": "jobKind", "Trial.Task": "task",
	"Trial.Repeat": "repeat", "Trial.Score": "score", "Trial.Pass": "pass", "Trial.Preempted": "preempted",
	"Trial.BudgetBlown": "budgetBlown", "Trial.Capped": "capped", "Trial.Truncated": "truncated", "Trial.StopCap": "stopCap",
	"Trial.RepeatsPrompt": "repeatsPrompt", "Trial.Missing": "missing", "Trial.Reason": "reason",
	"Trial.WallSeconds": "wallSeconds", "Trial.PeakMemoryBytes": "peakMemoryBytes", "Trial.EnergyJoules": "energyJoules",
	"Trial.EnergySource": "energySource", "Trial.PromptTokS": "promptTokS", "Trial.GenTokS": "genTokS",
	"Trial.TTFTMS": "ttftMs", "Trial.TPOTMS": "tpotMs", "Trial.Metrics": "metrics",

	"Sequential.Stopping": "stopping", "Sequential.Look": "look", "Sequential.StoppedEarly": "stoppedEarly",
	"Sequential.NotRun": "notRun",
	"Stopping.Method":   "method", "Stopping.Looks": "looks", "Stopping.Spending": "spending", "Stopping.Alpha": "alpha",
	"Stopping.Futility": "futility", "Stopping.FutilityBeta": "futilityBeta", "Stopping.Discordance": "discordance",
	"Look.Check": "check", "Look.Stop": "stop", "Look.End": "end", "Look.Reason": "reason", "Look.Pairs": "pairs",
	"Look.HolmP":    "holmP",
	"PairLook.Pair": "pair", "PairLook.JobKind": "jobKind", "PairLook.Status": "status", "PairLook.Direction": "direction",
	"PairLook.StoppedAt": "stoppedAt", "PairLook.Tasks": "tasks", "PairLook.CandidateOnly": "candidateOnly",
	"PairLook.BaselineOnly": "baselineOnly", "PairLook.Alpha": "alpha", "PairLook.P": "p", "PairLook.CS": "cs",
	"PairLook.Stagewise": "stagewise", "PairLook.Path": "path",
	"ConfidenceSequence.Lo": "lo", "ConfidenceSequence.Hi": "hi", "ConfidenceSequence.Level": "level",
	"StagewiseInterval.Lo": "lo", "StagewiseInterval.Hi": "hi", "StagewiseInterval.Level": "level",
	"StagewiseInterval.Tasks": "tasks", "StagewiseInterval.Discordant": "discordant",
	"LookPoint.Check": "check", "LookPoint.Tasks": "tasks", "LookPoint.Fraction": "fraction", "LookPoint.Look": "look",
	"LookPoint.Statistic": "statistic", "LookPoint.Boundary": "boundary", "LookPoint.Discordant": "discordant",
	"LookPoint.FutilityE": "futilityE", "LookPoint.FutilityBound": "futilityBound", "LookPoint.CS": "cs",
	"LookPoint.Status": "status", "LookPoint.P": "p",
}

// filler sets every hashed field to a value that is not zero and differs
// from field to field: strings that encoding/json escapes (HTML characters,
// U+2028), numbers printed with an exponent, a NaN Num (null), and map keys
// that look like field names, which must stay as they are.
type filler struct{ n int }

func (f *filler) fill(v reflect.Value, path string) {
	f.n++
	n := f.n
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), path)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if _, ok := hashedFields[t.Name()+"."+t.Field(i).Name]; ok {
				f.fill(v.Field(i), path+"."+t.Field(i).Name)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			f.fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for _, k := range []string{"job_kind", "jobKind", "peak_memory_bytes", "x<&>"} {
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, path+"["+k+"]")
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("%s#%d <a&b> é\u2028\"q\"", path, n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint64:
		v.SetUint(uint64(n) << 40)
	case reflect.Float64:
		switch {
		case v.Type() == reflect.TypeFor[Num]() && n%7 == 0:
			v.SetFloat(math.NaN())
		case n%5 == 0:
			v.SetFloat(float64(n) * 1e21)
		case n%3 == 0:
			v.SetFloat(float64(n) * 1e-9)
		default:
			v.SetFloat(float64(n) / 8)
		}
	default:
		panic(fmt.Sprintf("fill: %s is a %s", path, v.Kind()))
	}
}

// filledInput is an Input with every hashed field set, three trials (one
// scored, so that its score counts) and a stopping record.
func filledInput() Input {
	var in Input
	f := &filler{}
	f.fill(reflect.ValueOf(&in).Elem(), "in")
	var extra Trial
	f.fill(reflect.ValueOf(&extra).Elem(), "extra")
	extra.Missing, extra.Preempted = false, false
	in.Trials = append(in.Trials, extra)
	return in
}

// realisticInput is two arms on 30 pass tasks, as the analysis's own tests
// build them, with a guardrail and a policy.
func realisticInput() Input {
	d := twoArmDesign(MeasurePass)
	limit := 0.2
	d.Guardrails = []Guardrail{{Metric: MetricWallTime, MaxRelative: &limit}}
	d.Policy = &WinnerPolicy{MaxCostIncrease: &limit}
	trials := passTrials(7, 30, map[string]float64{"base": 0.55, "cand": 0.7}, map[string]float64{"base": 2.5, "cand": 3.25})
	trials[3].Metrics = map[string]float64{"peak_memory_bytes": 1 << 30}
	return Input{Design: d, Trials: trials}
}

// stoppedInput is two arms on 30 pass tasks with the early-stopping record
// stored before the move to snake_case.
func stoppedInput(t *testing.T) Input {
	raw, err := os.ReadFile(filepath.Join("testdata", "stop_legacy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var seq Sequential
	if err := json.Unmarshal(raw, &seq); err != nil {
		t.Fatal(err)
	}
	trials := passTrials(7, 30, map[string]float64{"base": 0.55, "cand": 0.7}, nil)
	return Input{Design: twoArmDesign(MeasurePass), Trials: trials, Sequential: &seq}
}

func TestComparisonHashIsFrozen(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{"every field filled", filledInput(), goldenFilledHash},
		{"realistic", realisticInput(), goldenRealisticHash},
		{"with a stored stopping record", stoppedInput(t), goldenStoppedHash},
	} {
		got, err := ComparisonHash(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: ComparisonHash = %s, pinned %s: the hashed bytes changed, and every recorded decision citing a hash would read as stale", tc.name, got, tc.want)
		}
	}
}

// A field the hash reads that was not there when the hashes were pinned
// must be omitted while zero: otherwise every input hashes differently and
// every recorded decision reads as stale.
func TestNewHashedFieldsAreOmittedWhenZero(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] || ty.Implements(reflect.TypeFor[json.Marshaler]()) {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			fd := ty.Field(i)
			if !fd.IsExported() || fd.Tag.Get("json") == "-" {
				continue
			}
			if _, ok := hashedFields[ty.Name()+"."+fd.Name]; ok {
				walk(fd.Type)
				continue
			}
			_, opts, _ := strings.Cut(fd.Tag.Get("json"), ",")
			k := fd.Type.Kind()
			if !strings.Contains(opts, "omitempty") || k == reflect.Struct || k == reflect.Array {
				t.Errorf("%s.%s is hashed but was not when the comparison hash was frozen: give it omitempty (and a type omitempty omits), or take it out of the hash in ComparisonHash", ty.Name(), fd.Name)
				continue
			}
			// A new field omitted while empty (a nil slice, map or
			// pointer) hashes nothing of what it holds when it is empty,
			// so its element type's fields cannot touch an old hash.
			if k != reflect.Slice && k != reflect.Map && k != reflect.Pointer {
				walk(fd.Type)
			}
		}
	}
	walk(reflect.TypeFor[Input]())
	if len(seen) < 10 {
		t.Fatalf("walked %d types; the walk lost its way", len(seen))
	}
}
