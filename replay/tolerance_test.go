package replay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/genrecord"
)

func writeCalibration(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "calibration.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadReplayToleranceTakesTheReplayingRuntimesEntry(t *testing.T) {
	cal := ReplayCalibration{Model: "smollm2-135m-instruct", Runtimes: []RuntimeCalibration{
		{Runtime: "llama-server", Pins: genrecord.Pins{BinarySHA256: "aaa"}, Calibration: genrecord.Calibration{Separable: true, NoiseRows: 40, ControlRows: 60, Tolerance: genrecord.Tolerance{Token: 0.25, Row: 0.05}}},
		{Runtime: "ollama", Pins: genrecord.Pins{BinarySHA256: "bbb"}, Calibration: genrecord.Calibration{Separable: true, Tolerance: genrecord.Tolerance{Token: 0.5, Row: 0.1}}},
	}}
	dir := t.TempDir()
	path := filepath.Join(dir, "cal.json")
	if err := cal.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadReplayTolerance(path, "llama-server", genrecord.Pins{BinarySHA256: "aaa"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tolerance != (genrecord.Tolerance{Token: 0.25, Row: 0.05}) || got.Warning != "" || !strings.Contains(got.Source, "40 genuine rows, 60 controls") {
		t.Errorf("llama-server entry: %+v", got)
	}
	got, err = LoadReplayTolerance(path, "ollama", genrecord.Pins{BinarySHA256: "ccc"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Tolerance.Token != 0.5 || !strings.Contains(got.Warning, "another ollama binary") {
		t.Errorf("ollama entry measured on another binary: %+v", got)
	}
}

func TestLoadReplayToleranceRefusesBadCalibrations(t *testing.T) {
	for _, c := range []struct{ name, body, runtime, want string }{
		{"not json", "{", "ollama", "not a calibration"},
		{"no runtimes", `{"model":"m","runtimes":[]}`, "ollama", "field runtimes is empty"},
		{"other runtime", `{"runtimes":[{"runtime":"llama-server","calibration":{"separable":true}}]}`, "ollama", "no calibration for ollama at 1 slot, the record's (it has: llama-server at 1 slot)"},
		{"overlap", `{"runtimes":[{"runtime":"ollama","calibration":{"separable":false}}]}`, "ollama", "runtimes[0].calibration.separable is false"},
		{"negative", `{"runtimes":[{"runtime":"ollama","calibration":{"separable":true,"tolerance":{"token_nats":-1}}}]}`, "ollama", "tolerance is negative"},
	} {
		_, err := LoadReplayTolerance(writeCalibration(t, c.body), c.runtime, genrecord.Pins{}, "")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "calibration.json") {
			t.Errorf("%s: %v, want an error naming the file and %q", c.name, err, c.want)
		}
	}
	// A prefill tolerance measured without weight repacking is refused for
	// a record whose server repacked (and the other way round).
	noRepack := `{"mode":"prefill","runtimes":[{"runtime":"llama-server","pins":{"weight_repack":"off"},"calibration":{"separable":true,"tolerance":{"token_nats":0.01}}}]}`
	for _, rec := range []genrecord.Pins{{}, {WeightRepack: "on"}} {
		_, err := LoadReplayTolerance(writeCalibration(t, noRepack), "llama-server", rec, ModePrefill)
		if err == nil || !strings.Contains(err.Error(), "runtimes[0].pins.weight_repack is \"off\"") || !strings.Contains(err.Error(), "calibration.json") {
			t.Errorf("a calibration without repacking for a record with weight_repack %q: %v", rec.WeightRepack, err)
		}
	}
	if _, err := LoadReplayTolerance(writeCalibration(t, noRepack), "llama-server", genrecord.Pins{WeightRepack: "off"}, ModePrefill); err != nil {
		t.Errorf("a calibration without repacking for a record made so: %v", err)
	}
	if _, err := LoadReplayTolerance(filepath.Join(t.TempDir(), "missing.json"), "ollama", genrecord.Pins{}, ""); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestReplayRecordRefusesTwoTolerances(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "g.jsonl")
	if err := writeRecord(rec, genrecord.Pins{Runtime: "ollama", ModelSHA256: strings.Repeat("a", 64), ModelName: "m", RuntimeVersion: "0", BinarySHA256: strings.Repeat("b", 64), Libraries: map[string]string{}, BuildFlags: "-", MachineLine: "x", DesignHash: "d"}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := ReplayRecord(t.Context(), ReplayRequest{File: rec, Calibration: writeCalibration(t, `{}`),
		Options: genrecord.ReplayOptions{Tolerance: genrecord.Tolerance{Token: 1}}})
	if !errors.Is(err, errToleranceTwice) {
		t.Errorf("calibration and a hand tolerance together: %v", err)
	}
}

// The calibration measured on this project's machine and kept beside the
// record format loads for both runtimes, and its tolerance sits between the
// noise floor and the nearest control it was measured on.
func TestKeptCalibrationLoads(t *testing.T) {
	path := "../genrecord/testdata/replay-calibration-2026-11-30.json"
	for _, kind := range []string{"llama-server", "ollama"} {
		got, err := LoadReplayTolerance(path, kind, genrecord.Pins{}, "")
		if err != nil {
			t.Fatal(err)
		}
		if got.Tolerance.Token <= 0 || got.Tolerance.Token >= 0.28 || !strings.Contains(got.Source, "false accepts 0, false rejects 0") {
			t.Errorf("%s: %+v", kind, got)
		}
	}
}

// The kept prefill calibration: SmolLM2's rows and controls separate by three
// orders of magnitude, Gemma 3's do not, and its entry is refused by name.
func TestKeptPrefillCalibration(t *testing.T) {
	path := "../genrecord/testdata/replay-calibration-prefill-2026-12-02.json"
	smol := genrecord.Pins{ModelName: "smollm2-135m-instruct", ModelSHA256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"}
	got, err := LoadReplayTolerance(path, "llama-server", smol, ModePrefill)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tolerance.Token <= 0 || got.Tolerance.Token > DefaultPrefillTolerance.Token || got.Tolerance.Row > DefaultPrefillTolerance.Row || !strings.Contains(got.Source, "false accepts 0, false rejects 0") {
		t.Errorf("SmolLM2's prefill tolerance %+v (%s); want it positive, within rig's default %+v, with no false accepts or rejects", got.Tolerance, got.Source, DefaultPrefillTolerance)
	}
	gemma := genrecord.Pins{ModelName: "gemma-3-270m", ModelSHA256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"}
	if _, err := LoadReplayTolerance(path, "llama-server", gemma, ModePrefill); err == nil || !strings.Contains(err.Error(), "runtimes[0].models[1].calibration.separable is false") {
		t.Errorf("Gemma 3's entry: got %v, want it refused by its field", err)
	}
	if _, err := LoadReplayTolerance(path, "llama-server", smol, ModeExact); err == nil || !strings.Contains(err.Error(), "field mode is \"prefill\"") {
		t.Errorf("the prefill calibration for an exact replay: got %v, want it refused naming both modes", err)
	}
}

// The kept prefill calibration made with llama-server's arithmetic pinned
// (no weight repacking, no prompt cut for checkpoints): both models' rows
// and every control separate, with no false accept or reject, and it is used
// only for records made the same way.
func TestKeptPinnedPrefillCalibration(t *testing.T) {
	path := "../genrecord/testdata/replay-calibration-prefill-2026-12-02-pinned.json"
	pinned := func(name, sha string) genrecord.Pins {
		return genrecord.Pins{ModelName: name, ModelSHA256: sha, WeightRepack: "off", PromptCheckpoints: "off"}
	}
	for _, rec := range []genrecord.Pins{
		pinned("smollm2-135m-instruct", "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"),
		pinned("gemma-3-270m", "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"),
	} {
		got, err := LoadReplayTolerance(path, "llama-server", rec, ModePrefill)
		if err != nil {
			t.Fatalf("%s: %v", rec.ModelName, err)
		}
		if got.Tolerance.Token <= 0 || got.Tolerance.Row <= 0 || !strings.Contains(got.Source, "false accepts 0, false rejects 0") {
			t.Errorf("%s's prefill tolerance %+v (%s); want it positive, with no false accepts or rejects", rec.ModelName, got.Tolerance, got.Source)
		}
	}
	// A record made before the pins (its server repacked and cut prompts).
	old := genrecord.Pins{ModelName: "gemma-3-270m", ModelSHA256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"}
	if _, err := LoadReplayTolerance(path, "llama-server", old, ModePrefill); err == nil || !strings.Contains(err.Error(), "runtimes[0].pins.weight_repack is \"off\", the record's is absent") {
		t.Errorf("the pinned calibration for an older record: %v", err)
	}
}

// A record made at N slots is held to the tolerance calibrated at N on its
// runtime; at a count the calibration lacks, replay says which to measure;
// a record from before slots (none) takes the one-slot entry, as does a
// calibration entry from before slots.
func TestLoadReplayToleranceTakesTheRecordsSlotCount(t *testing.T) {
	cal := ReplayCalibration{Model: "smollm2-135m-instruct", Runtimes: []RuntimeCalibration{
		{Runtime: "llama-server", Calibration: genrecord.Calibration{Separable: true, Tolerance: genrecord.Tolerance{Token: 0.25, Row: 0.05}}},
		{Runtime: "llama-server", Slots: 4, Calibration: genrecord.Calibration{Separable: true, Tolerance: genrecord.Tolerance{Token: 0.75, Row: 0.2}}},
	}}
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := cal.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		slots int
		want  float64
	}{{0, 0.25}, {1, 0.25}, {4, 0.75}} {
		got, err := LoadReplayTolerance(path, "llama-server", genrecord.Pins{Slots: c.slots}, "")
		if err != nil || got.Tolerance.Token != c.want {
			t.Errorf("record at %d slots: %+v, %v; want token tolerance %v", c.slots, got, err, c.want)
		}
	}
	_, err := LoadReplayTolerance(path, "llama-server", genrecord.Pins{Slots: 2}, "")
	if err == nil || !strings.Contains(err.Error(), "at 2 slots") || !strings.Contains(err.Error(), "--slots 2") || !strings.Contains(err.Error(), "llama-server at 4 slots") {
		t.Errorf("a record at 2 slots with no such calibration: %v", err)
	}
}
