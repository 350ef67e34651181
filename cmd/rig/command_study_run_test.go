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
	out, err := runRig(t, "study", "run", "s1", "--no-gates", "--detach", "--engine", "temporal", "--in-flight", "3", "--start-wait", "90s", "--key", "k1", "--socket", fd.socket)
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

// An approved study goes through every gate not yet passed, in order, each
// by its own daemon call (so recorded as when run alone), then the run.
func TestStudyRunPerformsTheGates(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", State: api.Approved})
	fd.answer(api.MethodFreeze, api.StudyInfo{Name: "s1", State: api.Frozen, SnapshotHash: "5a5a", Preflight: []api.FitInfo{{Arm: "a", Decided: false}},
		Warnings: []string{"with 27 tasks this rule can only say no decision at this sample size"}})
	fd.answer(api.MethodPreflight, []api.PreflightVerdict{{Fits: true, Model: "m"}})
	fd.answer(api.MethodValidate, []api.ValidationRecord{{Harness: "llama-server", Pass: true}})
	fd.answer(api.MethodRun, api.ExecInfo{ID: "exec-1", Attempt: 1})
	out, err := runRig(t, "study", "run", "s1", "--detach", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	if calls := strings.Join(fd.sent(), " "); calls != "status freeze preflight validate dry-run run" {
		t.Errorf("run sent %s; want each gate in order, then the run", calls)
	}
	for _, want := range []string{"== freeze\nfrozen: snapshot sha256:5a5a\nwarning    with 27 tasks", "== preflight\n", "== validation\n", "== dry run\n", "== counted run\nexecution exec-1 started"} {
		if !strings.Contains(out, want) {
			t.Errorf("run printed no %q:\n%s", want, out)
		}
	}
}

// A gate that refuses stops before the counted run; a study not approved
// is not frozen for it.
func TestStudyRunStopsAtARefusal(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", State: api.Frozen})
	fd.answer(api.MethodPreflight, []api.PreflightVerdict{{Fits: false, Model: "big", Runtime: "llama-server", Reason: "needs 9 GiB"}})
	_, err := runRig(t, "study", "run", "s1", "--detach", "--socket", fd.socket)
	if err == nil || !strings.Contains(err.Error(), "big on llama-server does not fit: needs 9 GiB") {
		t.Errorf("run = %v; want the preflight's refusal", err)
	}
	if calls := strings.Join(fd.sent(), " "); calls != "status preflight" {
		t.Errorf("run sent %s; want it to stop at the preflight", calls)
	}
	fd = newFakeDaemon(t)
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", State: api.Reviewed})
	if _, err := runRig(t, "study", "run", "s1", "--socket", fd.socket); err == nil || !strings.Contains(err.Error(), "reviewed, not frozen") {
		t.Errorf("run of a reviewed study = %v; want refused as not frozen", err)
	}
	if calls := strings.Join(fd.sent(), " "); calls != "status" {
		t.Errorf("run of a reviewed study sent %s", calls)
	}
}
