package report

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// figure is one inline SVG figure with the words that make it accessible:
// Title and Desc go inside the SVG, Caption under it.
type figure struct {
	ID      string
	Class   string
	Title   string
	Desc    string
	Caption string
	SVG     template.HTML
}

// palette is Okabe–Ito, chosen because it stays distinguishable for the
// common forms of colour blindness; the baseline is always dark grey.
var palette = []color.RGBA{
	{0x00, 0x72, 0xB2, 0xff}, {0xE6, 0x9F, 0x00, 0xff}, {0x00, 0x9E, 0x73, 0xff},
	{0xCC, 0x79, 0xA7, 0xff}, {0xD5, 0x5E, 0x00, 0xff}, {0x56, 0xB4, 0xE9, 0xff},
}

var baselineColor = color.RGBA{0x4d, 0x4d, 0x4d, 0xff}

// Glyphs and dashes vary with the colour so no figure relies on colour alone.
var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}, draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{},
}

var dashes = [][]vg.Length{nil, {vg.Points(6), vg.Points(3)}, {vg.Points(2), vg.Points(2)}, {vg.Points(8), vg.Points(3), vg.Points(2), vg.Points(3)}}

// style is how one arm is drawn in every figure of its job kind.
type armStyle struct {
	color color.RGBA
	glyph draw.GlyphDrawer
	dash  []vg.Length
}

func armStyles(k Kind) map[string]armStyle {
	m := make(map[string]armStyle, len(k.Arms))
	n := 0
	for i, a := range k.Arms {
		s := armStyle{glyph: glyphs[i%len(glyphs)], dash: dashes[i%len(dashes)]}
		if a.Baseline {
			s.color = baselineColor
		} else {
			s.color = palette[n%len(palette)]
			n++
		}
		m[a.Arm] = s
	}
	return m
}

func hexColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

var (
	sans     = font.Font{Typeface: "Liberation", Variant: "Sans"}
	ink      = color.RGBA{0x22, 0x22, 0x22, 0xff}
	gridInk  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	guideInk = color.RGBA{0x88, 0x88, 0x88, 0xff}
)

// newPlot returns a plot in the report's house style.
func newPlot(xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, 11)
		ax.Label.TextStyle.Color = ink
		ax.Tick.Label.Font = font.From(sans, 10)
		ax.Tick.Label.Color = ink
		ax.LineStyle.Color = guideInk
		ax.Tick.LineStyle.Color = guideInk
	}
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.X.Tick.Marker = niceTicks{}
	p.Y.Tick.Marker = niceTicks{}
	p.Legend.TextStyle.Font = font.From(sans, 10)
	p.Legend.TextStyle.Color = ink
	return p
}

func addGrid(p *plot.Plot, vertical, horizontal bool) {
	g := plotter.NewGrid()
	g.Vertical.Color = gridInk
	g.Horizontal.Color = gridInk
	if !vertical {
		g.Vertical.Color = nil
	}
	if !horizontal {
		g.Horizontal.Color = nil
	}
	p.Add(g)
}

// vline draws a guide at x from y0 to y1.
func vline(x, y0, y1 float64, c color.Color, dash []vg.Length) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: y0}, {X: x, Y: y1}})
	if err != nil {
		return nil, err
	}
	l.Color = c
	l.Width = vg.Points(1)
	l.Dashes = dash
	return l, nil
}

