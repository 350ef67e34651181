package main

import (
	"path/filepath"
	"strings"
	"testing"

	"rig/api"
)

// dry-run sends --speeds as an absolute path: the daemon reads it from its
// own working directory.
func TestStudyDryRunSendsSpeedsAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	fd := newFakeDaemon(t)
	_, err := runRig(t, "study", "dry-run", "s1", "--speeds", "pilot/speeds.json", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	var req api.DryRunRequest
	fd.request(t, api.MethodDryRun, &req)
	if req.Name != "s1" || req.Speeds != filepath.Join(dir, "pilot", "speeds.json") {
		t.Errorf("dry-run sent %+v; want speeds %s", req, filepath.Join(dir, "pilot", "speeds.json"))
	}
	if _, err := runRig(t, "study", "dry-run", "s1", "--socket", fd.socket); err != nil {
		t.Fatal(err)
	}
	req = api.DryRunRequest{}
	fd.request(t, api.MethodDryRun, &req)
	if req.Speeds != "" {
		t.Errorf("dry-run without --speeds sent speeds %q", req.Speeds)
	}
	if calls := strings.Join(fd.sent(), " "); calls != "dry-run dry-run" {
		t.Errorf("dry-run sent %s", calls)
	}
}
