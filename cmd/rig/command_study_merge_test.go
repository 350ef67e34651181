package main

import (
	"strings"
	"testing"

	"rig/api"
)

// merge takes the study and, optionally, the execution; it prints every
// count of the summary and each entry it refused.
func TestStudyMerge(t *testing.T) {
	if _, err := runRig(t, "study", "merge", "s1", "exec-1", "extra"); err == nil || !strings.Contains(err.Error(), "accepts between 1 and 2 arg(s)") {
		t.Errorf("merge with three arguments = %v; want refused", err)
	}
	fd := newFakeDaemon(t)
	fd.answer(api.MethodMerge, api.MergeSummary{Entries: 9, Merged: 5, Already: 2, Divergent: 1, Partial: 1, Refused: []string{"entry w1/t3: digest differs from its receipt"}})
	for _, c := range []struct {
		args []string
		exec string
	}{{[]string{"s1"}, ""}, {[]string{"s1", "exec-1"}, "exec-1"}} {
		out, err := runRig(t, append(append([]string{"study", "merge"}, c.args...), "--socket", fd.socket)...)
		if err != nil {
			t.Fatal(err)
		}
		var req api.MergeRequest
		fd.request(t, api.MethodMerge, &req)
		if req.Study != "s1" || req.Execution != c.exec {
			t.Errorf("merge %v sent %+v", c.args, req)
		}
		want := "spool entries: 9; merged now 5, already merged 2, divergent duplicates kept apart 1, unfinished (never merged) 1\n" +
			"refused (not merged): entry w1/t3: digest differs from its receipt\n"
		if out != want {
			t.Errorf("merge printed:\n%s\nwant:\n%s", out, want)
		}
	}
}