// render draws p as an SVG meant to sit inline in an HTML page: no XML
// prologue, no namespace URLs (the HTML parser supplies the namespace, and
// the report must hold no URL at all), sized by CSS, with a <title> and
// <desc> for screen readers.
func render(p *plot.Plot, w, h vg.Length, f figure) (figure, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return f, fmt.Errorf("report: figure %s: %w", f.ID, err)
	}
	s := buf.String()
	start := strings.Index(s, "<svg")
	end := strings.Index(s[max(start, 0):], ">")
	if start < 0 || end < 0 {
		return f, fmt.Errorf("report: figure %s: plot produced no <svg> element", f.ID)
	}
	body := s[start+end+1:]
	body = strings.ReplaceAll(body, "font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
	open := fmt.Sprintf(`<svg id="%s" class="fig %s" role="img" aria-labelledby="%s-title %s-desc" viewBox="0 0 %.6g %.6g" preserveAspectRatio="xMidYMid meet"><title id="%s-title">%s</title><desc id="%s-desc">%s</desc>`,
		f.ID, f.Class, f.ID, f.ID, w.Points(), h.Points(), f.ID, html.EscapeString(f.Title), f.ID, html.EscapeString(f.Desc))
	// The SVG text is built by gonum/plot, which escapes every string it is
	// given, and the opening tag above escapes ours.
	f.SVG = template.HTML(open + body) //nolint:gosec // built and escaped here
	return f, nil
}

func better(k Kind) string {
	if k.Direction == "lower" {
		return "lower is better"
	}
	return "higher is better"
}

// FidelityRankingDirection is which way is better for a job kind ranked by
// fidelity (Kind.RankedBy), with the pass rates that are shown beside; the
// page's template (report.html.tmpl) writes the same words.
const FidelityRankingDirection = "lower is better; pass rates shown beside"

// rankingMeasure is what ranks the job kind's pairs and which way is
// better: its measure, or its RankedBy when fidelity ranks it.
func rankingMeasure(k Kind) (string, string) {
	if k.RankedBy != "" {
		return k.RankedBy, FidelityRankingDirection
	}
	return k.Measure, better(k)
}

// forest plots each named pair's delta with its interval.
func forest(k Kind, id string) (figure, error) {
	styles := armStyles(k)
	n := len(k.Pairs)
	measure, dir := rankingMeasure(k)
	p := newPlot(fmt.Sprintf("Δ %s, challenger − baseline (%s)", measure, dir), "")
	addGrid(p, true, false)
	names := make([]string, n)
	lo, hi := 0.0, 0.0
	var desc []string
	for i, pr := range k.Pairs {
		// The first pair is drawn at the top, as it is listed in the table.
		y := float64(n - 1 - i)
		names[n-1-i] = pr.Challenger + " vs " + pr.Baseline
		pts := xyErr{x: pr.Delta.Value, y: y, lo: pr.Delta.Value - pr.Delta.Low, hi: pr.Delta.High - pr.Delta.Value}
		bars, err := plotter.NewXErrorBars(pts)
		if err != nil {
			return figure{}, fmt.Errorf("report: forest %s: %w", k.Name, err)
		}
		st := styles[pr.Challenger]
		bars.Color = st.color
		bars.Width = vg.Points(2)
		bars.CapWidth = vg.Points(8)
		dot, err := plotter.NewScatter(pts)
		if err != nil {
			return figure{}, fmt.Errorf("report: forest %s: %w", k.Name, err)
		}
		dot.GlyphStyle = draw.GlyphStyle{Color: st.color, Radius: vg.Points(4), Shape: draw.BoxGlyph{}}
		p.Add(bars, dot)
		lo, hi = math.Min(lo, pr.Delta.Low), math.Max(hi, pr.Delta.High)
		desc = append(desc, fmt.Sprintf("%s vs %s: %s, Holm p %s, %s", pr.Challenger, pr.Baseline, deltaText(pr.Delta), pval(pr.PHolm), pr.Outcome))
	}
	y0, y1 := -0.6, float64(n)-0.4
	zero, err := vline(0, y0, y1, ink, nil)
	if err != nil {
		return figure{}, err
	}
	p.Add(zero)
	if d := k.Detectable; d != nil {
		for _, x := range []float64{-*d, *d} {
			g, err := vline(x, y0, y1, guideInk, []vg.Length{vg.Points(4), vg.Points(3)})
			if err != nil {
				return figure{}, err
			}
			p.Add(g)
		}
		lo, hi = math.Min(lo, -*d), math.Max(hi, *d)
	}
	pad := 0.08 * (hi - lo)
	if pad == 0 {
		pad = 0.1
	}
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = y0, y1
	p.Y.Tick.Label.Font = font.From(sans, 10.5)
	caption := fmt.Sprintf("Named pairs in %s: each challenger's difference from its baseline, with its interval (%s). The solid line is no difference", k.Name, k.Interval)
	if k.Detectable != nil {
		caption += fmt.Sprintf("; dashed lines mark ±%s, the smallest difference the design states its task count can detect at 80%% power%s — inside them a difference is not shown, not equal", num(*k.Detectable), computedAside(k))
	}
	return render(p, vg.Points(640), vg.Points(float64(70+34*n)), figure{
		ID: id, Class: "fig-forest", Title: "Forest plot of named pairs, " + k.Name,
		Desc: strings.Join(desc, "; ") + ".", Caption: caption + ".",
	})
}

