package findings

import (
	"slices"
	"testing"

	"rig/analysis"
	"rig/studies"
)

// TestGuardrailWordsAreAnalysiss: studies keeps the metric names and
// receipt fields a guardrail may name itself (it imports no analysis), and
// this package hands them to analysis as they are (Design), so they
// must be exactly analysis's: a name validation accepts that the analysis
// does not read would fail the report, one it refuses would bar a metric.
func TestGuardrailWordsAreAnalysiss(t *testing.T) {
	for _, c := range []struct{ design, analysis string }{
		{studies.MetricCost, analysis.MetricCost},
		{studies.MetricWallTime, analysis.MetricWallTime},
		{studies.MetricP95Latency, analysis.MetricP95Latency},
		{studies.MetricPeakMemory, analysis.MetricPeakMemory},
		{studies.MetricEnergy, analysis.MetricEnergy},
		{studies.MetricFidelityKL, analysis.MetricFidelityKL},
		{studies.ReceiptMetricPrefix, analysis.ReceiptPrefix},
	} {
		if c.design != c.analysis {
			t.Errorf("studies says %q where analysis says %q", c.design, c.analysis)
		}
	}
	if want := []string{analysis.MetricCost, analysis.MetricWallTime, analysis.MetricP95Latency, analysis.MetricPeakMemory, analysis.MetricEnergy, analysis.MetricFidelityKL}; !slices.Equal(studies.GuardrailMetrics, want) {
		t.Errorf("studies.GuardrailMetrics %v, analysis measures %v", studies.GuardrailMetrics, want)
	}
	if !slices.Equal(studies.ReceiptMetricFields, analysis.ReceiptFields) {
		t.Errorf("studies.ReceiptMetricFields %v, analysis.ReceiptFields %v", studies.ReceiptMetricFields, analysis.ReceiptFields)
	}
}
