package governor

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVML value keys. Temperatures in °C, power in W, energy in J, memory in
// bytes; counters (xid_events, dbe_events) count since the sensor opened.
const (
	KeyTempC           = "temp_c"
	KeyTempSlowdownC   = "temp_slowdown_c"
	KeyTempShutdownC   = "temp_shutdown_c"
	KeyPowerW          = "power_w"
	KeyPowerLimitW     = "power_limit_w"
	KeyEnergyJ         = "energy_j"
	KeyCardMemBytes    = "card_mem_bytes"
	KeyCardTotalBytes  = "card_total_bytes"
	KeyClockEvents     = "clock_event_reasons"
	KeyThermalThrottle = "thermal_throttle"
	KeyXIDEvents       = "xid_events"
	KeyXIDLast         = "xid_last"
	KeyDBEEvents       = "dbe_events"
	KeyECCUncorrected  = "ecc_uncorrected"
)

// NVML reads one GPU through the driver's NVML library. Critical events (XID,
// double-bit ECC) come through an event set that every Read drains without
// waiting, so a burst between polls is counted, not lost.
type NVML struct {
	name string
	lib  nvml.Interface
	dev  nvml.Device
	set  nvml.EventSet

	mu   sync.Mutex
	pids map[uint32]bool
	xid  float64
	xidL float64
	dbe  float64
}

// OpenNVML initialises NVML and opens GPU index. Without a driver or a GPU
// it returns an *AbsentError (errors.Is ErrAbsent); callers then run the
// GPU policies on simulated sensors and say so.
func OpenNVML(ctx context.Context, index int) (*NVML, error) {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, &AbsentError{Sensor: "gpu", Reason: "NVML init: " + lib.ErrorString(ret)}
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS || index >= n {
		_ = lib.Shutdown()
		return nil, &AbsentError{Sensor: "gpu", Reason: fmt.Sprintf("no GPU at index %d (%d visible)", index, n)}
	}
	dev, ret := lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		_ = lib.Shutdown()
		return nil, &AbsentError{Sensor: "gpu", Reason: "device handle: " + lib.ErrorString(ret)}
	}
	s := &NVML{name: "gpu", lib: lib, dev: dev}
	if set, ret := lib.EventSetCreate(); ret == nvml.SUCCESS {
		// Some boards do not support every event type; register what they
		// do and keep polling the rest.
		if dev.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set) == nvml.SUCCESS ||
			dev.RegisterEvents(nvml.EventTypeXidCriticalError, set) == nvml.SUCCESS {
			s.set = set
		} else {
			_ = set.Free()
		}
	}
	return s, nil
}

// Name implements Sensor.
func (s *NVML) Name() string { return s.name }

// Track sets the processes whose card memory counts as the trial's; with
// none tracked the whole card's used memory is reported.
func (s *NVML) Track(pids ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pids = map[uint32]bool{}
	for _, p := range pids {
		s.pids[uint32(p)] = true
	}
}

// Close frees the event set and shuts NVML down.
func (s *NVML) Close() error {
	if s.set != nil {
		_ = s.set.Free()
	}
	if ret := s.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %s", s.lib.ErrorString(ret))
	}
	return nil
}