// xyErr is one point with an asymmetric horizontal error.
type xyErr struct{ x, y, lo, hi float64 }

func (e xyErr) Len() int                       { return 1 }
func (e xyErr) XY(int) (float64, float64)      { return e.x, e.y }
func (e xyErr) XError(int) (low, high float64) { return e.lo, e.hi }

// pBest draws each arm's P(best) with the design's bar.
func pBest(k Kind, id string) (figure, error) {
	styles := armStyles(k)
	n := len(k.Arms)
	p := newPlot("P(best), by bootstrap over tasks", "")
	addGrid(p, true, false)
	names := make([]string, n)
	var desc []string
	for i, a := range k.Arms {
		y := float64(n - 1 - i)
		names[n-1-i] = a.Arm
		bar, err := plotter.NewBarChart(plotter.Values{a.PBest}, vg.Points(16))
		if err != nil {
			return figure{}, fmt.Errorf("report: P(best) %s: %w", k.Name, err)
		}
		bar.Horizontal = true
		bar.XMin = y
		bar.Color = styles[a.Arm].color
		bar.LineStyle.Width = 0
		p.Add(bar)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: a.PBest, Y: y}}, Labels: []string{fmt.Sprintf(" %.2f", a.PBest)}})
		if err != nil {
			return figure{}, err
		}
		lab.TextStyle[0].Font = font.From(sans, 10)
		lab.TextStyle[0].Color = ink
		lab.TextStyle[0].YAlign = -0.5
		p.Add(lab)
		desc = append(desc, fmt.Sprintf("%s %.2f", a.Arm, a.PBest))
	}
	y0, y1 := -0.6, float64(n)-0.4
	bar, err := vline(k.BestBar, y0, y1, ink, []vg.Length{vg.Points(4), vg.Points(3)})
	if err != nil {
		return figure{}, err
	}
	p.Add(bar)
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = y0, y1
	p.X.Min, p.X.Max = 0, 1.08
	return render(p, vg.Points(420), vg.Points(float64(70+30*n)), figure{
		ID: id, Class: "fig-pbest", Title: "P(best) per arm, " + k.Name,
		Desc:    "P(best): " + strings.Join(desc, ", ") + fmt.Sprintf("; the design's bar is %.2f.", k.BestBar),
		Caption: fmt.Sprintf("P(best) in %s: how often each arm ranks first when tasks are resampled. The dashed line is the design's bar (%.2f); a leader below it is a tie.", k.Name, k.BestBar),
	})
}

