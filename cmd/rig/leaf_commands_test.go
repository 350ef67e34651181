package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// repoRoot is where the bundled banks and the demo study live, relative to
// this package's directory (go test runs in it).
const repoRoot = "../.."

func repoFile(parts ...string) string {
	return filepath.Join(append([]string{repoRoot}, parts...)...)
}

// runRig runs rig in-process with args and returns what it printed to
// standard output and the error main would print.
func runRig(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runCommand(t, newRootCommand(), args...)
}

func runCommand(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// Every leaf command teaches: what it does, an example, and what its exit
// status means.
func TestLeafCommandsHelp(t *testing.T) {
	root := newRootCommand()
	root.AddCommand(newStudyInitCommand())
	leaves := []string{
		"schema design", "schema generations", "init",
		"licences check", "licences list",
		"tasks lint", "tasks audit", "tasks leakage", "tasks export-blind", "tasks import-keys", "tasks import", "schema bank",
		"preflight", "cards list", "governor faults", "governor status", "governor soak",
	}
	for _, path := range leaves {
		t.Run(path, func(t *testing.T) {
			c, _, err := root.Find(strings.Fields(path))
			if err != nil || c.Name() != strings.Fields(path)[len(strings.Fields(path))-1] {
				t.Fatalf("rig %s not registered (found %v, err %v)", path, c.Name(), err)
			}
			for _, want := range []string{"Example", "Exit status"} {
				if !strings.Contains(c.Long, want) {
					t.Errorf("rig %s --help lacks %q", path, want)
				}
			}
			if c.RunE == nil {
				t.Errorf("rig %s has no RunE", path)
			}
		})
	}
}

// TestErrorsCarryOnePrefix: an error that quotes another rig process's
// output, which began with its own "rig:", is still printed with one.
func TestErrorsCarryOnePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"no daemon":               "rig: no daemon",
		"rig: no daemon":          "rig: no daemon",
		"rig: rig: no daemon":     "rig: no daemon",
		"rig:no daemon":           "rig: no daemon",
		"study x: rig: no daemon": "rig: study x: rig: no daemon",
	} {
		if got := errorLine(errors.New(in)); got != want {
			t.Errorf("errorLine(%q) = %q, want %q", in, got, want)
		}
	}
}
