package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"rig/internal/provision"
	"rig/receipts"
	"rig/runtimes"
	"rig/scaleout"
)

// worker is one `rig worker` process of a test, with its log.
type workerProc struct {
	id  string
	cmd *exec.Cmd
	log string
}

func (e *rigEnv) startWorker(addr, spool, id string, extra ...string) *workerProc {
	e.t.Helper()
	w := &workerProc{id: id, log: filepath.Join(e.home, "worker-"+id+".log")}
	args := append([]string{"worker", "--temporal", addr, "--spool", spool, "--id", id}, extra...)
	w.cmd = exec.Command(e.bin, args...)
	w.cmd.Env = e.env()
	f, err := os.OpenFile(w.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		e.t.Fatal(err)
	}
	w.cmd.Stdout, w.cmd.Stderr = f, f
	if err := w.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			w.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { w.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				w.cmd.Process.Kill()
			}
		}
	})
	return w
}

func (w *workerProc) logText() string {
	b, _ := os.ReadFile(w.log)
	return string(b)
}

// waitLog waits until the worker's log matches re, and returns the match.
func (w *workerProc) waitLog(t *testing.T, re *regexp.Regexp, n int, limit time.Duration) [][]string {
	t.Helper()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if m := re.FindAllStringSubmatch(w.logText(), -1); len(m) >= n {
			return m
		}
	}
	t.Fatalf("worker %s: no %d× %q in its log within %s:\n%s", w.id, n, re, limit, w.logText())
	return nil
}

// TestScaleOutOnRealWorkers spreads a two-arm study over three rig worker
// processes through the real Temporal dev server, on the real runtimes, and
// on the way kills one worker mid-trial, stalls another's governor, points a
// fourth with another runtime build at the study's queue, stops and
// restarts the Temporal server on its file, and kills the coordinator
// daemon with SIGKILL and starts it again. The run still ends on its own
// with one counted receipt per planned trial, the killed trial rerun on
// another worker as the next attempt with its parent, lost attempts only
// for trials cut off in flight, no generation row twice, nothing from the
// wrong build,
// no trial taken by the stalled worker, a clean store check, a second merge
// that changes nothing, and a report with replayed samples.
// startDevServer starts a real Temporal dev server on a free loopback port
// (its database in the test's home) and returns its address and the spool
// folder the daemon and the workers share.
func (e *rigEnv) startDevServer() (srv *scaleout.DevServer, in provision.Installed, addr, spool string) {
	t := e.t
	t.Helper()
	var err error
	in, err = provision.Load()
	if err != nil {
		t.Fatal(err)
	}
	if in.Temporal == "" {
		t.Fatalf("installed.env names no TEMPORAL_BIN: run make setup (it builds the Temporal CLI)")
	}
	port, err := runtimes.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	srv = &scaleout.DevServer{Bin: in.Temporal, DB: filepath.Join(e.home, "temporal.db"), Port: port, Log: filepath.Join(e.home, "temporal.log")}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv, in, srv.Address(), filepath.Join(e.home, "spool")
}

