package main

import (
	"fmt"
	"io"
	"strings"

	"rig/api"
)

// printLicenceTerms shows a reviewer what each licence entry the study rests
// on says before they write the licence line: the licence, where its terms
// were read and when, the clause, what it allows per use, and the uses this
// study puts it to, restricted ones marked.
func printLicenceTerms(w io.Writer, name string, terms []api.LicenceTerm) {
	if len(terms) == 0 {
		fmt.Fprintf(w, "study %s names no licence entries\n", name)
		return
	}
	fmt.Fprintf(w, "licence terms study %s rests on (read them before you write --licence-line):\n", name)
	// A restricted entry in full: what it allows per use is what the
	// reviewer signs for. An allowed one in a line, with its page.
	for _, t := range terms {
		if !t.Restricted {
			fmt.Fprintf(w, "\n  %s (%s): allowed for this study's use (%s); terms at %s\n", t.EntryID, orDash(t.Licence), studyUses(t), orDash(t.SourcePage))
			continue
		}
		fmt.Fprintf(w, "\n  %s: %s  RESTRICTED for this study\n", t.EntryID, t.Item)
		fmt.Fprintf(w, "    licence:   %s\n", orDash(t.Licence))
		fmt.Fprintf(w, "    terms at:  %s (read %s)\n", orDash(t.SourcePage), orDash(t.DateRead))
		fmt.Fprintf(w, "    clause:    %s\n", orDash(t.Clause))
		for _, a := range t.Study {
			fmt.Fprintf(w, "    this study: %s as %s: %s%s\n", a.Role, a.Use, a.Verdict, reading(a))
		}
		for _, a := range t.Allows {
			fmt.Fprintf(w, "    allows %-12s %s%s\n", a.Use+":", a.Verdict, reading(a))
		}
		fmt.Fprintf(w, "    from %s\n", t.Registry)
	}
	var names []string
	for _, t := range terms {
		if t.Restricted {
			n := t.Names()
			if len(n) > 1 {
				n = []string{n[0], n[len(n)-1]} // the id, or the licence's shortest name
			}
			names = append(names, strings.Join(n, " or "))
		}
	}
	if len(names) > 0 {
		fmt.Fprintf(w, "\na pass's --licence-line must name each restricted licence: %s\n", strings.Join(names, "; "))
	} else {
		fmt.Fprintf(w, "\na pass's --licence-line must name at least one of these licences (its id or its name)\n")
	}
}

func studyUses(t api.LicenceTerm) string {
	var uses []string
	for _, a := range t.Study {
		uses = append(uses, a.Role+" as "+a.Use)
	}
	return strings.Join(uses, ", ")
}

func reading(a api.LicenceAllow) string {
	s := ""
	if a.Reading != "" {
		s = " — " + a.Reading
	}
	if a.Clause != "" {
		s += " (" + a.Clause + ")"
	}
	return s
}
