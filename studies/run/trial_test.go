package run

import (
	"testing"

	"rig/internal/offload"
	"rig/runtimes"
)

// TestRecordPinsOffload: a record made on the card carries the arm's
// offload pin, so that replay starts the card's build the same way; the
// CPU path writes none and reads as every record before the pin.
func TestRecordPinsOffload(t *testing.T) {
	card := offload.Pin{Backend: offload.BackendCUDA, GPULayers: 20, FlashAttention: "off", KVOnHost: true}
	for _, tc := range []struct {
		name string
		pin  offload.Pin
		want *offload.Pin
	}{
		{"cpu path, pin left out", offload.Pin{}, nil},
		{"cpu path, said", offload.Pin{Backend: offload.BackendCPU}, nil},
		{"on the card", card, &card},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := RecordPins(runtimes.Pins{Offload: tc.pin}, "d", "s", "x")
			switch {
			case tc.want == nil && p.Offload != nil:
				t.Errorf("offload %+v written for the CPU path", *p.Offload)
			case tc.want != nil && (p.Offload == nil || *p.Offload != *tc.want):
				t.Errorf("offload %v, want %+v", p.Offload, *tc.want)
			case p.OffloadPin().BackendName() != tc.pin.BackendName():
				t.Errorf("read back on backend %s, ran on %s", p.OffloadPin().BackendName(), tc.pin.BackendName())
			}
		})
	}
}
