package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/internal/provision"
)

// The Slurm script runs under bash as sbatch would run it: the submitting
// shell's environment, Slurm's variables for an array task, a per-job
// $TMPDIR, and the real rig on PATH. RIG_WORKER_FLAGS=--dry-run makes the
// worker print where it looks instead of connecting.

type slurmNode struct {
	bin, state, spool, home string
}

func newSlurmNode(t *testing.T) *slurmNode {
	t.Helper()
	n := &slurmNode{bin: t.TempDir(), state: t.TempDir(), spool: t.TempDir(), home: t.TempDir()}
	if err := os.Symlink(rigBin, filepath.Join(n.bin, "rig")); err != nil {
		t.Fatal(err)
	}
	return n
}

// task starts array task i of job 4242; extra is added to its environment.
func (n *slurmNode) task(t *testing.T, i int, extra ...string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	tmp := t.TempDir()
	cmd := exec.Command("bash", filepath.Join("slurm", "rig-worker.sbatch"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append([]string{
		"PATH=" + n.bin + ":/usr/bin:/bin",
		"HOME=" + n.home,
		"USER=" + os.Getenv("USER"),
		"RIG_CACHE=" + provision.CacheDir(),
		// Where this node keeps the governor's state (the script's default
		// is /var/tmp/rig-$USER, which a test must not write).
		"RIG_STATE_DIR=" + n.state,
		"RIG_TEMPORAL=127.0.0.1:7233",
		"RIG_SPOOL=" + n.spool,
		"RIG_WORKER_FLAGS=--dry-run",
		"SLURM_JOB_ID=" + fmt.Sprint(4242+i),
		"SLURM_ARRAY_JOB_ID=4242",
		fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", i),
		"TMPDIR=" + tmp,
	}, extra...)
	return cmd, &out, tmp
}

func TestSlurmScriptRefusesWithoutCluster(t *testing.T) {
	n := newSlurmNode(t)
	cmd, out, _ := n.task(t, 0, "RIG_TEMPORAL=")
	if err := cmd.Run(); err == nil || !strings.Contains(out.String(), "set RIG_TEMPORAL") {
		t.Fatalf("the script ran without RIG_TEMPORAL: %v\n%s", err, out)
	}
	if recs := records(t, filepath.Join(n.state, "governor")); len(recs) != 0 {
		t.Fatalf("the script ran the fault suite before checking its settings: %v", recs)
	}
}

// TestSlurmTasksShareOneNodePass starts two array tasks on one node at
// once: one runs the fault suite, the other waits for it, and both workers
// find its pass. A third task on a node whose NVML sees every card watches
// the card Slurm gave it.
func TestSlurmTasksShareOneNodePass(t *testing.T) {
	needSuite(t)
	n := newSlurmNode(t)
	state := filepath.Join(n.state, "governor")
	type task struct {
		cmd *exec.Cmd
		out *bytes.Buffer
		tmp string
	}
	var tasks []task
	for i := 3; i <= 4; i++ {
		cmd, out, tmp := n.task(t, i)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task{cmd, out, tmp})
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	for i, tk := range tasks {
		if err := tk.cmd.Wait(); err != nil {
			t.Fatalf("array task %d: %v\n%s", i+3, err, tk.out)
		}
		s := settings(t, tk.out.String())
		wantPassFor(t, s, state)
		if want := fmt.Sprintf("%s-4242-%d", host, i+3); s["id"] != want {
			t.Errorf("task %d's worker is %q, want %q", i+3, s["id"], want)
		}
		if want := filepath.Join(tk.tmp, fmt.Sprintf("rig-worker-4242-%d", i+3)); s["home"] != want {
			t.Errorf("task %d's home is %s, want %s (the job's own $TMPDIR)", i+3, s["home"], want)
		}
		if s["card"] != "0" {
			t.Errorf("task %d on a node that shows it one card watches card %s", i+3, s["card"])
		}
	}
	if recs := records(t, state); len(recs) != 1 {
		t.Fatalf("two tasks on one node left %d fault-suite records, want 1 (the second waits for the first's)", len(recs))
	}

	// A node without ConstrainDevices: NVML lists all four cards. The fake
	// nvidia-smi stands in for the driver's, which this machine may lack.
	smi := filepath.Join(n.bin, "nvidia-smi")
	list := "#!/bin/sh\nfor i in 0 1 2 3; do echo \"GPU $i: NVIDIA H100 (UUID: GPU-$i)\"; done\n"
	if err := os.WriteFile(smi, []byte(list), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd, out, _ := n.task(t, 5, "SLURM_JOB_GPUS=2")
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("array task 5: %v\n%s", err, out)
	}
	s := settings(t, out.String())
	wantPassFor(t, s, state)
	if s["card"] != "2" {
		t.Errorf("the task Slurm gave card 2 watches card %s", s["card"])
	}
	if recs := records(t, state); len(recs) != 1 {
		t.Errorf("a task on a node with a fresh pass ran the suite again (%d records, %s)", len(recs), time.Since(start))
	}
}
