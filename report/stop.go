package report

import (
	"fmt"
	"math"
	"rig/internal/wording"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Stop is the design's stopping rule at work: the look the execution
// stopped at (or the plan's end) and each monitored pair's path against its
// boundaries over paired tasks.
type Stop struct {
	// Method is "anytime" or "group_sequential" (with Spending).
	Method   string `json:"method"`
	Spending string `json:"spending,omitempty"`
	// Stopped says the execution stopped early at Check (1-based); Reason
	// is the monitor's own words.
	Stopped bool   `json:"stopped"`
	Check   int    `json:"check"`
	Reason  string `json:"reason"`
	// NotRun counts the planned trials the stop left unrun.
	NotRun int        `json:"not_run"`
	Pairs  []StopPair `json:"pairs"`
}

// StopPair is one monitored comparison's sequential result and path.
type StopPair struct {
	JobKind    string  `json:"job_kind"`
	Challenger string  `json:"challenger"`
	Baseline   string  `json:"baseline"`
	Status     string  `json:"status"`
	Direction  string  `json:"direction,omitempty"`
	Tasks      int     `json:"tasks"`
	Planned    int     `json:"planned"`
	P          float64 `json:"p"`
	PHolm      float64 `json:"p_holm"`
	// CS is the confidence sequence for the paired difference at CSLevel.
	CSLo    float64 `json:"cs_lo"`
	CSHi    float64 `json:"cs_hi"`
	CSLevel float64 `json:"cs_level"`
	// Stagewise, for a group-sequential pass kind, is the test's own exact
	// interval (the one the analysis reports for the pair); the table
	// shows it in place of the confidence sequence.
	Stagewise *StopInterval `json:"stagewise,omitempty"`
	// Statistic names what Path plots: "e-value" (anytime, boundary
	// 1/alpha_K) or "wins − losses" (group-sequential, boundary the
	// critical count).
	Statistic string      `json:"statistic"`
	Path      []StopPoint `json:"path"`
}

// StopInterval is an interval for a monitored pair's paired difference.
type StopInterval struct {
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Level float64 `json:"level"`
}

// IntervalText is the pair's interval as the table prints it: the
// stagewise-exact one where there is one, else the confidence sequence.
func (sp StopPair) IntervalText() string {
	level := func(l float64) string { return strconv.FormatFloat(100*l, 'f', -1, 64) + "%" }
	if g := sp.Stagewise; g != nil {
		return fmt.Sprintf("[%s, %s] (%s, stagewise-exact)", wording.Signed(g.Lo), wording.Signed(g.Hi), level(g.Level))
	}
	return fmt.Sprintf("[%s, %s] (%s, confidence sequence)", wording.Signed(sp.CSLo), wording.Signed(sp.CSHi), level(sp.CSLevel))
}

// StopPoint is one check of a monitored pair; nil boundaries are absent at
// that check (not a planned look, or no count could cross).
type StopPoint struct {
	Tasks         int      `json:"tasks"`
	Look          bool     `json:"look"`
	Statistic     float64  `json:"statistic"`
	Boundary      *float64 `json:"boundary,omitempty"`
	FutilityBound *float64 `json:"futility_bound,omitempty"`
	Status        string   `json:"status"`
}

// stopFigure draws one monitored pair's path against its boundaries:
// log10 E against log10(1/alpha_K) for the anytime test, wins − losses
// against ± the critical count (and the futility band) for the
// group-sequential one.
func stopFigure(s Stop, sp StopPair, id string) (figure, error) {
	anytime := s.Method == "anytime"
	yl := "wins − losses (discordant tasks)"
	tr := func(v float64) float64 { return v }
	if anytime {
		yl = "log10 e-value"
		tr = func(v float64) float64 { return math.Log10(math.Max(v, 1e-12)) }
	}
	p := newPlot("paired tasks", yl)
	addGrid(p, false, true)
	ls := stopPathLines(sp, anytime, tr)
	if err := fitStopAxes(p, s, sp, ls, id); err != nil {
		return figure{}, err
	}
	dash := []vg.Length{vg.Points(6), vg.Points(3)}
	dot := []vg.Length{vg.Points(2), vg.Points(2)}
	add := func(xys plotter.XYs, c int, dash []vg.Length, label string, points bool) error {
		return addStopLine(p, id, xys, c, dash, label, points)
	}
	// Boundaries get glyphs too: a boundary that exists at one look only
	// would otherwise be a line of one point, invisible.
	for _, e := range []error{
		add(ls.path, 0, nil, sp.Challenger+" vs "+sp.Baseline, true),
		add(ls.up, -1, dash, "efficacy boundary", true),
		add(ls.down, -1, dash, "", true),
		add(ls.futU, 2, dot, "futility bound", true),
		add(ls.futD, 2, dot, "", true),
	} {
		if e != nil {
			return figure{}, e
		}
	}
	desc := fmt.Sprintf("%s vs %s in %s: %s after %d of %d planned paired tasks", sp.Challenger, sp.Baseline, sp.JobKind, sp.Status, sp.Tasks, sp.Planned)
	if ls.stopAt >= 0 {
		x := float64(sp.Path[ls.stopAt].Tasks)
		lo, hi := p.Y.Min, p.Y.Max
		v, err := vline(x, lo, hi, ink, dot)
		if err != nil {
			return figure{}, err
		}
		p.Add(v)
		desc += fmt.Sprintf("; settled (%s) at check %d, %d tasks", sp.Path[ls.stopAt].Status, ls.stopAt+1, sp.Path[ls.stopAt].Tasks)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(12), -vg.Points(6)
	caption := stopCaption(s, sp, ls, anytime)
	return render(p, vg.Points(560), vg.Points(300), figure{ID: id, Class: "fig-stop", Title: "Stopping path, " + sp.Challenger + " vs " + sp.Baseline, Desc: desc + ".", Caption: caption})
}

// stopLines are a pair's path and boundaries as drawn, on the figure's
// y scale, and the check it was settled at (-1 when never).
type stopLines struct {
	path, up, down, futU, futD plotter.XYs
	stopAt                     int
}

// stopPathLines draws the pair's path and its boundaries through tr, the
// y scale; an anytime rule has one efficacy boundary and no futility bound.
func stopPathLines(sp StopPair, anytime bool, tr func(float64) float64) stopLines {
	ls := stopLines{stopAt: -1}
	for i, pt := range sp.Path {
		ls.path = append(ls.path, plotter.XY{X: float64(pt.Tasks), Y: tr(pt.Statistic)})
		if pt.Boundary != nil {
			ls.up = append(ls.up, plotter.XY{X: float64(pt.Tasks), Y: tr(*pt.Boundary)})
			if !anytime {
				ls.down = append(ls.down, plotter.XY{X: float64(pt.Tasks), Y: -*pt.Boundary})
			}
		}
		if pt.FutilityBound != nil && !anytime {
			ls.futU = append(ls.futU, plotter.XY{X: float64(pt.Tasks), Y: *pt.FutilityBound})
			ls.futD = append(ls.futD, plotter.XY{X: float64(pt.Tasks), Y: -*pt.FutilityBound})
		}
		if ls.stopAt < 0 && pt.Status != "continue" {
			ls.stopAt = i
		}
	}
	return ls
}

// fitStopAxes sets the axes around the lines, and for a stopped execution
// shades the planned tasks the stop left unrun.
func fitStopAxes(p *plot.Plot, s Stop, sp StopPair, ls stopLines, id string) error {
	// Headroom above the data for the legend, which sits top left.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, xys := range []plotter.XYs{ls.path, ls.up, ls.down, ls.futU, ls.futD} {
		for _, xy := range xys {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
	}
	if !math.IsInf(lo, 0) {
		span := math.Max(hi-lo, 1)
		p.Y.Min, p.Y.Max = lo-0.1*span, hi+0.6*span
	}
	// The whole plan on the axis: what a stop saved is the part drawn as
	// not run, under the path and its boundaries.
	p.X.Min = 0
	if last := float64(sp.Tasks); sp.Planned > sp.Tasks {
		p.X.Max = float64(sp.Planned)
		if s.Stopped {
			band, err := plotter.NewPolygon(plotter.XYs{{X: last, Y: p.Y.Min}, {X: float64(sp.Planned), Y: p.Y.Min},
				{X: float64(sp.Planned), Y: p.Y.Max}, {X: last, Y: p.Y.Max}})
			if err != nil {
				return fmt.Errorf("report: stop figure %s: %w", id, err)
			}
			band.Color, band.LineStyle.Width = gridInk, 0
			p.Add(band)
			p.Legend.Add(fmt.Sprintf("not run: %d of %d paired tasks", sp.Planned-sp.Tasks, sp.Planned), band)
		}
	}
	return nil
}

// addStopLine draws one line of the stop figure in palette colour c (-1 for
// the baseline's), with its legend entry when labelled and a glyph at each
// check when points.
func addStopLine(p *plot.Plot, id string, xys plotter.XYs, c int, dash []vg.Length, label string, points bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("report: stop figure %s: %w", id, err)
	}
	l.Width, l.Dashes = vg.Points(2), dash
	l.Color = baselineColor
	if c >= 0 {
		l.Color = palette[c]
	}
	p.Add(l)
	if label != "" {
		p.Legend.Add(label, l)
	}
	if points {
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Radius = l.Color, vg.Points(3)
		p.Add(sc)
	}
	return nil
}

// stopCaption says what the stop figure shows: the band, the settling line
// and why some checks have no efficacy boundary.
func stopCaption(s Stop, sp StopPair, ls stopLines, anytime bool) string {
	caption := fmt.Sprintf("Early stopping in %s, %s vs %s: the %s at each check (one per block) against its boundary", sp.JobKind, sp.Challenger, sp.Baseline, sp.Statistic)
	if s.Stopped && sp.Planned > sp.Tasks {
		caption += fmt.Sprintf("; the grey band is the %d of its %d planned paired tasks the stop left unrun", sp.Planned-sp.Tasks, sp.Planned)
	}
	if ls.stopAt >= 0 {
		caption += "; the dotted vertical line is where the pair was settled."
	} else {
		caption += "; the pair was never settled, so the plan ran on."
	}
	if len(ls.up) < len(sp.Path) && !anytime {
		caption += " A check without an efficacy boundary is one where no count of the discordant tasks so far could cross it (or not a planned look)."
	}
	return caption
}

// Line is the stop in one sentence, for Markdown and the summary.
func (s Stop) Line() string {
	m := s.Method
	if s.Spending != "" {
		m += " (" + s.Spending + ")"
	}
	if s.Stopped {
		return fmt.Sprintf("Stopped early at check %d by the %s rule: %s; %d planned trials not run (not missing).", s.Check, m, s.Reason, s.NotRun)
	}
	return fmt.Sprintf("The %s stopping rule did not stop the study: %s (check %d).", m, strings.TrimSuffix(s.Reason, "."), s.Check)
}

// stopBound prints a boundary, or "—" where none applies at that check.
func stopBound(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.4g", *v)
}
