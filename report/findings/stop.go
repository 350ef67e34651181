package findings

import (
	"math"

	"rig/analysis"
	"rig/report"
)

// stopData maps the early-stopping record onto the report's view of it.
func stopData(seq *analysis.Sequential) *report.Stop {
	if seq == nil {
		return nil
	}
	st := &report.Stop{Method: string(seq.Stopping.Method), Spending: string(seq.Stopping.Spending), Stopped: seq.StoppedEarly,
		Check: seq.Look.Check + 1, Reason: seq.Look.Reason, NotRun: len(seq.NotRun)}
	opt := func(n analysis.Num) *float64 {
		if v := float64(n); !math.IsNaN(v) && !math.IsInf(v, 0) {
			return &v
		}
		return nil
	}
	for i, pl := range seq.Look.Pairs {
		sp := report.StopPair{JobKind: pl.JobKind, Challenger: pl.Pair.Candidate, Baseline: pl.Pair.Baseline, Status: string(pl.Status),
			Direction: pl.Direction, Tasks: pl.Tasks, P: float64(pl.P), PHolm: float64(pl.P),
			CSLo: float64(pl.CS.Lo), CSHi: float64(pl.CS.Hi), CSLevel: pl.CS.Level, Statistic: "wins − losses"}
		if seq.Stopping.Method == analysis.Anytime {
			sp.Statistic = "e-value"
		}
		if g := pl.Stagewise; g != nil {
			sp.Stagewise = &report.StopInterval{Lo: float64(g.Lo), Hi: float64(g.Hi), Level: g.Level}
		}
		if i < len(seq.Look.HolmP) {
			sp.PHolm = seq.Look.HolmP[i]
		}
		for _, pt := range pl.Path {
			sp.Path = append(sp.Path, report.StopPoint{Tasks: pt.Tasks, Look: pt.Look, Statistic: pt.Statistic,
				Boundary: opt(pt.Boundary), FutilityBound: opt(pt.FutilityBound), Status: string(pt.Status)})
			if pt.Fraction > 0 {
				sp.Planned = int(math.Round(float64(pt.Tasks) / pt.Fraction))
			}
		}
		st.Pairs = append(st.Pairs, sp)
	}
	return st
}

// speedCard is one arm's analysed speed card as the report shows it.
func speedCard(s analysis.Speed) report.Speed {
	out := report.Speed{Arm: s.Arm, Timed: s.Timed, PromptTokS: numPtr(s.PromptTokS), GenTokS: numPtr(s.GenTokS),
		TTFTP50MS: numPtr(s.TTFTP50MS), TTFTP99MS: numPtr(s.TTFTP99MS), TPOTP50MS: numPtr(s.TPOTP50MS), TPOTP99MS: numPtr(s.TPOTP99MS),
		WallSeconds: numPtr(s.Cost.MeanWallSeconds), EnergyJoules: numPtr(s.Cost.MeanEnergyJoules), EnergySource: string(s.Cost.EnergySource)}
	if p := s.Cost.PeakMemoryBytes; p > 0 {
		out.PeakMemBytes = &p
	}
	l := s.Cost.Load
	out.Slots, out.TrialsPerS, out.OutputTokS, out.WallP50Seconds, out.LoadNote = l.Slots, numPtr(l.TrialsPerS), numPtr(l.OutputTokS), numPtr(l.WallP50Seconds), s.Cost.LoadNote
	if d := s.Delta; d != nil {
		out.Delta = &report.SpeedDelta{PromptTokS: numPtr(d.PromptTokS), GenTokS: numPtr(d.GenTokS),
			TTFTP50: numPtr(d.TTFTP50), TTFTP99: numPtr(d.TTFTP99), TPOTP50: numPtr(d.TPOTP50), TPOTP99: numPtr(d.TPOTP99),
			Wall: numPtr(d.Wall), OutputTokS: numPtr(d.OutputTokS), PeakMem: numPtr(d.PeakMemory), Energy: numPtr(d.Energy)}
	}
	return out
}