// sweep draws each arm's pass rate as the gate moves.
func sweep(k Kind, id string) (figure, error) {
	styles := armStyles(k)
	p := newPlot("gate on "+k.Measure, "pass rate")
	addGrid(p, true, true)
	var desc []string
	for _, l := range k.Sweep.Lines {
		xys := make(plotter.XYs, len(l.PassRate))
		for i, v := range l.PassRate {
			xys[i] = plotter.XY{X: k.Sweep.Gates[i], Y: v}
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return figure{}, fmt.Errorf("report: sweep %s: %w", k.Name, err)
		}
		st := styles[l.Arm]
		line.Color = st.color
		line.Width = vg.Points(2)
		line.Dashes = st.dash
		p.Add(line)
		p.Legend.Add(l.Arm, line)
		if at, ok := rateAt(k.Sweep.Gates, l.PassRate, k.Gate); ok {
			desc = append(desc, fmt.Sprintf("%s %s", l.Arm, pct(at)))
		}
	}
	g, err := vline(k.Gate, 0, 1, ink, []vg.Length{vg.Points(4), vg.Points(3)})
	if err != nil {
		return figure{}, err
	}
	p.Add(g)
	p.Legend.Padding = vg.Points(3)
	p.Legend.Left = true
	p.Legend.Top = false
	p.Legend.XOffs = vg.Points(12)
	p.Legend.YOffs = vg.Points(12)
	p.Y.Min, p.Y.Max = 0, 1.02
	d := fmt.Sprintf("Pass rate against the gate, %s.", k.Name)
	if len(desc) > 0 {
		d += fmt.Sprintf(" At the design's gate %s: %s.", num(k.Gate), strings.Join(desc, ", "))
	}
	return render(p, vg.Points(560), vg.Points(300), figure{
		ID: id, Class: "fig-sweep", Title: "Threshold sweep, " + k.Name, Desc: d,
		Caption: fmt.Sprintf("Threshold sweep in %s: the pass rate each arm would have had as the gate on %s moves. The dashed line is the design's gate (%s).", k.Name, k.Measure, num(k.Gate)),
	})
}

// rateAt is the pass rate at the gate nearest to g.
func rateAt(gates, rates []float64, g float64) (float64, bool) {
	best, bi := math.Inf(1), -1
	for i, x := range gates {
		if d := math.Abs(x - g); d < best && i < len(rates) {
			best, bi = d, i
		}
	}
	if bi < 0 {
		return 0, false
	}
	return rates[bi], true
}

// costScatter draws each arm's cost against its score.
func costScatter(k Kind, id string) (figure, error) {
	styles := armStyles(k)
	p := newPlot(k.Cost.Label, k.Measure)
	addGrid(p, true, true)
	var desc []string
	xs, ys := []float64{}, []float64{}
	var labels []*plotter.Labels
	for _, pt := range k.Cost.Points {
		xy := plotter.XYs{{X: pt.Cost, Y: pt.Score}}
		sc, err := plotter.NewScatter(xy)
		if err != nil {
			return figure{}, fmt.Errorf("report: cost %s: %w", k.Name, err)
		}
		st := styles[pt.Arm]
		sc.GlyphStyle = draw.GlyphStyle{Color: st.color, Radius: vg.Points(5), Shape: st.glyph}
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: []string{pt.Arm}})
		if err != nil {
			return figure{}, err
		}
		lab.TextStyle[0].Font = font.From(sans, 10)
		lab.TextStyle[0].Color = ink
		p.Add(sc)
		labels = append(labels, lab)
		xs, ys = append(xs, pt.Cost), append(ys, pt.Score)
		desc = append(desc, fmt.Sprintf("%s cost %.3g, score %s", pt.Arm, pt.Cost, num(pt.Score)))
	}
	pad(&p.X, xs, 0.12, 0.30)
	pad(&p.Y, ys, 0.15, 0.15)
	const w, h = 420, 300
	offsets := placeLabels(p, vg.Points(w), vg.Points(h), labels, vg.Points(5))
	for i, lab := range labels {
		lab.Offset = offsets[i]
		p.Add(lab)
	}
	return render(p, vg.Points(w), vg.Points(h), figure{
		ID: id, Class: "fig-cost", Title: "Cost against score, " + k.Name,
		Desc:    strings.Join(desc, "; ") + ".",
		Caption: fmt.Sprintf("Cost against score in %s (%s against %s, %s). Up is better; left is cheaper.", k.Name, k.Cost.Label, k.Measure, better(k)),
	})
}

