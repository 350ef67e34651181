package daemon

import (
	"strings"

	"rig/studies"
)

// checkLicenceLine refuses a passing review of a draft whose licence line
// does not name the licences the study rests on (studies.CheckLicenceLine):
// the line is the reviewer's statement that they read the restriction. An
// empty or placeholder line is left to the lifecycle, which says so in its
// own words, as is a review of a study past draft.
func (sr Studies) checkLicenceLine(name string, l *studies.Lifecycle, r studies.Review) error {
	if r.Verdict != "pass" || l.State != studies.Draft || strings.TrimSpace(r.LicenceLine) == "" {
		return nil
	}
	reg, d, err := sr.registration(name)
	if err != nil {
		return err
	}
	terms, err := studies.LicenceTermsFor(d.Items, reg.Licences)
	if err != nil {
		return err
	}
	return studies.CheckLicenceLine(terms, r.LicenceLine)
}