func TestScaleOutOnRealWorkers(t *testing.T) {
	e := newRigEnv(t)
	srv, in, addr, spool := e.startDevServer()
	ctx := context.Background()

	e.ensureGovernorPass()
	e.startDaemon("--temporal", addr, "--spool", spool)
	name := "scale"
	e.prepare(smallDesign(t, name, 6, false), name)

	// A worker whose llama-server is another build (one byte appended to a
	// copy), told to serve the study's queue anyway.
	good, err := runtimes.BuildOf(in, "llama-server")
	if err != nil {
		t.Fatal(err)
	}
	queue := scaleout.Queue("llama-server", good.BinarySHA256, "cpu")
	data, err := os.ReadFile(in.LlamaServer)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(e.home, "other-build", "llama-server")
	os.MkdirAll(filepath.Dir(other), 0o755)
	if err := os.WriteFile(other, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	env, err := os.ReadFile(in.File)
	if err != nil {
		t.Fatal(err)
	}
	otherEnv := filepath.Join(e.home, "other-installed.env")
	os.WriteFile(otherEnv, []byte(strings.ReplaceAll(string(env), in.LlamaServer, other)), 0o600)

	w1 := e.startWorker(addr, spool, "w1")
	w2 := e.startWorker(addr, spool, "w2")
	w3 := e.startWorker(addr, spool, "w3", "--fault-injection")
	bad := e.startWorker(addr, spool, "wbad", "--installed-env", otherEnv, "--queue", queue)

	out := e.rig(true, "study", "run", name, "--engine", "temporal", "--detach")
	if !strings.Contains(out, "execution exec-1 started") {
		t.Fatalf("submit: %s", out)
	}
	// A second submit of the same execution is the same workflow.
	if again := e.rig(true, "study", "run", name, "--engine", "temporal", "--detach"); !strings.Contains(again, "execution exec-1 started") {
		t.Fatalf("a second submit while exec-1 runs did not follow exec-1: %s", again)
	}

	// The workspace follows the run live, on loopback, behind its token:
	// the URL opens it once and leaves a session cookie (a browser's jar).
	var base string
	var browser *http.Client
	openUI := func() { // again after the daemon's restart below
		uiURL := strings.TrimSpace(e.rig(true, "ui"))
		if !regexp.MustCompile(`^http://127\.0\.0\.1:\d+/\?token=[0-9a-f]{64}$`).MatchString(uiURL) {
			t.Fatalf("rig ui printed %q", uiURL)
		}
		base, _, _ = strings.Cut(uiURL, "/?token=")
		if code, _ := httpGet(t, base+"/api/progress/"+name); code != http.StatusForbidden {
			t.Errorf("the workspace without its token answered %d, want 403", code)
		}
		jar, err := cookiejar.New(nil)
		if err != nil {
			t.Fatal(err)
		}
		browser = &http.Client{Jar: jar}
		if resp, err := browser.Get(uiURL); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("opening %s: %v %v", uiURL, resp, err)
		} else {
			resp.Body.Close()
		}
	}
	openUI()
	progress := func() (status string, done, planned int) {
		resp, err := browser.Get(base + "/api/progress/" + name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, body := resp.StatusCode, string(b)
		var p struct {
			Executions []struct {
				Status        string
				Done, Planned int
			}
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil || len(p.Executions) == 0 {
			t.Fatalf("the workspace's progress: %d %s", code, body)
		}
		x := p.Executions[len(p.Executions)-1]
		return x.Status, x.Done, x.Planned
	}

	bad.waitLog(t, regexp.MustCompile(`refuses the queue`), 1, 3*time.Minute)

	// Kill w1 in the middle of its second trial.
	started := regexp.MustCompile(`msg="trial started" worker=w1 trial=(\S+) attempt=(\d+)`)
	m := w1.waitLog(t, started, 2, 5*time.Minute)
	killedTrial, killedAttempt := m[1][1], m[1][2]
	midStatus, midDone, planned := progress()
	w1.cmd.Process.Signal(syscall.SIGKILL)
	w1.cmd.Wait()
	t.Logf("killed w1 in trial %s attempt %s", killedTrial, killedAttempt)

	// Stall w3's governor: its heartbeat goes stale and it stops polling.
	w3.cmd.Process.Signal(syscall.SIGUSR1)
	w3.waitLog(t, regexp.MustCompile(`stops taking trials.*governor not ready`), 1, 90*time.Second)
	stalledAt := len(w3.logText())

	// Stop the engine mid-run and start it again on the same file.
	time.Sleep(5 * time.Second)
	engineDown := time.Now()
	srv.Stop()
	t.Log("temporal server stopped")
	time.Sleep(5 * time.Second)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	engineUp := time.Now()
	t.Log("temporal server started again on its file")

	// Kill the coordinator daemon with SIGKILL once the run has moved on
	// from the engine's restart, and start it again on the same home: the
	// merges it held are retried on the new one, and the run goes on.
	_, from, _ := progress()
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no trial merged within 10 minutes of the engine's restart (%d/%d)", from, planned)
		}
		if _, now, _ := progress(); now > from {
			if now >= planned {
				t.Fatalf("the run ended (%d/%d) before the coordinator could be killed mid-run", now, planned)
			}
			break
		}
	}
	e.killDaemon()
	t.Log("coordinator daemon killed")
	time.Sleep(2 * time.Second)
	e.startDaemon("--temporal", addr, "--spool", spool)
	openUI()
	t.Log("coordinator daemon started again on its home")

	status := e.waitDone(name, 25*time.Minute)
	sm := regexp.MustCompile(`exec-1 attempt 1: (\w+), (\d+)/(\d+) trials`).FindStringSubmatch(status)
	if sm == nil || sm[1] != "done" || sm[2] != sm[3] {
		t.Fatalf("the execution did not finish every planned trial:\n%s\nw2: %s\nw3: %s", status, w2.logText(), w3.logText())
	}
	if endStatus, endDone, _ := progress(); midStatus != "running" || endStatus != "done" || endDone != planned || endDone <= midDone {
		t.Errorf("the workspace's progress did not move: mid-run %s %d/%d, at the end %s %d", midStatus, midDone, planned, endStatus, endDone)
	}
	if !strings.Contains(status, "through temporal, workers: ") {
		t.Errorf("status shows no per-worker counts:\n%s", status)
	}

	rs := e.receipts(name)
	counted := map[receipts.TrialKey][]receipts.Receipt{}
	byKey := map[string][]receipts.Receipt{}
	for _, r := range rs {
		if r.Outcome.Counted() {
			counted[r.Trial()] = append(counted[r.Trial()], r)
		}
		byKey[r.Trial().String()] = append(byKey[r.Trial().String()], r)
		if w := r.Pins["worker"]; w == "wbad" {
			t.Errorf("a receipt came from the worker with the other build: %+v", r)
		}
	}
	if atoi(t, sm[3]) != planned {
		t.Errorf("status plans %s trials, the workspace %d", sm[3], planned)
	}
	if len(counted) != planned {
		t.Errorf("%d trials have a counted receipt, %d were planned", len(counted), planned)
	}
	for k, c := range counted {
		if len(c) != 1 {
			t.Errorf("trial %s has %d counted receipts", k, len(c))
		}
	}
	// The killed trial: a preempted "worker lost" attempt, then a counted
	// rerun on another worker whose parent is that attempt.
	key := strings.Split(killedTrial, "/")
	var lost, rerun *receipts.Receipt
	for _, r := range rs {
		if r.Arm == key[0] && r.TaskID == strings.Join(key[2:len(key)-1], "/") {
			r := r
			switch {
			case r.Outcome == receipts.Preempted && strings.Contains(r.Detail, "worker lost"):
				lost = &r
			case r.Outcome.Counted():
				rerun = &r
			}
		}
	}
	if lost == nil || rerun == nil {
		t.Fatalf("the killed trial %s has no lost attempt and counted rerun: %+v", killedTrial, byKey)
	}
	if rerun.ParentAttempt != lost.Attempt || rerun.Attempt != lost.Attempt+1 || rerun.Pins["worker"] == "w1" {
		t.Errorf("the rerun of %s is attempt %d parent %d on %s; the lost attempt is %d", killedTrial, rerun.Attempt, rerun.ParentAttempt, rerun.Pins["worker"], lost.Attempt)
	}
	// Every lost attempt was cut off: preempted by w3's stalled governor,
	// started in a worker's log and never done there (the one on w1 when it
	// was killed), or done as the engine came back, after it had closed the
	// attempt as timed out. A trial a worker finished while the engine was
	// down is never lost: the worker keeps its result until the engine takes
	// it (scaleout/outbox.go). Nor is one finished while the engine was up,
	// whatever restarted after it: the coordinator's kill loses none.
	trialLine := regexp.MustCompile(`time=(\S+) level=\S+ msg="trial (started|done)" worker=\S+ trial=(\S+) attempt=(\d+)`)
	open, doneAt := map[string]bool{}, map[string]time.Time{}
	for _, w := range []*workerProc{w1, w2, w3, bad} {
		for _, m := range trialLine.FindAllStringSubmatch(w.logText(), -1) {
			k := m[3] + "#" + m[4]
			open[w.id+" "+k] = m[2] == "started"
			if at, err := time.Parse(time.RFC3339Nano, m[1]); err == nil && m[2] == "done" {
				doneAt[k] = at
			}
		}
	}
	inFlight := map[string]bool{}
	for k, o := range open {
		if o {
			inFlight[k[strings.Index(k, " ")+1:]] = true
		}
	}
	lostAttempts := 0
	for _, r := range rs {
		if r.Outcome != receipts.Preempted {
			continue
		}
		lostAttempts++
		k := fmt.Sprintf("%s/%s/%s/%d#%d", r.Arm, r.JobKind, r.TaskID, r.Repeat, r.Attempt)
		if strings.HasPrefix(r.Detail, "preempted by the governor") {
			// Ran on its worker and was stopped there: w3's stalled governor.
			if r.Pins["worker"] != "w3" {
				t.Errorf("attempt %s was preempted by the governor of %q, not of w3, whose governor the test stalled: %s", k, r.Pins["worker"], r.Detail)
			}
			continue
		}
		at, done := doneAt[k]
		restart := done && at.After(engineUp.Add(-2*time.Second)) && at.Before(engineUp.Add(2*time.Second))
		if !inFlight[k] && !restart {
			t.Errorf("attempt %s is lost (%s), but its worker finished it at %s, not as the engine came back at %s (it was down from %s)",
				k, r.Detail, at.Format(time.StampMilli), engineUp.Format(time.StampMilli), engineDown.Format(time.StampMilli))
		}
	}
	if !inFlight[killedTrial+"#"+killedAttempt] || lostAttempts < 1 {
		t.Errorf("the trial killed with w1 (%s#%s) is not among the %d lost attempts", killedTrial, killedAttempt, lostAttempts)
	}
	t.Logf("%d lost attempts; cut off in flight on a worker: %v", lostAttempts, slices.Sorted(maps.Keys(inFlight)))
	// No generation row twice, whatever was merged again after the kills.
	noRowTwice(t, e, name, planned)
	// The stalled worker took nothing until its governor was ready again.
	after := w3.logText()[stalledAt:]
	if i := strings.Index(after, "taking trials again"); i >= 0 {
		after = after[:i]
	}
	if strings.Contains(after, `msg="trial started"`) {
		t.Errorf("w3 took a trial while its governor was stalled:\n%s", after)
	}

	if check := e.rig(true, "study", "check", name); !strings.Contains(check, "store ok") {
		t.Fatal(check)
	}
	before := e.rig(true, "receipts", "export", name)
	merged := e.rig(true, "study", "merge", name)
	if !strings.Contains(merged, "merged now 0") {
		t.Errorf("a second merge merged something: %s", merged)
	}
	if after := e.rig(true, "receipts", "export", name); after != before {
		t.Error("a second merge changed the exported receipts")
	}
	// A sample of each arm's merged trials replays on the workers, each on
	// the queue its trial ran on, and reproduces.
	rep0 := e.rig(true, "study", "replay", name, "--per-arm", "1")
	lines := regexp.MustCompile(`(?m)^\S+ +attempt \d+ on (w2|w3) via (\S+): reproduced \((\d+)/(\d+) rows`).FindAllStringSubmatch(rep0, -1)
	if len(lines) != 2 {
		t.Errorf("replay through the queues: want one reproduced trial per arm on a live worker:\n%s", rep0)
	}
	for _, l := range lines {
		if l[2] != queue || l[3] != l[4] || l[3] == "0" {
			t.Errorf("replay on %s via %s: %s/%s rows", l[1], l[2], l[3], l[4])
		}
	}

	// The merged records replay: a sample of each arm's rows, through the
	// pinned runtime, reproduces.
	rep := e.rig(true, "study", "report", name, "--replay-sample", "2")
	html := regexp.MustCompile(`report: (\S+\.html)`).FindStringSubmatch(rep)
	if html == nil {
		t.Fatalf("report path not printed:\n%s", rep)
	}
	var repJSON struct {
		Replay *struct {
			Rows []struct{ Record, Arm, Status, Detail string } `json:"rows"`
		} `json:"replay"`
	}
	raw, err := os.ReadFile(strings.TrimSuffix(html[1], ".html") + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &repJSON); err != nil || repJSON.Replay == nil || len(repJSON.Replay.Rows) == 0 {
		t.Fatalf("report.json has no replay after --replay-sample: %v", err)
	}
	for _, r := range repJSON.Replay.Rows {
		if r.Status != "reproduced" {
			t.Errorf("replay of %s (%s): %s %s", r.Record, r.Arm, r.Status, r.Detail)
		}
	}
	t.Logf("status:\n%s\nmerge: %s\nreplay on the workers:\n%s\nreport:\n%s", status, merged, rep0, rep)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}
