package main

import (
	"strings"
	"testing"

	"rig/api"
)

// review prints the licence terms first; a pass without a licence line is
// then refused, after the terms and before anything is recorded, while a
// fail needs none.
func TestStudyReviewPassNeedsLicenceLine(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodStatus, api.StudyInfo{Name: "s1", LicenceTerms: []api.LicenceTerm{
		{EntryID: "smollm2-135m-instruct", Licence: "Apache-2.0", SourcePage: "https://example.org/licence", Study: []api.LicenceAllow{{Role: "candidate", Use: "evaluation", Verdict: "allowed"}}},
	}})
	fd.answer(api.MethodReview, api.StudyInfo{Name: "s1", State: "reviewed"})
	for _, line := range []string{"", "   "} {
		out, err := runRig(t, "study", "review", "s1", "--verdict", "pass", "--licence-line", line, "--socket", fd.socket)
		if err == nil || !strings.Contains(err.Error(), "a pass needs --licence-line") || !strings.Contains(err.Error(), "nothing was recorded") {
			t.Errorf("pass with licence line %q = %v; want refused naming --licence-line", line, err)
		}
		if !strings.Contains(out, "smollm2-135m-instruct (Apache-2.0): allowed for this study's use (candidate as evaluation)") {
			t.Errorf("the refused review did not print the terms first:\n%s", out)
		}
	}
	if calls := strings.Join(fd.sent(), " "); calls != "status status" {
		t.Errorf("the refused reviews sent %s; want only the status reads", calls)
	}

	out, err := runRig(t, "study", "review", "s1", "--verdict", "fail", "--notes", "prompts leak the answer", "--why", "leak", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	var req api.ReviewRequest
	fd.request(t, api.MethodReview, &req)
	if req.Name != "s1" || req.Review.Verdict != "fail" || req.Review.Notes != "prompts leak the answer" || req.Why != "leak" {
		t.Errorf("review sent %+v", req)
	}
	if !strings.Contains(out, "state      reviewed") {
		t.Errorf("review printed:\n%s", out)
	}
}
