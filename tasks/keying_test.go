package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestExportImportKeys(t *testing.T) {
	outs := blindOutputs()
	cands, controls := outs[:2], outs[2:]
	var buf bytes.Buffer
	m, err := ExportBlind(&buf, nil, cands, controls, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := AssertNoIdentity(buf.String(), m.Identities()); err != nil {
		t.Errorf("export names a source: %v", err)
	}
	controlsSeen := 0
	for _, e := range m.Entries {
		if e.Control {
			controlsSeen++
		}
	}
	if controlsSeen != 1 {
		t.Errorf("%d controls in the map, want 1", controlsSeen)
	}
	// A reviewer keys every line.
	var keyed bytes.Buffer
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var it KeyingItem
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatal(err)
		}
		pass := strings.Contains(it.Text, "4")
		it.Pass = &pass
		line, _ := json.Marshal(it)
		keyed.Write(append(line, '\n'))
	}
	keys, err := ImportKeys(bytes.NewReader(keyed.Bytes()), "keyed.jsonl", m)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("%d keys", len(keys))
	}
	for _, k := range keys {
		if k.TrialID == "" || k.Pass == nil {
			t.Errorf("key not joined: %+v", k)
		}
		if k.TrialID == "r2" && *k.Pass {
			t.Error("r2 (no digit 4) keyed as pass")
		}
	}

	bad := []struct{ name, text, field string }{
		{"unknown label", `{"label":"item-zzz","task_id":"t1","text":"","pass":true}`, "label"},
		{"unkeyed", strings.SplitN(keyed.String(), "\n", 2)[0][:0] + `{"label":"` + m.Entries[0].Label + `","task_id":"t1","text":"","pass":null,"score":null}`, "pass"},
		{"score range", `{"label":"` + m.Entries[0].Label + `","task_id":"t1","text":"","pass":null,"score":1.5}`, "score"},
		{"extra field", `{"label":"` + m.Entries[0].Label + `","task_id":"t1","text":"","pass":true,"model":"x"}`, "model"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportKeys(strings.NewReader(tc.text), "keyed.jsonl", m)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Field != tc.field || pe.Line != 1 {
				t.Errorf("err = %v, want keyed.jsonl:1 field %s", err, tc.field)
			}
		})
	}
	first := strings.SplitN(keyed.String(), "\n", 2)[0]
	if _, err := ImportKeys(strings.NewReader(first), "keyed.jsonl", m); err == nil || !strings.Contains(err.Error(), "not keyed") {
		t.Errorf("partial import: %v", err)
	}
}
