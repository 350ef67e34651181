package run

import (
	"testing"

	"rig/internal/offload"
	"rig/runtimes"
)

// TestRecordPinsCarryContextAndOffload: a record carries the arm's context,
// and one made on the card the arm's offload pin, so that replay starts the
// same build the same way; the CPU path writes no offload pin and reads as
// every record before the pin.
func TestRecordPinsCarryContextAndOffload(t *testing.T) {
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
			p := RecordPins(runtimes.Pins{Offload: tc.pin, Context: 8192}, "d", "s", "x")
			switch {
			case p.Context != 8192 || p.ReplayContext() != 8192:
				t.Errorf("context %d (replayed at %d), the runtime ran at 8192", p.Context, p.ReplayContext())
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
