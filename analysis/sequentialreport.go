package analysis

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Sequential is an execution's early-stopping record: the stopping rule and
// the monitor's last look (the one that stopped it, or the plan's end). The
// runner stores it on the execution; the analysis takes the monitored
// pairs' p-values and intervals from it, so what the report says holds at
// the time the study stopped.
type Sequential struct {
	Stopping Stopping `json:"stopping"`
	Look     Look     `json:"look"`
	// StoppedEarly: every monitored comparison was settled before the plan
	// ran out, and the execution stopped at Look.
	StoppedEarly bool `json:"stopped_early"`
	// NotRun are the planned trials the stop left unrun (arm|job kind|task
	// #repeat): not run, never missing pairs.
	NotRun []string `json:"not_run,omitempty"`
}

// ConfidenceSeq is the interval of a monitored pair: the confidence
// sequence of its paired difference, valid at the stopping time.
const ConfidenceSeq IntervalMethod = "confidence-sequence"

// StagewiseExact is the interval of a group-sequential pass kind's
// monitored pair: the sign test's own, by its stagewise ordering
// (SignTest.StagewiseCI), so that it excludes 0 exactly when the pair's
// sequential p is at most its alpha.
const StagewiseExact IntervalMethod = "stagewise-exact"

// sequentialPair is the monitor's look at one analysed pair, if monitored.
func (s *Sequential) pair(jobKind string, p Pair) (PairLook, float64, bool) {
	if s == nil {
		return PairLook{}, 0, false
	}
	for i, pl := range s.Look.Pairs {
		if pl.JobKind == jobKind && pl.Pair == p {
			h := math.NaN()
			if i < len(s.Look.HolmP) {
				h = s.Look.HolmP[i]
			}
			return pl, h, true
		}
	}
	return PairLook{}, 0, false
}

// applySequential replaces a monitored pair's fixed-sample test and
// interval with the sequential ones: a fixed-sample p-value read at a
// data-dependent stopping time is not valid, the sequential one is.
func (pr *PairResult) applySequential(s *Sequential) {
	pl, _, ok := s.pair(pr.JobKind, Pair{Candidate: pr.Candidate, Baseline: pr.Baseline})
	if !ok || pr.notComparable != "" {
		return
	}
	pr.P = pl.P
	pr.Interval = Interval{Lo: pl.CS.Lo, Hi: pl.CS.Hi, Level: pl.CS.Level, Method: ConfidenceSeq,
		Note: fmt.Sprintf("confidence sequence at level 1 − α/K = %.4g, valid at any stopping time", pl.CS.Level)}
	if g := pl.Stagewise; g != nil {
		pr.Interval = Interval{Lo: g.Lo, Hi: g.Hi, Level: g.Level, Method: StagewiseExact,
			Note: fmt.Sprintf("exact interval of the group-sequential sign test at level 1 − α/K = %.4g, by its stagewise ordering, given the %d discordant of %d paired tasks at the look its p was set, where the difference is at most %d/%d (the confidence sequence, valid at any time and not given them, is [%.3f, %.3f])",
				g.Level, g.Discordant, g.Tasks, g.Discordant, g.Tasks, float64(pl.CS.Lo), float64(pl.CS.Hi))}
	}
	method := "anytime-valid mixture e-value (p = 1/max E)"
	if s.Stopping.Method == GroupSequential {
		method = fmt.Sprintf("group-sequential sign test, %s alpha spending (stagewise-ordering p)", s.Stopping.Spending)
	}
	pr.Test = fmt.Sprintf("%s over %d paired tasks at check %d; %s", method, pl.Tasks, s.Look.Check+1, pl.Status)
	pr.Sequential = &pl
}

// stopClause is the decision trace's clause for a sequential study.
func (s *Sequential) stopClause() string {
	if s == nil {
		return ""
	}
	if !s.StoppedEarly {
		return fmt.Sprintf("stopping rule (%s): ran to the end of the plan at check %d; monitored pairs use the sequential p-values and %s", s.Stopping.Method, s.Look.Check+1, s.intervalsShown())
	}
	return fmt.Sprintf("stopped early at check %d (%s): %s; %d planned trials not run; monitored pairs use the sequential p-values and %s, valid at this stopping time",
		s.Look.Check+1, s.Stopping.Method, s.Look.Reason, len(s.NotRun), s.intervalsShown())
}

// intervalsShown names the interval the report shows for the monitored
// pairs, as sequentialPair sets it: the stagewise-exact one where the
// group-sequential test set it, else the confidence sequence. The trace
// names the interval the reader sees, not one the report left out.
func (s *Sequential) intervalsShown() string {
	var exact, cs []string
	for _, pl := range s.Look.Pairs {
		if pl.Stagewise != nil {
			exact = append(exact, pl.JobKind+" "+pl.Pair.String())
		} else {
			cs = append(cs, pl.JobKind+" "+pl.Pair.String())
		}
	}
	switch {
	case len(cs) == 0:
		return "the stagewise-exact intervals"
	case len(exact) == 0:
		return "confidence sequences"
	}
	return fmt.Sprintf("the stagewise-exact interval for %s and the confidence sequence for %s", strings.Join(exact, ", "), strings.Join(cs, ", "))
}

// NotRunID is how Sequential.NotRun names a planned trial: "arm|job
// kind|task#repeat". The runner writes it and the report reads it; dropNotRun
// matches on the part before '#'.
func NotRunID(arm, jobKind, task string, repeat int) string {
	return arm + "|" + jobKind + "|" + task + "#" + strconv.Itoa(repeat)
}

// plannedTasks is a pair's paired tasks at the end of its plan: those it
// has, plus, for a monitored pair of a stopped study, the tasks the stop
// left unrun for either of its arms.
func (s *Sequential) plannedTasks(pr PairResult) int {
	if s == nil || !s.StoppedEarly || pr.Sequential == nil {
		return pr.Tasks
	}
	unrun := map[string]bool{}
	for _, k := range s.NotRun {
		if i := strings.LastIndexByte(k, '#'); i >= 0 {
			k = k[:i]
		}
		for _, arm := range []string{pr.Candidate, pr.Baseline} {
			if task, ok := strings.CutPrefix(k, arm+"|"+pr.JobKind+"|"); ok {
				unrun[task] = true
			}
		}
	}
	return pr.Tasks + len(unrun)
}

// dropNotRun moves the missing pairs an early stop explains (every lacking
// arm's trials of the task were left unrun) from Missing to NotRun.
func (pr *PairResult) dropNotRun(s *Sequential) {
	if s == nil || !s.StoppedEarly || len(pr.Missing) == 0 {
		return
	}
	notRun := map[string]bool{}
	for _, k := range s.NotRun {
		if i := strings.LastIndexByte(k, '#'); i >= 0 {
			k = k[:i]
		}
		notRun[k] = true
	}
	unrun := func(arm, task string) bool { return notRun[arm+"|"+pr.JobKind+"|"+task] }
	var keep []MissingPair
	for _, m := range pr.Missing {
		explained := false
		switch m.Lacks {
		case "both":
			explained = unrun(pr.Candidate, m.Task) && unrun(pr.Baseline, m.Task)
		default:
			explained = unrun(m.Lacks, m.Task)
		}
		if explained {
			pr.NotRun = append(pr.NotRun, m.Task)
			continue
		}
		keep = append(keep, m)
	}
	pr.Missing, pr.MissingTasks = keep, len(keep)
}