// pad sets an axis range around vs with room for labels on the right.
func pad(ax *plot.Axis, vs []float64, left, right float64) {
	if len(vs) == 0 {
		return
	}
	lo, hi := vs[0], vs[0]
	for _, v := range vs {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	span := hi - lo
	if span == 0 {
		span = math.Max(math.Abs(hi), 1) * 0.2
	}
	ax.Min, ax.Max = lo-left*span, hi+right*span
}

// niceTicks labels an axis at round steps (1, 2, 2.5 or 5 × 10^k) that
// include zero when the range does, because the default marker can skip
// the zero a forest plot is read against.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 4, 64)}}
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals(step), 64)})
		// Minor ticks halfway, unlabelled.
		if m := v + step/2; m <= hi {
			ticks = append(ticks, plot.Tick{Value: m})
		}
	}
	return ticks
}

func decimals(step float64) int {
	d := 0
	for d < 6 && math.Abs(step*math.Pow(10, float64(d))-math.Round(step*math.Pow(10, float64(d)))) > 1e-9 {
		d++
	}
	return d
}

// placeLabels chooses where each one-label plotter's text goes beside its
// point so that no two labels overlap and no label covers another point's
// glyph (of radius r): arms at the same point, or close, would otherwise
// print their names over each other. Each label tries the right of its
// point on the point's line, then the lines below and above it in turn,
// then the same on the left, and takes the first free place inside the
// figure; positions come from the plot's own transforms on a canvas of the
// figure's size, with the axes' ranges already set.
func placeLabels(p *plot.Plot, w, h vg.Length, labels []*plotter.Labels, r vg.Length) []vg.Point {
	c := draw.New(vgsvg.New(w, h))
	da := p.DataCanvas(c)
	trX, trY := p.Transforms(&da)
	type box struct{ min, max vg.Point }
	overlaps := func(a, b box) bool {
		return a.min.X < b.max.X && b.min.X < a.max.X && a.min.Y < b.max.Y && b.min.Y < a.max.Y
	}
	var taken []box
	at := make([]vg.Point, len(labels))
	for i, lab := range labels {
		at[i] = vg.Point{X: trX(lab.XYs[0].X), Y: trY(lab.XYs[0].Y)}
		taken = append(taken, box{vg.Point{X: at[i].X - r, Y: at[i].Y - r}, vg.Point{X: at[i].X + r, Y: at[i].Y + r}})
	}
	gap := vg.Points(8)
	out := make([]vg.Point, len(labels))
	for i, lab := range labels {
		sty := lab.TextStyle[0]
		tw, th := sty.Width(lab.Labels[0]), sty.Height(lab.Labels[0])
		step := th + vg.Points(2)
		var candidates []vg.Point
		for _, dx := range []vg.Length{gap, -gap - tw} {
			candidates = append(candidates, vg.Point{X: dx, Y: -th / 2})
			for j := 1; j <= 2*len(labels); j++ {
				candidates = append(candidates, vg.Point{X: dx, Y: -th/2 - vg.Length(j)*step}, vg.Point{X: dx, Y: -th/2 + vg.Length(j)*step})
			}
		}
		out[i] = candidates[0]
		for _, off := range candidates {
			b := box{vg.Point{X: at[i].X + off.X, Y: at[i].Y + off.Y}, vg.Point{X: at[i].X + off.X + tw, Y: at[i].Y + off.Y + th}}
			if b.min.X < 0 || b.max.X > w || b.min.Y < 0 || b.max.Y > h {
				continue
			}
			free := true
			for _, t := range taken {
				if overlaps(b, t) {
					free = false
					break
				}
			}
			if free {
				out[i] = off
				taken = append(taken, b)
				break
			}
		}
	}
	return out
}
