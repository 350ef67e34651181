package main

import (
	"strings"
	"testing"

	"rig/api"
)

// rerun needs the study and the parent execution, sends the parent, and
// follows the new execution: one that ends in error is the command's
// error, naming the execution and the daemon's reason.
func TestStudyRerun(t *testing.T) {
	if _, err := runRig(t, "study", "rerun", "s1"); err == nil || !strings.Contains(err.Error(), "accepts 2 arg(s)") {
		t.Errorf("rerun without an execution = %v; want refused for its argument count", err)
	}
	fd := newFakeDaemon(t)
	fd.answer(api.MethodRun, api.ExecInfo{ID: "exec-8", Attempt: 1, Parent: "exec-7"})
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", Executions: []api.ExecInfo{
		{ID: "exec-8", Status: "failed", Planned: 8, Done: 3, Error: "governor: card memory held"},
	}})
	out, err := runRig(t, "study", "rerun", "s1", "exec-7", "--key", "k2", "--socket", fd.socket)
	if err == nil || err.Error() != "execution exec-8 failed: governor: card memory held" {
		t.Errorf("rerun of an execution that failed = %v", err)
	}
	var req api.RunRequest
	fd.request(t, api.MethodRun, &req)
	if req.Study != "s1" || req.Parent != "exec-7" || req.Key != "k2" {
		t.Errorf("rerun sent %+v", req)
	}
	if !strings.HasPrefix(out, "execution exec-8 started (attempt 1, parent exec-7)\n") || !strings.Contains(out, "failed: 3/8 trials") {
		t.Errorf("rerun printed:\n%s", out)
	}
}
