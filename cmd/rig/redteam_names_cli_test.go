package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRedTeamCLIStudyNameIsNotAPath gives the real command line, against
// the real daemon, a study name that is a path to a planted study whose
// lifecycle.json says it was approved: every command is refused naming
// the name rule, and the planted folder holds only what was planted.
func TestRedTeamCLIStudyNameIsNotAPath(t *testing.T) {
	e := newRigEnv(t)
	planted := filepath.Join(filepath.Dir(e.home), "x") // RIG_HOME/studies/../../x
	if err := os.MkdirAll(planted, 0o700); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{
		"registration.json": `{"name": "planted"}`,
		"lifecycle.json":    `{"state": "approved", "design_hash": "` + strings.Repeat("a", 64) + `"}`,
	} {
		if err := os.WriteFile(filepath.Join(planted, file), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.startDaemon()
	for _, args := range [][]string{
		{"study", "status", "../../x"},
		{"study", "check", "../../x"},
		{"receipts", "export", "../../x", "--audit"},
		{"study", "report", "../../x"},
	} {
		out := e.rig(false, args...)
		if !strings.Contains(out, `study name "../../x" is not a name`) || !strings.Contains(out, "^[a-z0-9][a-z0-9._-]{0,63}$") {
			t.Errorf("rig %s: want refused naming the rule:\n%s", strings.Join(args, " "), out)
		}
	}
	entries, err := os.ReadDir(planted)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range entries {
		got = append(got, en.Name())
	}
	if !slices.Equal(got, []string{"lifecycle.json", "registration.json"}) {
		t.Errorf("%s holds %v after the commands; want only what was planted", planted, got)
	}
}
