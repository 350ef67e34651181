package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help.golden from the commands as they are")

// TestHelpIsGolden holds every command's --help to testdata/help.golden, so
// that moving the command line's code around (one command per file) cannot
// change what a user reads. A deliberate change of a text is made with
// go test ./cmd/rig -run TestHelpIsGolden -update-help, and shows in review
// as a diff of the golden file.
func TestHelpIsGolden(t *testing.T) {
	var all bytes.Buffer
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		var b bytes.Buffer
		c.SetOut(&b)
		c.SetErr(&b)
		if err := c.Help(); err != nil {
			t.Fatalf("%s --help: %v", c.CommandPath(), err)
		}
		all.WriteString("==== " + c.CommandPath() + " --help\n")
		all.Write(b.Bytes())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
	golden := filepath.Join("testdata", "help.golden")
	if *updateHelp {
		if err := os.WriteFile(golden, all.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (make it with -update-help)", err)
	}
	if got := all.String(); got != string(want) {
		gotCmds, wantCmds := strings.Split(got, "==== "), strings.Split(string(want), "==== ")
		for i := 0; i < len(gotCmds) || i < len(wantCmds); i++ {
			var g, w string
			if i < len(gotCmds) {
				g = gotCmds[i]
			}
			if i < len(wantCmds) {
				w = wantCmds[i]
			}
			if g != w {
				t.Fatalf("the help differs from testdata/help.golden, first at:\n--- golden\n%s\n+++ now\n%s\n(a deliberate change: -update-help)", w, g)
			}
		}
	}
}
