package deploy

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// walkThrough is the sh blocks of docs/scale-out.md's "One host, step by
// step", in order, as one bash script.
func walkThrough(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/scale-out.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n## One host, step by step\n")
	if start < 0 {
		t.Fatal(`docs/scale-out.md has no "## One host, step by step" section`)
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n")
	blocks := 0
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks++
		script.WriteString(m[1])
	}
	if blocks < 4 {
		t.Fatalf("the walk-through has %d sh blocks; it lost its commands", blocks)
	}
	return script.String()
}

// TestScaleOutWalkThrough runs the single-host walk-through as a reader
// would, from a folder standing for rig's checkout: the dev server, the
// daemon, the fault suite, two workers (one under another HOME) and the
// quick study on the engine.
func TestScaleOutWalkThrough(t *testing.T) {
	script := walkThrough(t)
	needSuite(t)
	if c, err := net.DialTimeout("tcp", "127.0.0.1:7233", time.Second); err == nil {
		c.Close()
		t.Fatal("127.0.0.1:7233, the walk-through's engine port, is taken (a Temporal server already running?)")
	}
	// The checkout: a copy of what the walk-through reads from rig's tree
	// (the study, its bank, the licence registry; go.mod marks the
	// repository a design may read inside), so that its folder is made
	// beside them and not in the tree under test.
	checkout := t.TempDir()
	for _, p := range []string{"examples", "tasks/banks", "licences"} {
		if err := os.CopyFS(filepath.Join(checkout, p), os.DirFS(filepath.Join("..", p))); err != nil {
			t.Fatal(err)
		}
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, "go.mod"), mod, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = checkout
	// The reader's shell: its HOME and provisioned cache, none of rig's
	// other settings.
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "RIG_") && !strings.HasPrefix(kv, "RIG_CACHE=") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "PATH="+filepath.Dir(rigBin)+":"+os.Getenv("PATH"))
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	if err != nil {
		t.Fatalf("the walk-through failed: %v\n%s", err, out)
	}
	for _, want := range []string{"temporal dev server on 127.0.0.1:7233", "suite: PASS", "id: w1", "id: w2"} {
		if !strings.Contains(out, want) {
			t.Errorf("the walk-through printed no %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "fault-suite pass: fresh"); n != 2 {
		t.Errorf("%d of the two workers' dry runs found the pass:\n%s", n, out)
	}
	if !regexp.MustCompile(`done: 48/48 trials, \d+ preempted and rerun, 0 failed \(not scored\), .*workers: w1 [1-9]\d*, w2 [1-9]\d*`).MatchString(out) {
		// A trial the governor preempts on a busy machine is rerun and
		// counted once: preempted ones are fine, failed ones are not.
		t.Errorf("the run did not end with 48 trials over both workers:\n%s", out)
	}
	if !strings.Contains(out, "48/48 trials through temporal") {
		t.Errorf("status does not say the execution ran through temporal:\n%s", out)
	}
	for _, w := range []string{"w1", "w2"} {
		log, err := os.ReadFile(filepath.Join(checkout, "scale", w+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), `msg="trial done" worker=`+w) {
			t.Errorf("worker %s ran no trial:\n%s", w, log)
		}
	}
}
