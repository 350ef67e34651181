package findings

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"rig/analysis"
	"rig/receipts"
)

// TestReceiptFieldsAreTheReceiptsMeasurements holds analysis.ReceiptFields
// (what a "receipt.FIELD" guardrail may name; analysis cannot import the
// receipt) to the receipt's numeric fields, identifiers left out.
func TestReceiptFieldsAreTheReceiptsMeasurements(t *testing.T) {
	identifiers := []string{"schema_version", "repeat", "attempt", "parent_attempt"}
	var numeric []string
	rt := reflect.TypeOf(receipts.Receipt{})
	for i := range rt.NumField() {
		f := rt.Field(i)
		switch f.Type.Kind() {
		case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint64, reflect.Float64:
			if name := strings.Split(f.Tag.Get("json"), ",")[0]; !slices.Contains(identifiers, name) {
				numeric = append(numeric, name)
			}
		}
	}
	got := slices.Sorted(slices.Values(analysis.ReceiptFields))
	slices.Sort(numeric)
	if !slices.Equal(got, numeric) {
		t.Errorf("analysis.ReceiptFields %v; the receipt's numeric measurements are %v", got, numeric)
	}
}
