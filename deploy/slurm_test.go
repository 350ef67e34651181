package deploy

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/governor"
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

// slurmOption is the value of the script's #SBATCH line for option (the
// part after "--option=").
func slurmOption(t *testing.T, option string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("slurm", "rig-worker.sbatch"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^#SBATCH --` + regexp.QuoteMeta(option) + `=(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("slurm/rig-worker.sbatch has no #SBATCH --%s= line", option)
	}
	return string(m[1])
}

// TestSlurmJobRenewsItsPassAndDrainsOnTheWarning runs one array task as
// Slurm would, with a real worker connected to a real Temporal server. The
// node's pass is fresh at the start but will not last the job: the script
// must run the real fault suite again while the worker serves (the
// renewal's age and period shortened through the script's own settings),
// and the worker must go on taking trials. Then the warning is sent as
// --signal=B:TERM@60 has Slurm send it, to the batch shell's pid only: the
// worker must stop taking trials and exit, with its renewal loop, well
// inside the 60 s.
func TestSlurmJobRenewsItsPassAndDrainsOnTheWarning(t *testing.T) {
	signal := slurmOption(t, "signal")
	target, rest, ok := strings.Cut(signal, ":")
	if !ok || target != "B" {
		t.Fatalf("#SBATCH --signal=%s: without B: Slurm signals the job's steps only, and the worker is the batch shell", signal)
	}
	name, warn, _ := strings.Cut(rest, "@")
	if name != "TERM" && name != "SIGTERM" {
		t.Fatalf("#SBATCH --signal=%s: the worker drains on TERM", signal)
	}
	if secs, err := strconv.Atoi(warn); err != nil || secs < 30 {
		t.Fatalf("#SBATCH --signal=%s: the warning must leave the worker's 30 s stop grace", signal)
	}
	engine := startEngine(t)
	needSuite(t)
	n := newSlurmNode(t)
	state := filepath.Join(n.state, "governor")
	// Fresh for ten more seconds by the job's renewal age: the job starts
	// without the suite, and its loop must run it soon after. Ten minutes
	// leave a renewed pass fresh until the test ends, however long the
	// suite takes here, so the loop runs it once.
	const renewAfter = 10 * time.Minute
	jobStart := time.Now()
	writeStandInPass(t, state, jobStart.Add(-renewAfter+10*time.Second))
	// The job's $TMPDIR short, as a cluster's is: the sandbox's sockets
	// go under it, and a unix socket's path has 108 bytes at most (this
	// test's own temporary folders, named after it, are too long).
	jobTmp, err := os.MkdirTemp("", "rig-job-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(jobTmp) })
	cmd, _, _ := n.task(t, 7, "RIG_TEMPORAL="+engine, "RIG_WORKER_FLAGS=--metrics 127.0.0.1:0", "TMPDIR="+jobTmp,
		"RIG_FAULTS_RENEW_AFTER="+renewAfter.String(), "RIG_FAULTS_CHECK_EVERY=5")
	job := start(t, cmd)
	url := job.waitFor(t, regexp.MustCompile(`msg=metrics addr=(http://127\.0\.0\.1:\d+)/metrics`), 2*time.Minute)[1]
	healthy := func(within time.Duration) {
		t.Helper()
		var code int
		var body string
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Second) {
			if code, body = get(t, url+"/healthz"); code == 200 {
				return
			}
		}
		t.Fatalf("the job's worker is not taking trials: /healthz %d %s\n%s", code, body, job.out)
	}
	healthy(time.Minute)
	if recs := records(t, state); len(recs) != 1 {
		t.Fatalf("the job ran the fault suite at its start although the node's pass was fresh (%d records)", len(recs))
	}

	// The pass passes RIG_FAULTS_RENEW_AFTER within seconds; the loop then
	// runs the real suite (about 90 s on two cores).
	for deadline := time.Now().Add(8 * time.Minute); len(records(t, state)) < 2; time.Sleep(2 * time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not renew its pass within 8 minutes:\n%s", job.out)
		}
	}
	r, err := governor.LastPass(state)
	if err != nil || !r.At.After(jobStart) {
		t.Fatalf("the job's renewal left no pass of its own (newest %v, %v):\n%s", r.At, err, job.out)
	}
	healthy(30 * time.Second)
	// What RigFaultPassRenewalMissed reads: the renewed pass's start.
	_, body := get(t, url+"/metrics")
	if got := sample(t, body, "rig_governor_fault_pass_timestamp_seconds"); math.Abs(got-float64(r.At.UnixMilli())/1000) > 0.01 {
		t.Errorf("the worker exports rig_governor_fault_pass_timestamp_seconds %v; the renewed pass started at %v", got, r.At)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-job.done:
		job.done <- err
		if err != nil {
			t.Fatalf("the worker exited with %v on Slurm's warning:\n%s", err, job.out)
		}
	case <-time.After(45 * time.Second):
		t.Fatalf("the job was still running 45 s after Slurm's warning (the worker, or its renewal loop, which holds the job's output):\n%s", job.out)
	}
	if !regexp.MustCompile(`stops taking trials.*why="shutting down"`).MatchString(job.out.String()) {
		t.Errorf("the worker did not say it stopped taking trials on the warning:\n%s", job.out)
	}
}
