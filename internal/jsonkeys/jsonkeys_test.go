package jsonkeys

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// num marshals itself, as analysis.Num does: its JSON is not its fields'.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'g', -1, 64), nil
}

type Base struct {
	BaseName string `json:"base_name"`
}

// The same shapes twice: with snake_case names and with the legacy
// camelCase ones, so one's JSON renamed must be the other's, byte for byte.
type (
	innerNew struct {
		HolmP  []float64 `json:"holm_p"`
		Lo     num       `json:"lo"`
		Custom num       `json:"custom_num"`
	}
	outerNew struct {
		Base
		JobKind  string              `json:"job_kind"`
		PBestBar float64             `json:"p_best_bar,omitempty"`
		Inner    *innerNew           `json:"inner_one"`
		Many     []innerNew          `json:"many_inner"`
		Metrics  map[string]float64  `json:"metrics_by_name"`
		ByKey    map[string]innerNew `json:"by_key"`
		Raw      []byte              `json:"raw_bytes"`
		Any      any                 `json:"any_value"`
		Skipped  string              `json:"-"`
		NoTag    int
	}
	innerOld struct {
		HolmP  []float64 `json:"holmP"`
		Lo     num       `json:"lo"`
		Custom num       `json:"customNum"`
	}
	baseOld struct {
		BaseName string `json:"baseName"`
	}
	outerOld struct {
		baseOld
		JobKind  string              `json:"jobKind"`
		PBestBar float64             `json:"pBestBar,omitempty"`
		Inner    *innerOld           `json:"innerOne"`
		Many     []innerOld          `json:"manyInner"`
		Metrics  map[string]float64  `json:"metricsByName"`
		ByKey    map[string]innerOld `json:"byKey"`
		Raw      []byte              `json:"rawBytes"`
		Any      any                 `json:"anyValue"`
		Skipped  string              `json:"-"`
		NoTag    int
	}
)

// camel is Snake undone, for the tests.
func camel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// fromLegacy is the table a reader of old documents keeps: the legacy
// names it knows, to their snake_case; any other name (a Go field name,
// "NoTag") stays.
func fromLegacy(s string) string {
	for _, l := range []string{"holmP", "customNum", "baseName", "jobKind", "pBestBar", "innerOne", "manyInner", "metricsByName", "byKey", "rawBytes", "anyValue"} {
		if s == l {
			return Snake(l)
		}
	}
	return s
}

func sample() (outerNew, outerOld) {
	in := innerNew{HolmP: []float64{0.25, 1e-9, 3e21}, Lo: num(math.NaN()), Custom: 0.5}
	n := outerNew{
		Base: Base{BaseName: "b"}, JobKind: "apply <&> é\u2028", PBestBar: 0.9, Inner: &in, Many: []innerNew{in, {}},
		// Map keys are data: a key that looks like a field name stays.
		Metrics: map[string]float64{"job_kind": 1, "jobKind": 2, "peak_memory_bytes": 3},
		ByKey:   map[string]innerNew{"p_best_bar": in},
		Raw:     []byte("job_kind"), Any: map[string]any{"job_kind": 1}, Skipped: "x", NoTag: 7,
	}
	io := innerOld(in)
	o := outerOld{
		baseOld: baseOld(n.Base), JobKind: n.JobKind, PBestBar: n.PBestBar, Inner: &io, Many: []innerOld{io, {}},
		Metrics: n.Metrics, ByKey: map[string]innerOld{"p_best_bar": io}, Raw: n.Raw, Any: n.Any, Skipped: "x", NoTag: 7,
	}
	return n, o
}

func TestRenameGivesTheOtherSpellingByteForByte(t *testing.T) {
	n, o := sample()
	nb, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Rename(nb, reflect.TypeOf(n), camel)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, ob) {
		t.Errorf("snake renamed to camel:\n got  %s\n want %s", got, ob)
	}
	back, err := Rename(ob, reflect.TypeOf(n), fromLegacy)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, nb) {
		t.Errorf("camel renamed to snake:\n got  %s\n want %s", back, nb)
	}
	// What was renamed back reads as the value it was written from.
	var read outerNew
	if err := json.Unmarshal(back, &read); err != nil {
		t.Fatal(err)
	}
	if read.JobKind != n.JobKind || read.BaseName != "b" || read.Inner == nil || read.Inner.HolmP[2] != 3e21 || read.Metrics["jobKind"] != 2 || read.ByKey["p_best_bar"].Custom != 0.5 {
		t.Errorf("read back %+v", read)
	}
}

func TestRenameKeepsWhiteSpaceAndUnknownMembers(t *testing.T) {
	doc := "{\n  \"jobKind\" : \"k\",\n  \"someOther\": {\"deepKey\": [1, {\"a_b\": null}]},\n  \"innerOne\": {\"holmP\": [ 1 ,2 ]}\n}\n"
	want := "{\n  \"job_kind\" : \"k\",\n  \"some_other\": {\"deepKey\": [1, {\"a_b\": null}]},\n  \"inner_one\": {\"holm_p\": [ 1 ,2 ]}\n}\n"
	got, err := Rename([]byte(doc), reflect.TypeFor[outerNew](), Snake)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestRenameRefusesWhatIsNotJSON(t *testing.T) {
	for _, doc := range []string{"", "{", `{"a":1} x`, `{"a" 1}`} {
		if _, err := Rename([]byte(doc), reflect.TypeFor[outerNew](), Snake); err == nil {
			t.Errorf("Rename(%q) took it", doc)
		}
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"jobKinds": "job_kinds", "pBestBar": "p_best_bar", "ttftP50Ms": "ttft_p50_ms", "maxP95LatencyIncrease": "max_p95_latency_increase",
		"judgeId": "judge_id", "holmP": "holm_p", "already_snake": "already_snake", "alpha": "alpha", "": "",
	} {
		if got := Snake(in); got != want {
			t.Errorf("Snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// Renaming with the identity changes nothing, and renaming never breaks a
// document: its result is JSON, and renaming it back gives it again.
func FuzzRename(f *testing.F) {
	n, o := sample()
	nb, _ := json.Marshal(n)
	ob, _ := json.Marshal(o)
	f.Add(nb)
	f.Add(ob)
	f.Add([]byte(`{"jobKind": [1, "x\"y", {"innerOne": null}], "byKey": {"q": {"holmP": []}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		typ := reflect.TypeFor[outerNew]()
		same, err := Rename(doc, typ, func(s string) string { return s })
		if err != nil {
			if json.Valid(doc) {
				t.Fatalf("valid JSON refused: %v", err)
			}
			return
		}
		if !bytes.Equal(same, doc) {
			t.Fatalf("the identity changed %q to %q", doc, same)
		}
		snake, err := Rename(doc, typ, Snake)
		if err != nil || !json.Valid(snake) {
			t.Fatalf("Rename(Snake) = %q, %v", snake, err)
		}
	})
}
