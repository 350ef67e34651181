package main

import (
	"strings"
	"testing"
	"time"

	"rig/api"
)

// run sends its engine flags, prints the execution it started and any wall
// the daemon derived; --detach returns there, without following.
func TestStudyRunDetach(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodRun, api.ExecInfo{ID: "exec-7", Attempt: 2, Walls: []string{"wall cap 2h0m0s from the plan"}})
	out, err := runRig(t, "study", "run", "s1", "--detach", "--engine", "temporal", "--in-flight", "3", "--start-wait", "90s", "--key", "k1", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	var req api.RunRequest
	fd.request(t, api.MethodRun, &req)
	if req.Study != "s1" || req.Engine != "temporal" || req.InFlight != 3 || req.StartWait != 90*time.Second || req.Key != "k1" || req.Parent != "" {
		t.Errorf("run sent %+v", req)
	}
	if out != "execution exec-7 started (attempt 2)\nderived wall cap 2h0m0s from the plan\n" {
		t.Errorf("run --detach printed:\n%s", out)
	}
	if calls := strings.Join(fd.sent(), " "); calls != "run" {
		t.Errorf("run --detach sent %s; want no status poll", calls)
	}
}

// Without --detach, run follows the execution until it ends and says where
// its receipts and records are.
func TestStudyRunFollowsToTheEnd(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodRun, api.ExecInfo{ID: "exec-7", Attempt: 1})
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", Dir: "/h/studies/s1", Executions: []api.ExecInfo{
		{ID: "exec-6", Status: api.ExecStatusRunning},
		{ID: "exec-7", Status: "completed", Planned: 8, Done: 8, RatePerMin: 4, Records: "/h/studies/s1/executions/exec-7"},
	}})
	out, err := runRig(t, "study", "run", "s1", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"completed: 8/8 trials, 0 preempted and rerun, 0 failed (not scored), 4.0/min\n",
		"receipts: /h/studies/s1/store.bolt\ngeneration records: /h/studies/s1/executions/exec-7\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("run printed no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ETA") {
		t.Errorf("an ended execution was printed with an ETA:\n%s", out)
	}
}

func TestStudyRunNeedsOneName(t *testing.T) {
	for _, args := range [][]string{{"study", "run"}, {"study", "run", "a", "b"}} {
		if _, err := runRig(t, args...); err == nil || !strings.Contains(err.Error(), "accepts 1 arg(s)") {
			t.Errorf("rig %s = %v; want refused for its argument count", strings.Join(args, " "), err)
		}
	}
}
