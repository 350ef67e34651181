package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"rig/internal/testenv"
	"strings"
	"testing"

	"rig/internal/provision"
	"rig/studies"
	"rig/studies/studytest"
)

// TestReviewLicenceLineNamesTheRestrictedLicence registers a study whose
// items put Gemma 3 270M (restricted for evaluation in the bundled registry)
// to use, and reviews it: status carries the entry's terms for the reviewer,
// a pass whose line does not name the licence ("x (y)") is refused with
// no_licence_line and the study stays in draft, and a line naming it passes.
func TestReviewLicenceLineNamesTheRestrictedLicence(t *testing.T) {
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (register fingerprints them)", err)
	ctx := context.Background()
	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	const name = "gemma-licence"
	var d map[string]any
	if err := json.Unmarshal(studytest.JudgedStudyDesign(t, name), &d); err != nil {
		t.Fatal(err)
	}
	d["items"] = append(d["items"].([]any), map[string]any{"role": "candidate", "name": "Gemma-3-270M", "registry_id": "gemma-3-270m", "use": "evaluation"})
	raw, _ := json.Marshal(d)
	path := filepath.Join(t.TempDir(), "design.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Studies().Register(ctx, RegisterRequest{DesignFile: path, Actor: "staff"}); err != nil {
		t.Fatal(err)
	}
	info, err := svc.Studies().Status(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	var gemma *studies.LicenceTerm
	for i, lt := range info.LicenceTerms {
		if lt.EntryID == "gemma-3-270m" {
			gemma = &info.LicenceTerms[i]
		}
	}
	if gemma == nil || !gemma.Restricted || gemma.Clause == "" || gemma.SourcePage == "" || len(gemma.Allows) == 0 {
		t.Fatalf("status does not carry the restricted entry's terms for the reviewer: %+v", info.LicenceTerms)
	}

	_, err = svc.Studies().Review(ctx, name, studies.Review{Reviewer: "outside", Verdict: "pass", LicenceLine: "x (y)"}, "")
	if !errors.Is(err, studies.ErrNoLicenceLine) || !strings.Contains(err.Error(), "gemma-3-270m") {
		t.Fatalf(`a pass with the line "x (y)" on a restricted licence: %v`, err)
	}
	if info, _ := svc.Studies().Status(ctx, name); info.State != studies.Draft {
		t.Fatalf("a refused review moved the study to %s", info.State)
	}
	if _, err := svc.Studies().Review(ctx, name, studies.Review{Reviewer: "outside", Verdict: "pass", LicenceLine: "licences: gemma-3-270m restricted evaluation read (§3.2); the rest allowed"}, ""); err != nil {
		t.Fatalf("a line naming the restricted licence: %v", err)
	}
	if info, _ := svc.Studies().Status(ctx, name); info.State != studies.Reviewed {
		t.Fatalf("after a passing review the study is %s", info.State)
	}
}

// TestReviewLicenceLineNamesALicenceWhenNothingIsRestricted: a study whose
// items are all allowed still needs a pass's line to name one of their
// licences; "all good" is refused with no_licence_line, listing what the
// line may name, and the study stays in draft (issue 46).
func TestReviewLicenceLineNamesALicenceWhenNothingIsRestricted(t *testing.T) {
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (register fingerprints them)", err)
	ctx := context.Background()
	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	const name = "allowed-licences"
	path := filepath.Join(t.TempDir(), "design.json")
	if err := os.WriteFile(path, studytest.JudgedStudyDesign(t, name), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Studies().Register(ctx, RegisterRequest{DesignFile: path, Actor: "staff"}); err != nil {
		t.Fatal(err)
	}
	info, err := svc.Studies().Status(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range info.LicenceTerms {
		if lt.Restricted {
			t.Fatalf("the judged study rests on a restricted licence (%s); this test needs none", lt.EntryID)
		}
	}
	_, err = svc.Studies().Review(ctx, name, studies.Review{Reviewer: "outside", Verdict: "pass", LicenceLine: "all good"}, "")
	if !errors.Is(err, studies.ErrNoLicenceLine) || !strings.Contains(err.Error(), "smollm2-135m-instruct") {
		t.Fatalf(`a pass with the line "all good": %v, want no_licence_line listing smollm2-135m-instruct`, err)
	}
	if info, _ := svc.Studies().Status(ctx, name); info.State != studies.Draft {
		t.Fatalf("a refused review moved the study to %s", info.State)
	}
	if _, err := svc.Studies().Review(ctx, name, studies.Review{Reviewer: "outside", Verdict: "pass", LicenceLine: "licences: Apache-2.0 and MIT terms read; every use allowed"}, ""); err != nil {
		t.Fatalf("a line naming a licence: %v", err)
	}
}