// Read implements Sensor.
func (s *NVML) Read(ctx context.Context) (Reading, error) {
	if err := ctx.Err(); err != nil {
		return Reading{}, err
	}
	v := map[string]float64{}
	must := func(what string, ret nvml.Return) error {
		if ret != nvml.SUCCESS {
			return fmt.Errorf("nvml %s: %s", what, s.lib.ErrorString(ret))
		}
		return nil
	}
	t, ret := s.dev.GetTemperature(nvml.TEMPERATURE_GPU)
	if err := must("temperature", ret); err != nil {
		return Reading{}, err
	}
	v[KeyTempC] = float64(t)
	if th, ret := s.dev.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SLOWDOWN); ret == nvml.SUCCESS {
		v[KeyTempSlowdownC] = float64(th)
	}
	if th, ret := s.dev.GetTemperatureThreshold(nvml.TEMPERATURE_THRESHOLD_SHUTDOWN); ret == nvml.SUCCESS {
		v[KeyTempShutdownC] = float64(th)
	}
	p, ret := s.dev.GetPowerUsage()
	if err := must("power", ret); err != nil {
		return Reading{}, err
	}
	v[KeyPowerW] = float64(p) / 1000
	if l, ret := s.dev.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
		v[KeyPowerLimitW] = float64(l) / 1000
	}
	if e, ret := s.dev.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
		v[KeyEnergyJ] = float64(e) / 1000
	}
	mem, ret := s.dev.GetMemoryInfo()
	if err := must("memory", ret); err != nil {
		return Reading{}, err
	}
	v[KeyCardTotalBytes] = float64(mem.Total)
	v[KeyCardMemBytes] = s.trackedMemBytes(mem)
	if r, ret := s.dev.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
		v[KeyClockEvents] = float64(r)
		const thermal = uint64(nvml.ClocksEventReasonSwThermalSlowdown) | uint64(nvml.ClocksThrottleReasonHwThermalSlowdown)
		if r&thermal != 0 {
			v[KeyThermalThrottle] = 1
		} else {
			v[KeyThermalThrottle] = 0
		}
	}
	// Polled as well as evented: boards without ECC events still count
	// uncorrected errors since the driver loaded.
	if n, ret := s.dev.GetTotalEccErrors(nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC); ret == nvml.SUCCESS {
		v[KeyECCUncorrected] = float64(n)
	}
	s.drainEvents()
	s.mu.Lock()
	v[KeyXIDEvents], v[KeyXIDLast], v[KeyDBEEvents] = s.xid, s.xidL, s.dbe
	s.mu.Unlock()
	return Reading{Sensor: s.name, At: time.Now(), Values: v}, nil
}

// trackedMemBytes is the card memory the tracked processes use, or, with
// none tracked, the whole card's use (mem.Used).
func (s *NVML) trackedMemBytes(mem nvml.Memory) float64 {
	s.mu.Lock()
	tracked := len(s.pids) > 0
	pids := s.pids
	s.mu.Unlock()
	if !tracked {
		return float64(mem.Used)
	}
	// A board that cannot list its processes reads as the whole card.
	procs, _ := s.dev.GetComputeRunningProcesses()
	var sum uint64
	found := false
	for _, pr := range procs {
		// All ones is NVML's "not available" (a board or mode that
		// does not account per process): it is no reading.
		if pids[pr.Pid] && pr.UsedGpuMemory != math.MaxUint64 {
			sum += pr.UsedGpuMemory
			found = true
		}
	}
	if !found {
		// None of the tracked processes is on NVML's list (another pid
		// namespace, an unaccounted board): the whole card's use is the
		// safe reading, never a zero the budget cannot see past.
		sum = mem.Used
	}
	return float64(sum)
}

func (s *NVML) drainEvents() {
	if s.set == nil {
		return
	}
	for range 64 {
		ev, ret := s.set.Wait(0)
		if ret != nvml.SUCCESS {
			return
		}
		s.mu.Lock()
		switch ev.EventType {
		case nvml.EventTypeXidCriticalError:
			s.xid++
			s.xidL = float64(ev.EventData)
		case nvml.EventTypeDoubleBitEccError:
			s.dbe++
		}
		s.mu.Unlock()
	}
}

// DeviceName is the card's model name as the driver reports it (e.g.
// "NVIDIA H200"), empty when the driver does not say.
func (s *NVML) DeviceName() string {
	name, ret := s.dev.GetName()
	if ret != nvml.SUCCESS {
		return ""
	}
	return name
}

// EnergyCounter is a card's cumulative energy counter. A trial's energy is
// the difference of two readings taken after the model loaded, so it leaves
// the load out and is a measurement, not an estimate.
type EnergyCounter interface {
	// EnergyJoules is the counter now; ok is false on a card without one.
	EnergyJoules() (joules float64, ok bool)
}

// EnergyJoules implements EnergyCounter from the driver's total energy
// counter (millijoules since the driver loaded; Volta and later).
func (s *NVML) EnergyJoules() (float64, bool) {
	e, ret := s.dev.GetTotalEnergyConsumption()
	if ret != nvml.SUCCESS {
		return 0, false
	}
	return float64(e) / 1000, true
}
