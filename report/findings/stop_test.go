package findings

import (
	"math"
	"testing"

	"rig/analysis"
	"rig/receipts"
)

// The runtime's timings on a receipt reach the trial the analysis reads,
// and an analysed speed card reaches the report with its changes against
// the baseline; an unmeasured figure stays absent, never zero.
func TestSpeedCardFromReceipts(t *testing.T) {
	r := receipts.Receipt{DesignHash: "h", Arm: "ollama", JobKind: "qa", TaskID: "t1", Outcome: receipts.Scored, Grade: &receipts.Grade{Pass: true, Score: 1},
		PromptPerSecond: 151.2, OutputPerSecond: 21.1, TTFTMS: 3566, TPOTMS: 52.29, WallMS: 6900}
	got := Trials([]receipts.Receipt{r}, nil, "h")
	if len(got) != 1 || got[0].PromptTokS != 151.2 || got[0].GenTokS != 21.1 || got[0].TTFTMS != 3566 || got[0].TPOTMS != 52.29 {
		t.Fatalf("receipt became %+v; want its four timings on the trial", got)
	}
	// A guardrail names them as receipt fields: receipt.ttft_ms, receipt.tpot_ms.
	if m := metricsOf(r, []string{"ttft_ms", "tpot_ms"}); m["ttft_ms"] != 3566 || m["tpot_ms"] != 52.29 {
		t.Errorf("guardrail metrics %v; want ttft_ms 3566 and tpot_ms 52.29", m)
	}
	nan := analysis.Num(math.NaN())
	card := speedCard(analysis.Speed{Arm: "ollama", Timed: 1, PromptTokS: 151.2, GenTokS: 21.1, TTFTP50MS: 3566, TTFTP99MS: 3566, TPOTP50MS: 52.29, TPOTP99MS: nan,
		Cost:  analysis.Cost{MeanWallSeconds: 6.9, MeanEnergyJoules: nan, PeakMemoryBytes: 643 << 20},
		Delta: &analysis.SpeedDelta{PromptTokS: 0.19, GenTokS: nan, TTFTP50: -0.1, TTFTP99: nan, TPOTP50: nan, TPOTP99: nan, Wall: nan, PeakMemory: 0.87, Energy: nan}})
	if card.PromptTokS == nil || *card.PromptTokS != 151.2 || card.TPOTP99MS != nil || card.EnergyJoules != nil || card.PeakMemBytes == nil || *card.PeakMemBytes != 643<<20 {
		t.Errorf("card %+v: want the measured figures set and the NaN ones absent", card)
	}
	if d := card.Delta; d == nil || d.PromptTokS == nil || *d.PromptTokS != 0.19 || d.GenTokS != nil || *d.PeakMem != 0.87 {
		t.Errorf("card delta %+v: want +0.19 prompt, +0.87 memory, no generation change", card.Delta)
	}
}
