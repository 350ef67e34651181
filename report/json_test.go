package report

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestWriteJSONRoundTrips(t *testing.T) {
	d := SampleData()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, d); err != nil {
		t.Fatal(err)
	}
	var back Data
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("WriteJSON output does not parse: %v", err)
	}
	if !reflect.DeepEqual(back, d) {
		t.Errorf("JSON round trip changed the data:\n got %+v\nwant %+v", back, d)
	}
	// A value that was not measured is absent, not zero.
	if strings.Count(buf.String(), `"energy_joules"`) != countEnergy(d) {
		t.Errorf("energy_joules written %d times, want %d (nil must be omitted)", strings.Count(buf.String(), `"energy_joules"`), countEnergy(d))
	}
}

func countEnergy(d Data) int {
	n := 0
	for _, k := range d.Kinds {
		for _, a := range k.Arms {
			if a.EnergyJoules != nil {
				n++
			}
		}
	}
	for _, r := range d.Cards.Rows {
		if r.EnergyJoules != nil {
			n++
		}
	}
	return n
}
