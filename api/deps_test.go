package api

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are what a program that only talks to a daemon must not link
// through api: the card probe (go-nvml, cgo), the statistics (gonum), the
// engine (Temporal), and rig's packages that pull those or carry embedded
// data (the task banks, the licence registry) or are the engine itself.
var heavy = []string{
	"github.com/NVIDIA/go-nvml",
	"gonum.org/",
	"go.temporal.io/",
	"go.etcd.io/bbolt",
	"rig/studies",
	"rig/tasks",
	"rig/licences",
	"rig/preflight",
	"rig/analysis",
	"rig/run",
	"rig/receipts",
	"rig/runtimes",
	"rig/governor",
	"rig/scaleout",
	"rig/daemon",
}

// api links only the standard library and data-only pieces of
// rig/internal, none with cgo: a client of the daemon (ui, the command
// line's calls, a studio's script) builds without a GPU library, the
// statistics or the engine, and with CGO_ENABLED=0.
func TestAPIIsLight(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}} {{.Standard}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 {
		t.Fatalf("go list -deps printed %q", out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("go list line %q", line)
		}
		path, cgo, std := f[0], f[1], f[2] == "true"
		for _, h := range heavy {
			if path == h || strings.HasPrefix(path, strings.TrimSuffix(h, "/")+"/") {
				t.Errorf("api links %s (matches %s)", path, h)
			}
		}
		switch {
		case std:
			// The standard library's cgo (net's resolver, runtime/cgo) is
			// every Go program's and goes with CGO_ENABLED=0.
		case cgo != "0":
			t.Errorf("api links %s, which has cgo files", path)
		case path == "rig/api":
		case !strings.HasPrefix(path, "rig/internal/"):
			t.Errorf("api links %s: only the standard library and rig/internal/ are allowed", path)
		}
	}
}
