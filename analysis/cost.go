package analysis

import (
	"math"
	"strings"
)

// Cost is an arm's cost at the card size the study ran at.
type Cost struct {
	Arm     string `json:"arm"`
	JobKind string `json:"job_kind,omitempty"` // empty for the all-kinds summary
	Trials  int    `json:"trials"`             // scored trials the figures cover
	// MeanWallSeconds and TotalWallSeconds cover scored trials only.
	MeanWallSeconds  Num   `json:"mean_wall_seconds"`
	TotalWallSeconds Num   `json:"total_wall_seconds"`
	PeakMemoryBytes  int64 `json:"peak_memory_bytes"`
	// MeanEnergyJoules is per scored trial; EnergySource is the weakest
	// source among them (estimate < rapl < nvml), with a note when mixed.
	MeanEnergyJoules Num          `json:"mean_energy_joules"`
	EnergySource     EnergySource `json:"energy_source,omitempty"`
	EnergyNote       string       `json:"energy_note,omitempty"`
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
	for _, t := range trials {
		if t.Arm != arm || (kind != "" && t.JobKind != kind) || t.Missing || t.Preempted {
			continue
		}
		c.Trials++
		wall += t.WallSeconds
		c.PeakMemoryBytes = max(c.PeakMemoryBytes, t.PeakMemoryBytes)
		if t.EnergySource != "" {
			energy += t.EnergyJoules
			nEnergy++
			sources[t.EnergySource]++
		}
	}
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
