package run

import (
	"rig/analysis"
	"rig/studies"
)

// StoppingRule is the design's stopping rule as analysis.Monitor reads it,
// its defaults resolved by the design (studies.ResolvedStopping), or nil
// when the design has none. The runner's monitor and the dry run's price
// both monitor one analysis.MonitoredPair per entry of ResolvedPairs. It
// lives here, above both, because studies imports no analysis.
func StoppingRule(d *studies.Design) *analysis.Stopping {
	r := d.ResolvedStopping()
	if r == nil {
		return nil
	}
	s := analysisStopping(*r)
	return &s
}

// analysisStopping converts field by field: the design's words are
// analysis's (the test holds the constants to each other).
func analysisStopping(r studies.ResolvedStopping) analysis.Stopping {
	return analysis.Stopping{
		Method:       analysis.SequentialMethod(r.Method),
		Looks:        r.Looks,
		Spending:     analysis.Spending(r.Spending),
		Alpha:        r.Alpha,
		Futility:     r.Futility,
		FutilityBeta: r.FutilityBeta,
		Discordance:  r.Discordance,
	}
}
