package analysis

import "math"

// Latency is one arm's wall time per scored trial in one job kind, with its
// difference from the incumbent's (NaN for the incumbent itself, or where
// the incumbent has no timed trial in the job kind).
type Latency struct {
	JobKind    string `json:"job_kind"`
	Arm        string `json:"arm"`
	Trials     int    `json:"trials"` // scored trials with a wall time
	P50MS      Num    `json:"p50_ms"`
	P95MS      Num    `json:"p95_ms"`
	DeltaP50MS Num    `json:"delta_p50_ms"`
	DeltaP95MS Num    `json:"delta_p95_ms"`
}

// latencies are the p50 and p95 (type-7) of every ranked arm in every job
// kind, read from the receipts' wall time.
func latencies(d Design, trials []Trial, kinds []KindResult) []Latency {
	var out []Latency
	for _, k := range kinds {
		inc50, inc95 := math.NaN(), math.NaN()
		if d.Incumbent != "" {
			inc50, inc95 = latencyMS(trials, d.Incumbent, k.JobKind, 0.5), latencyMS(trials, d.Incumbent, k.JobKind, 0.95)
		}
		for _, a := range k.Arms {
			l := Latency{JobKind: k.JobKind, Arm: a.Arm, P50MS: Num(latencyMS(trials, a.Arm, k.JobKind, 0.5)), P95MS: Num(latencyMS(trials, a.Arm, k.JobKind, 0.95)),
				DeltaP50MS: Num(math.NaN()), DeltaP95MS: Num(math.NaN())}
			for _, t := range trials {
				if scoredTrial(t, a.Arm, k.JobKind) && t.WallSeconds > 0 {
					l.Trials++
				}
			}
			if a.Arm != d.Incumbent {
				l.DeltaP50MS, l.DeltaP95MS = Num(float64(l.P50MS)-inc50), Num(float64(l.P95MS)-inc95)
			}
			out = append(out, l)
		}
	}
	return out
}
