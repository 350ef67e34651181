package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/api"
)

// report prints the daemon's summary and where the three files are; with
// --replay-sample it first says what the wait is for, and sends the sample.
func TestStudyReportPrintsSummaryAndFiles(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodReport, api.ReportFiles{HTML: "/h/r/report.html", JSON: "/h/r/report.json", Markdown: "/h/r/report.md", Summary: "gemma ahead by 4 points\n"})
	out, err := runRig(t, "study", "report", "s1", "--execution", "exec-2", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	if out != "gemma ahead by 4 points\n\nreport: /h/r/report.html\n        /h/r/report.json\n        /h/r/report.md\n" {
		t.Errorf("report printed:\n%s", out)
	}
	var req api.ReportRequest
	fd.request(t, api.MethodReport, &req)
	if req.Name != "s1" || req.Execution != "exec-2" || req.ReplaySample != 0 {
		t.Errorf("report sent %+v", req)
	}

	out, err = runRig(t, "study", "report", "s1", "--replay-sample", "3", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "replaying 3 kept rows of every generation record through its pinned runtime first") {
		t.Errorf("report --replay-sample printed:\n%s", out)
	}
	req = api.ReportRequest{}
	fd.request(t, api.MethodReport, &req)
	if req.ReplaySample != 3 {
		t.Errorf("report --replay-sample 3 sent %+v", req)
	}
}

// --screenshot checks the page against its report.json: one missing or
// unreadable is an error naming the file, and no screenshot is claimed.
func TestStudyReportScreenshotNamesABadReportJSON(t *testing.T) {
	t.Setenv("RIG_CHROMIUM", "true") // found on PATH; never started, as the JSON is read first
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	fd := newFakeDaemon(t)
	for _, js := range []string{filepath.Join(dir, "missing.json"), bad} {
		fd.answer(api.MethodReport, api.ReportFiles{HTML: filepath.Join(dir, "report.html"), JSON: js, Summary: "s\n"})
		out, err := runRig(t, "study", "report", "s1", "--screenshot", filepath.Join(dir, "shot.png"), "--socket", fd.socket)
		if err == nil || !strings.Contains(err.Error(), js) {
			t.Errorf("--screenshot with report.json %s = %v; want an error naming it", js, err)
		}
		if strings.Contains(out, "screenshot:") {
			t.Errorf("a failed screenshot was reported:\n%s", out)
		}
	}
}
