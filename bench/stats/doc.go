// Package stats is `rig bench stats`: the statistics checked against
// simulated truth. Under the null with 8 identical arms, how often the
// decision rule declares a winner; the bootstrap intervals' coverage; the
// pass-rate intervals' coverage over a grid of rates, task counts, repeats
// and task spreads (PassCoverage); the power calculation against the
// simulated detection rate; and, with --stopping, the early-stopping rules'
// false winners, savings, power and futility beside the fixed design
// (StoppingGoals). Every figure comes from package analysis as a study's
// report gets it (Analyse, the intervals, McNemarPower, SimulateStopping).
//
// It is for showing that the analysis keeps its stated error rates; it is
// not the analysis, and nothing a study runs, reports or decides calls it.
package stats
