package governor

import (
	"context"
	"maps"
	"sync"
	"time"
)

// Simulated is a sensor whose readings are set by hand or by a script. It is
// the fault-injection tool: it can stand in for any real sensor (same name,
// same value keys), return errors, or go stale by repeating an old timestamp.
type Simulated struct {
	name string

	mu      sync.Mutex
	values  map[string]float64
	err     error
	frozen  bool
	last    time.Time
	script  []Step
	reads   int
	blocked chan struct{}
}

// Step is one scripted reading: the values it changes, an error to return,
// or Stale to repeat the previous timestamp. Steps are consumed one per Read;
// after the last one the sensor keeps the state it left.
type Step struct {
	Set   map[string]float64 `json:"set,omitempty"`
	Err   error              `json:"-"`
	Stale bool               `json:"stale,omitempty"`
}

// NewSimulated returns a sensor named name that reads initial until changed.
func NewSimulated(name string, initial map[string]float64) *Simulated {
	return &Simulated{name: name, values: maps.Clone(initial)}
}

// Name implements Sensor.
func (s *Simulated) Name() string { return s.name }

// Set changes one value for every later read.
func (s *Simulated) Set(key string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]float64{}
	}
	s.values[key] = v
}

// Fail makes every later read return err until Heal.
func (s *Simulated) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Freeze makes later reads repeat the last timestamp, as a sensor
// whose source stopped updating would.
func (s *Simulated) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = true
}

// Block makes later reads wait until ctx ends, as a hung driver call would.
func (s *Simulated) Block() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blocked == nil {
		s.blocked = make(chan struct{})
	}
}

// Heal clears Fail, Freeze and Block.
func (s *Simulated) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = nil
	s.frozen = false
	if s.blocked != nil {
		close(s.blocked)
		s.blocked = nil
	}
}

// Script queues steps, one consumed per Read.
func (s *Simulated) Script(steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, steps...)
}

// Reads returns how many times Read was called.
func (s *Simulated) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// Read implements Sensor.
func (s *Simulated) Read(ctx context.Context) (Reading, error) {
	s.mu.Lock()
	s.reads++
	if s.blocked != nil {
		ch := s.blocked
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return Reading{}, ctx.Err()
		case <-ch:
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	stale := s.frozen
	err := s.err
	if len(s.script) > 0 {
		st := s.script[0]
		s.script = s.script[1:]
		for k, v := range st.Set {
			s.values[k] = v
		}
		if st.Err != nil {
			err = st.Err
		}
		stale = stale || st.Stale
	}
	if err != nil {
		return Reading{}, err
	}
	if !stale || s.last.IsZero() {
		s.last = time.Now()
	}
	return Reading{Sensor: s.name, At: s.last, Values: maps.Clone(s.values)}, nil
}

// EnergyJoules implements EnergyCounter when the simulated values carry
// KeyEnergyJ, so fault injection and tests drive the same energy path a
// card's counter does.
func (s *Simulated) EnergyJoules() (float64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.values[KeyEnergyJ]
	return v, ok
}

// SimulatedGPU is a simulated card sensor reading as a healthy 24 GiB card
// (its energy counter included): what a worker's fault injection and the
// energy path's tests put where NVML would be.
func SimulatedGPU() *Simulated { return NewSimulated("gpu", normalGPU()) }

// Normal readings of a healthy 24 GiB card and host, used as the baseline
// the simulated classes depart from.
func normalGPU() map[string]float64 {
	return map[string]float64{
		KeyTempC: 62, KeyTempSlowdownC: 87, KeyTempShutdownC: 92,
		KeyPowerW: 180, KeyPowerLimitW: 300, KeyEnergyJ: 1e6,
		KeyCardMemBytes: 3 << 30, KeyCardTotalBytes: 24 << 30,
		KeyClockEvents: 0, KeyThermalThrottle: 0, KeyXIDEvents: 0, KeyXIDLast: 0, KeyDBEEvents: 0,
	}
}

// SimulatedHost is a simulated host sensor reading as a healthy host with
// room in memory and on disk: the baseline the fault suite's host classes
// depart from.
func SimulatedHost() *Simulated { return NewSimulated("host", normalHost()) }

func normalHost() map[string]float64 {
	return map[string]float64{KeyMemUsedFrac: 0.4, KeyMemAvailBytes: 8 << 30, KeyCPUPercent: 30, KeyLoad1: 1,
		KeyDiskFreeBytes: 50 << 30, KeyDiskFreeFrac: 0.5}
}
