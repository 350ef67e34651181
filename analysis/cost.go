package analysis

import (
	"math"
	"strings"
)

func nan() Num { return Num(math.NaN()) }

// Cost is an arm's cost at the card size the study ran at. Trials that
// ran beside others on the arm's runtime (pins.slots > 1) are charged
// their share of it (load.go), so these figures are what the arm cost,
// never its latency under load counted once per slot.
type Cost struct {
	Arm     string `json:"arm"`
	JobKind string `json:"job_kind,omitempty"` // empty for the all-kinds summary
	Trials  int    `json:"trials"`             // scored trials the figures cover
	// MeanWallSeconds and TotalWallSeconds cover scored trials only: each
	// trial's charged seconds, its own wall time when it ran alone.
	MeanWallSeconds  Num   `json:"mean_wall_seconds"`
	TotalWallSeconds Num   `json:"total_wall_seconds"`
	PeakMemoryBytes  int64 `json:"peak_memory_bytes"`
	// MeanEnergyJoules is per scored trial; EnergySource is the weakest
	// source among them (estimate < rapl < nvml), with a note when mixed.
	MeanEnergyJoules Num          `json:"mean_energy_joules"`
	EnergySource     EnergySource `json:"energy_source,omitempty"`
	EnergyNote       string       `json:"energy_note,omitempty"`
	// Load is the arm's throughput at its slot count; LoadNote says how
	// shared trials were charged, empty when none was.
	Load     Load   `json:"load"`
	LoadNote string `json:"load_note,omitempty"`
}

// value returns the cost on the measure a tradeoff is judged on.
func (c Cost) value(m CostMeasure) float64 {
	switch m {
	case CostMemory:
		if c.PeakMemoryBytes == 0 {
			return math.NaN()
		}
		return float64(c.PeakMemoryBytes)
	case CostEnergy:
		return float64(c.MeanEnergyJoules)
	default:
		return float64(c.MeanWallSeconds)
	}
}

var sourceRank = map[EnergySource]int{EnergyEstimate: 0, EnergyRAPL: 1, EnergyNVML: 2}

// costOf summarises the scored trials of arm (and kind, unless empty).
// Preempted and missing trials cost nothing the model is charged for.
func costOf(trials []Trial, arm, kind string) Cost {
	c := Cost{Arm: arm, JobKind: kind}
	var wall, energy float64
	var nEnergy int
	sources := map[EnergySource]int{}
	ch := chargesOf(trials, arm)
	for i, t := range trials {
		if t.Arm != arm || (kind != "" && t.JobKind != kind) || t.Missing || t.Preempted {
			continue
		}
		c.Trials++
		w, j, peak := t.WallSeconds, t.EnergyJoules, t.PeakMemoryBytes
		if cg, ok := ch[i]; ok {
			w, j, peak = cg.seconds, cg.joules, cg.peak
		}
		wall += w
		c.PeakMemoryBytes = max(c.PeakMemoryBytes, peak)
		if t.EnergySource != "" {
			energy += j
			nEnergy++
			sources[t.EnergySource]++
		}
	}
	c.Load = loadOf(trials, ch, arm, kind)
	c.LoadNote = loadNote(c.Load)
	c.MeanWallSeconds, c.TotalWallSeconds = Num(math.NaN()), Num(wall)
	if c.Trials > 0 && wall > 0 {
		c.MeanWallSeconds = Num(wall / float64(c.Trials))
	}
	c.MeanEnergyJoules = Num(math.NaN())
	if nEnergy > 0 {
		c.MeanEnergyJoules = Num(energy / float64(nEnergy))
		weakest, rank := EnergySource(""), 99
		var names []string
		for _, s := range []EnergySource{EnergyNVML, EnergyRAPL, EnergyEstimate} {
			if sources[s] == 0 {
				continue
			}
			names = append(names, string(s))
			if r, ok := sourceRank[s]; ok && r < rank {
				weakest, rank = s, r
			}
		}
		c.EnergySource = weakest
		if len(names) > 1 {
			c.EnergyNote = "mixed sources: " + strings.Join(names, ", ") + "; labelled by the weakest"
		}
		if nEnergy < c.Trials {
			c.EnergyNote = strings.TrimPrefix(c.EnergyNote+"; energy missing for some trials", "; ")
		}
	}
	return c
}
