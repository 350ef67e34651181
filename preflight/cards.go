package preflight

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoNVML means no NVIDIA card can be read here: the driver library is
// missing, or it found no device.
var ErrNoNVML = errors.New("no NVML: no NVIDIA card found")

// NVMLError carries the NVML return code behind ErrNoNVML or a failed read.
type NVMLError struct {
	Op  string
	Ret nvml.Return
}

func (e *NVMLError) Error() string {
	if e.Unwrap() != nil {
		return fmt.Sprintf("%v: nvml %s: %s", ErrNoNVML, e.Op, nvml.ErrorString(e.Ret))
	}
	return fmt.Sprintf("nvml %s: %s", e.Op, nvml.ErrorString(e.Ret))
}

// Unwrap lets errors.Is(err, ErrNoNVML) hold when the library or device is absent.
func (e *NVMLError) Unwrap() error {
	if e.Ret == nvml.ERROR_LIBRARY_NOT_FOUND || e.Ret == nvml.ERROR_DRIVER_NOT_LOADED || e.Ret == nvml.ERROR_NOT_FOUND || e.Ret == nvml.ERROR_NO_PERMISSION {
		return ErrNoNVML
	}
	return nil
}

// Card is a real card as NVML reports it.
type Card struct {
	Index     int           `json:"index"`
	Name      string        `json:"name"`
	UUID      string        `json:"uuid"`
	Total     Size          `json:"total"`
	Free      Size          `json:"free"`
	Used      Size          `json:"used"`
	Processes []CardProcess `json:"processes,omitempty"`
}

// CardProcess is one process's memory on a card.
type CardProcess struct {
	PID  int  `json:"pid"`
	Used Size `json:"used"`
}

// RealCards reads every NVIDIA card through NVML. Without a driver it returns
// an error that satisfies errors.Is(err, ErrNoNVML).
func RealCards(ctx context.Context) ([]Card, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, &NVMLError{Op: "init", Ret: ret}
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, &NVMLError{Op: "device count", Ret: ret}
	}
	if n == 0 {
		return nil, fmt.Errorf("%w (driver loaded, zero devices)", ErrNoNVML)
	}
	cards := make([]Card, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return cards, err
		}
		dev, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return cards, &NVMLError{Op: fmt.Sprintf("device %d", i), Ret: ret}
		}
		c := Card{Index: i}
		c.Name, _ = dev.GetName()
		c.UUID, _ = dev.GetUUID()
		mem, ret := dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return cards, &NVMLError{Op: fmt.Sprintf("device %d memory", i), Ret: ret}
		}
		c.Total, c.Free, c.Used = Size(mem.Total), Size(mem.Free), Size(mem.Used)
		procs, ret := dev.GetComputeRunningProcesses()
		if ret == nvml.SUCCESS {
			for _, p := range procs {
				c.Processes = append(c.Processes, CardProcess{PID: int(p.Pid), Used: Size(p.UsedGpuMemory)})
			}
		}
		cards = append(cards, c)
	}
	return cards, nil
}

// SimulatedCaveat goes beside every table of simulated cards.
const SimulatedCaveat = "A simulated card (memory reservation) reproduces what fits; it does not reproduce a smaller card's bandwidth, compute or spill behaviour."

// ListCards prints the real cards NVML finds (or says plainly that none is)
// and the declared simulated ones. It is `rig cards list`.
func ListCards(ctx context.Context, w io.Writer, declared []Profile) error {
	cards, err := RealCards(ctx)
	switch {
	case errors.Is(err, ErrNoNVML):
		fmt.Fprintf(w, "real cards: none found (%v); only simulated cards can be used on this machine\n", err)
	case err != nil:
		return fmt.Errorf("preflight: list cards: %w", err)
	default:
		fmt.Fprintf(w, "real cards (NVML):\n")
		for _, c := range cards {
			fmt.Fprintf(w, "  [%d] %s  total %s  free %s  used %s  processes %d\n", c.Index, c.Name, c.Total, c.Free, c.Used, len(c.Processes))
			for _, p := range c.Processes {
				fmt.Fprintf(w, "      pid %d uses %s\n", p.PID, p.Used)
			}
		}
	}
	if len(declared) == 0 {
		fmt.Fprintf(w, "simulated cards: none declared\n")
		return nil
	}
	fmt.Fprintf(w, "declared cards:\n")
	fmt.Fprintf(w, "  %-14s %-10s %-9s %-8s %-6s %-8s %-10s %s\n", "name", "card", "kind", "context", "kv", "offload", "host", "slots")
	for _, p := range declared {
		kind := "simulated"
		if !p.Simulated {
			kind = fmt.Sprintf("nvml:%d", p.CardIndex)
		}
		off := "all"
		if p.OffloadLayers != OffloadAll {
			off = fmt.Sprint(p.OffloadLayers)
		}
		host := "-"
		if p.HostMemory > 0 {
			host = p.HostMemory.String()
		}
		fmt.Fprintf(w, "  %-14s %-10s %-9s %-8d %-6s %-8s %-10s %d\n", p.Name, p.CardMemory, kind, p.Context, p.CacheType(), off, host, p.Slots())
	}
	fmt.Fprintf(w, "note: %s\n", SimulatedCaveat)
	return nil
}
