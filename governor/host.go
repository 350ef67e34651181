package governor

import (
	"context"
	"fmt"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/shirou/gopsutil/v4/sensors"
)

// Host value keys. Fractions are 0..1, temperatures °C, sizes bytes.
const (
	KeyMemUsedFrac   = "mem_used_frac"
	KeyMemAvailBytes = "mem_available_bytes"
	KeyCPUPercent    = "cpu_percent"
	KeyLoad1         = "load1"
	KeyHostTempMaxC  = "temp_max_c"
	KeyDiskFreeBytes = "disk_free_bytes"
	KeyDiskFreeFrac  = "disk_free_frac"
)

// Host reads the machine through gopsutil: memory, CPU, load, the hottest
// exposed temperature sensor, and free space on the store's filesystem.
type Host struct {
	storeDir string
}

// NewHost returns a host sensor; storeDir is where the study store and the
// records are written, whose filesystem's free space is reported.
func NewHost(storeDir string) *Host { return &Host{storeDir: storeDir} }

// Name implements Sensor.
func (h *Host) Name() string { return "host" }

// Read implements Sensor.
func (h *Host) Read(ctx context.Context) (Reading, error) {
	v := map[string]float64{}
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return Reading{}, fmt.Errorf("host memory: %w", err)
	}
	if vm.Total > 0 {
		v[KeyMemUsedFrac] = 1 - float64(vm.Available)/float64(vm.Total)
	}
	v[KeyMemAvailBytes] = float64(vm.Available)
	// Interval 0 compares with the previous call, so a poll never blocks.
	if pc, err := cpu.PercentWithContext(ctx, 0, false); err == nil && len(pc) == 1 {
		v[KeyCPUPercent] = pc[0]
	}
	if la, err := load.AvgWithContext(ctx); err == nil {
		v[KeyLoad1] = la.Load1
	}
	// Temperatures are exposed on some hosts only; partial results come
	// with a warning error, so use whatever was read.
	if ts, _ := sensors.TemperaturesWithContext(ctx); len(ts) > 0 {
		hi := ts[0].Temperature
		for _, t := range ts[1:] {
			hi = max(hi, t.Temperature)
		}
		v[KeyHostTempMaxC] = hi
	}
	if h.storeDir != "" {
		du, err := disk.UsageWithContext(ctx, h.storeDir)
		if err != nil {
			return Reading{}, fmt.Errorf("disk free of %s: %w", h.storeDir, err)
		}
		v[KeyDiskFreeBytes] = float64(du.Free)
		if du.Total > 0 {
			v[KeyDiskFreeFrac] = float64(du.Free) / float64(du.Total)
		}
	}
	return Reading{Sensor: "host", At: time.Now(), Values: v}, nil
}
