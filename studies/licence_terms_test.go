package studies

import (
	"errors"
	"strings"
	"testing"
)

// gemmaItems rests on the bundled registry's Gemma entry, whose evaluation
// verdict is restricted, beside SmolLM2's, which is allowed.
var gemmaItems = []Item{
	{Role: "incumbent", Name: "SmolLM2-135M-Instruct", RegistryID: "smollm2-135m-instruct", Use: "evaluation"},
	{Role: "candidate", Name: "Gemma-3-270M", RegistryID: "gemma-3-270m", Use: "evaluation"},
}

func TestLicenceTermsShowTheRestriction(t *testing.T) {
	terms, err := LicenceTermsFor(gemmaItems, LicenceRecord{})
	if err != nil {
		t.Fatal(err)
	}
	if len(terms) != 2 {
		t.Fatalf("want the two entries the items name, got %+v", terms)
	}
	g := terms[1]
	if g.EntryID != "gemma-3-270m" || !g.Restricted || terms[0].Restricted {
		t.Fatalf("want only gemma-3-270m restricted: %+v", terms)
	}
	if !strings.Contains(g.SourcePage, "ai.google.dev/gemma/terms") || !strings.HasPrefix(g.Licence, "Gemma Terms of Use") || !strings.Contains(g.Clause, "§3.2") {
		t.Errorf("the reviewer is not shown the terms' page, licence and clause: page %q, licence %q, clause %q", g.SourcePage, g.Licence, g.Clause)
	}
	var eval *LicenceAllow
	for i, a := range g.Allows {
		if a.Use == "evaluation" {
			eval = &g.Allows[i]
		}
	}
	if eval == nil || eval.Verdict != "restricted" || eval.Reading == "" {
		t.Errorf("what the licence allows for evaluation is not shown with its reading: %+v", g.Allows)
	}
	if len(g.Study) != 1 || g.Study[0].Role != "candidate" || g.Study[0].Verdict != "restricted" {
		t.Errorf("the study's own use of the entry: %+v", g.Study)
	}
}

func TestLicenceLineMustNameTheRestrictedLicence(t *testing.T) {
	terms, err := LicenceTermsFor(gemmaItems, LicenceRecord{})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"x (y)",
		"all items allowed for evaluation and inference",
		"licences: smollm2-135m-instruct checked", // names the allowed entry only
		"licences: gemma-3-270mx checked",         // not the id as a word
	} {
		err := CheckLicenceLine(terms, line)
		if !errors.Is(err, ErrNoLicenceLine) {
			t.Errorf("%q was accepted for a study on a restricted licence: %v", line, err)
		} else if !strings.Contains(err.Error(), "gemma-3-270m") {
			t.Errorf("%q: the refusal does not say which licence to name: %v", line, err)
		}
	}
	for _, line := range []string{
		"licences: gemma-3-270m restricted use read and accepted; the rest allowed",
		"Gemma Terms of Use read: evaluation allowed under §3.2 for internal comparison",
		"GEMMA-3-270M checked",
	} {
		if err := CheckLicenceLine(terms, line); err != nil {
			t.Errorf("%q names the restricted licence, refused: %v", line, err)
		}
	}
}

// TestLicenceLineNamesALicenceWhenNothingIsRestricted: with nothing
// restricted the line must still name a licence of the design's items (any
// one); "all good" was once accepted, though review told the reviewer the
// line "must name at least one of these licences" (issue 46). The refusal
// lists what the line may name.
func TestLicenceLineNamesALicenceWhenNothingIsRestricted(t *testing.T) {
	allowed, err := LicenceTermsFor(gemmaItems[:1], LicenceRecord{})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"all good", "all items allowed for evaluation and inference", "licences: smollm2-135m-instructx checked"} {
		err := CheckLicenceLine(allowed, line)
		if !errors.Is(err, ErrNoLicenceLine) {
			t.Errorf("%q, naming no licence, was accepted: %v", line, err)
		} else if !strings.Contains(err.Error(), "smollm2-135m-instruct") || !strings.Contains(err.Error(), allowed[0].Licence) {
			t.Errorf("%q: the refusal does not list what the line may name (%v): %v", line, allowed[0].Names(), err)
		}
	}
	for _, line := range []string{"licences: smollm2-135m-instruct checked, allowed for evaluation", allowed[0].Licence + " read; evaluation allowed"} {
		if err := CheckLicenceLine(allowed, line); err != nil {
			t.Errorf("%q names the licence, refused: %v", line, err)
		}
	}
}
