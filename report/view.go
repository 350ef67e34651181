package report

import (
	"fmt"
	"html/template"
	"slices"
)

// view is Data arranged for the HTML template: figures drawn, colours
// assigned, failures pivoted.
type view struct {
	Data
	Kinds  []kindView
	Replay *replayView
	// StopFigures are the monitored pairs' paths, in the order of Stop.Pairs.
	StopFigures []figure
	Caveat      string
	// CSP, Script and PageJSON are the page's policy, its one script and
	// the data the script reads.
	CSP      template.HTMLAttr
	Script   template.JS
	PageJSON template.JS
}

type kindView struct {
	Kind
	ID       string
	Colors   map[string]template.CSS
	Leader   *Arm
	Forest   *figure
	PBest    *figure
	Sweep    *figure
	Cost     *figure
	Failures *failureTable
}

type failureTable struct {
	Arms []string
	Rows []failureRow
}

type failureRow struct {
	Code   string
	Counts []int
	Total  int
}

type replayView struct {
	Replay
	Counts []replayCount
}

type replayCount struct {
	Status ReplayStatus
	N      int
}

func newView(d Data) (view, error) {
	v := view{Data: d, Caveat: CardCaveat, CSP: template.HTMLAttr(`content="` + csp() + `"`), Script: template.JS(reportJS)}
	used := map[string]int{}
	for _, k := range d.Kinds {
		id := "kind-" + slug(k.Name)
		if used[id]++; used[id] > 1 {
			id = fmt.Sprintf("%s-%d", id, used[id])
		}
		kv := kindView{Kind: k, ID: id, Colors: map[string]template.CSS{}}
		for name, s := range armStyles(k) {
			kv.Colors[name] = template.CSS(hexColor(s.color))
		}
		kv.Leader = leader(k)
		var err error
		if len(k.Pairs) > 0 {
			if kv.Forest, err = keep(forest(k, "fig-forest-"+id)); err != nil {
				return v, err
			}
		}
		if len(k.Arms) > 0 {
			if kv.PBest, err = keep(pBest(k, "fig-pbest-"+id)); err != nil {
				return v, err
			}
		}
		if k.Sweep != nil && len(k.Sweep.Gates) > 0 {
			if kv.Sweep, err = keep(sweep(k, "fig-sweep-"+id)); err != nil {
				return v, err
			}
		}
		if k.Cost != nil && len(k.Cost.Points) > 0 {
			if kv.Cost, err = keep(costScatter(k, "fig-cost-"+id)); err != nil {
				return v, err
			}
		}
		kv.Failures = pivotFailures(k)
		v.Kinds = append(v.Kinds, kv)
	}
	if d.Stop != nil {
		for i, sp := range d.Stop.Pairs {
			f, err := stopFigure(*d.Stop, sp, fmt.Sprintf("fig-stop-%d", i+1))
			if err != nil {
				return v, err
			}
			v.StopFigures = append(v.StopFigures, f)
		}
	}
	if d.Replay != nil {
		rv := &replayView{Replay: *d.Replay}
		for _, s := range []ReplayStatus{Reproduced, Mismatch, StackDiffers} {
			n := 0
			for _, r := range d.Replay.Rows {
				if r.Status == s {
					n++
				}
			}
			rv.Counts = append(rv.Counts, replayCount{s, n})
		}
		v.Replay = rv
	}
	var err error
	v.PageJSON, err = pageJSON(v.Kinds)
	return v, err
}

// keep turns a drawn figure into the pointer the template tests for.
func keep(f figure, err error) (*figure, error) {
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// leader is the arm with the highest P(best), the one a reader will look
// for first; nil when there are no arms.
func leader(k Kind) *Arm {
	if k.Verdict != "" {
		// The analysis decided: no leader when nothing was measured or the
		// top is shared exactly.
		for i := range k.Arms {
			if k.Leader != "" && k.Arms[i].Arm == k.Leader {
				return &k.Arms[i]
			}
		}
		return nil
	}
	var best *Arm
	for i := range k.Arms {
		if best == nil || k.Arms[i].PBest > best.PBest {
			best = &k.Arms[i]
		}
	}
	return best
}

func pivotFailures(k Kind) *failureTable {
	if len(k.Failures) == 0 {
		return nil
	}
	t := &failureTable{}
	for _, a := range k.Arms {
		t.Arms = append(t.Arms, a.Arm)
	}
	rows := map[string]*failureRow{}
	var codes []string
	for _, f := range k.Failures {
		r, ok := rows[f.Code]
		if !ok {
			r = &failureRow{Code: f.Code, Counts: make([]int, len(t.Arms))}
			rows[f.Code] = r
			codes = append(codes, f.Code)
		}
		if i := slices.Index(t.Arms, f.Arm); i >= 0 {
			r.Counts[i] += f.Count
			r.Total += f.Count
		}
	}
	slices.Sort(codes)
	for _, c := range codes {
		t.Rows = append(t.Rows, *rows[c])
	}
	// The most frequent failure first: that is the one worth reading about.
	slices.SortStableFunc(t.Rows, func(a, b failureRow) int { return b.Total - a.Total })
	return t
}
