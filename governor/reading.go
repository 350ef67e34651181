package governor

import (
	"context"
	"time"
)

// Reading is one sample from a sensor: named numeric values taken at one
// moment. Values are plain float64 so policies can compare any of them
// without knowing the sensor type.
type Reading struct {
	Sensor string             `json:"sensor"`
	At     time.Time          `json:"at"`
	Values map[string]float64 `json:"values"`
}

// Value returns the named value and whether the reading holds it.
func (r Reading) Value(key string) (float64, bool) {
	v, ok := r.Values[key]
	return v, ok
}

// Sensor is anything the governor can poll. Read must honour ctx; a sensor
// that cannot produce a fresh sample returns an error rather than an old one,
// except a deliberately stale Simulated sensor, whose old timestamp is the
// fault being injected.
type Sensor interface {
	Name() string
	Read(ctx context.Context) (Reading, error)
}
