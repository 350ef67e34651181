package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// replay refuses, before it loads a runtime, a record that is not there,
// a mode it does not know, prefill on a runtime that has none, a tolerance
// given twice and a --store that is not there (naming the flag and the fix,
// and creating no empty store in its place).
func TestReplayRefusesBeforeStarting(t *testing.T) {
	record := repoFile("testdata", "hostile", "valid", "genrecords", "two-rows.jsonl")
	dir := t.TempDir()
	missing := filepath.Join(dir, "generations-arm.jsonl")
	store := filepath.Join(dir, "store.bolt") // a mistyped path in a folder that exists
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{missing}, []string{"open generation record", missing, "no such file"}},
		{[]string{record, "--mode", "fast"}, []string{`--mode "fast": the modes are exact`}},
		{[]string{record, "--mode", "prefill", "--runtime", "ollama"}, []string{record, "prefill replay is not available for ollama", "--mode exact"}},
		{[]string{record, "--calibration", filepath.Join(dir, "cal.json"), "--tolerance-token", "0.1"}, []string{"either with --calibration or with --tolerance-token/--tolerance-row, not both"}},
		{[]string{record, "--store", store}, []string{"--store " + store, "no such file", "give the study's store.bolt"}},
	} {
		out, err := runRig(t, append([]string{"replay"}, c.args...)...)
		if err == nil {
			t.Errorf("replay %s passed:\n%s", strings.Join(c.args, " "), out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("replay %s = %v; want it to say %q", strings.Join(c.args, " "), err, w)
			}
		}
	}
	if _, err := os.Stat(store); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("replay --store made %s (%v)", store, err)
	}
	if _, err := runRig(t, "replay"); err == nil || !strings.Contains(err.Error(), "accepts 1 arg(s)") {
		t.Errorf("replay with no record = %v", err)
	}
}
