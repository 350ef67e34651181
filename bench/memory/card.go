package memory

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"rig/governor"
	"rig/internal/gguf"
	"rig/internal/offload"
	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
)

// CardOptions is `rig bench preflight --device cuda`: the card-memory
// measurement on a real NVIDIA card.
type CardOptions struct {
	Installed provision.Installed
	Models    []provision.Model // default: every provisioned model
	Contexts  []int             // default 2048, 8192, 32768
	KVTypes   []string          // default f16, q8_0
	Card      int               // NVML index
	// Calibration is the one the predictions use; nil = the committed
	// table, which has no CUDA entry yet: rig's column then shows the CPU
	// constants' arithmetic plus no context overhead, labelled uncalibrated.
	Calibration *preflight.Calibration
	NoSandbox   bool
	RunTimeout  time.Duration // per run; default 8 minutes
}

// CardRow is one measured configuration on the card.
type CardRow struct {
	Model   string `json:"model"`
	Context int    `json:"context"`
	KV      string `json:"kv"`
	// Measured is the runtime's process tree's card memory (NVML, per
	// process) after one completion; Logged is the sum of the CUDA buffers
	// the runtime logged; the difference is what CUDA itself holds (the
	// context, cuBLAS), the constant a CUDA calibration fits.
	Measured   preflight.Size      `json:"measured_card"`
	Logged     preflight.Size      `json:"logged_card_buffers"`
	Rig        preflight.Size      `json:"rig"`
	RigErr     float64             `json:"rig_error"`
	Calibrated bool                `json:"calibrated"`
	Load       runtimes.LoadReport `json:"load_report"`
	Err        string              `json:"error,omitempty"`
}

// ErrNoCard means the card measurement has no card to measure on.
var ErrNoCard = errors.New("no NVIDIA card")

// RunCard measures card memory on a real card, side by side with rig's
// prediction, and prints the table. Without a card or without the CUDA
// build it fails at once, saying which.
func RunCard(ctx context.Context, w io.Writer, o CardOptions) ([]CardRow, error) {
	nv, err := governor.OpenNVML(ctx, o.Card)
	if err != nil {
		return nil, fmt.Errorf("bench preflight --device cuda: %w: %v (this measures per-process card memory through NVML, so it runs on a machine with its card; scripts/gpu-check.sh runs it there)", ErrNoCard, err)
	}
	defer nv.Close()
	build, err := runtimes.BuildOf(o.Installed, offload.ComponentLlamaServerCUDA)
	if err != nil {
		return nil, fmt.Errorf("bench preflight --device cuda: %w", err)
	}
	cal := o.Calibration
	if cal == nil {
		if cal, err = preflight.DefaultCalibration(); err != nil {
			return nil, err
		}
	}
	models, contexts, kvs := grid(o.Installed, o.Models, o.Contexts, o.KVTypes)
	if len(models) == 0 {
		return nil, fmt.Errorf("bench preflight --device cuda: no model to measure (give --model FILE, or run make setup)")
	}
	timeout := o.RunTimeout
	if timeout == 0 {
		timeout = 8 * time.Minute
	}
	fmt.Fprintf(w, "card: %s\n", nv.DeviceName())
	var rows []CardRow
	for _, m := range models {
		for _, c := range contexts {
			for _, kv := range kvs {
				r := measureCard(ctx, nv, build, cal, m, c, kv, o.NoSandbox, timeout)
				rows = append(rows, r)
				fmt.Fprintf(w, "  %s ctx %d kv %s: measured %s, logged buffers %s, rig %s%s\n", r.Model, r.Context, r.KV, r.Measured, r.Logged, r.Rig, errNote(r.Err))
			}
		}
	}
	printCardTable(w, rows)
	measured := 0
	for _, r := range rows {
		if r.Err == "" {
			measured++
		}
	}
	if measured == 0 {
		return rows, fmt.Errorf("bench preflight --device cuda: no configuration was measured (%d failed; the table says why)", len(rows))
	}
	return rows, nil
}

func errNote(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

func measureCard(ctx context.Context, nv *governor.NVML, build runtimes.Build, cal *preflight.Calibration, m provision.Model, contextLen int, kv string, noSandbox bool, timeout time.Duration) CardRow {
	r := CardRow{Model: m.Name, Context: contextLen, KV: kv}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := preflight.Profile{Name: fmt.Sprintf("card-%d-%s", contextLen, kv), CardMemory: 1 << 40, Context: contextLen, KVType: kv,
		OffloadLayers: preflight.OffloadAll, Parallel: 1, Backend: offload.BackendCUDA}
	if f, err := gguf.Open(m.Path); err == nil {
		e, err := preflight.Predict(f, p, preflight.RuntimeLlamaServer, cal)
		if errors.Is(err, preflight.ErrUncalibrated) {
			// No CUDA constants yet: the CPU ones' split, so the table still
			// shows how far the uncalibrated arithmetic is off.
			p.Backend = ""
			p.Simulated = false
			e, err = preflight.Predict(f, p, preflight.RuntimeLlamaServer, cal)
		} else {
			r.Calibrated = err == nil
		}
		if err == nil {
			r.Rig = e.Card
		}
	}
	work, err := os.MkdirTemp("", "rig-bench-card-")
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer os.RemoveAll(work)
	rt, err := build.Start(ctx, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: contextLen,
		KVCacheType: kv, WorkDir: work, NoSandbox: noSandbox,
		Offload: offload.Pin{Backend: offload.BackendCUDA, GPULayers: offload.AllLayers}})
	if err != nil {
		r.Err = err.Error()
		return r
	}
	defer rt.Stop(context.Background())
	if _, err := rt.Generate(ctx, runtimes.Request{CallID: "bench-card", Messages: []runtimes.Message{{Role: "user", Content: "Count from one to twenty."}},
		Sampling: runtimes.Sampling{Temperature: 0, Seed: 1}, MaxTokens: 32}); err != nil {
		r.Err = err.Error()
		return r
	}
	nv.Track(runtimes.ProcessTree(rt.Sandbox().RuntimePID)...)
	defer nv.Track()
	rd, err := nv.Read(ctx)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Measured = preflight.Size(rd.Values[governor.KeyCardMemBytes])
	if rep := rt.Pins().Load; rep != nil {
		r.Load = *rep
		card, _ := rep.CardBytes()
		r.Logged = preflight.Size(card)
	}
	r.RigErr = relErr(r.Rig, r.Measured)
	return r
}

func printCardTable(w io.Writer, rows []CardRow) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tCTX\tKV\tMEASURED (NVML)\tLOGGED BUFFERS\tCUDA'S OWN\tRIG\tRIG ERROR\tCALIBRATED")
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(tw, "%s\t%d\t%s\tfailed: %s\n", r.Model, r.Context, r.KV, strings.SplitN(r.Err, "\n", 2)[0])
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%+.1f%%\t%v\n", r.Model, r.Context, r.KV, r.Measured, r.Logged,
			preflight.Size(max(0, int64(r.Measured)-int64(r.Logged))), r.Rig, 100*r.RigErr, r.Calibrated)
	}
	tw.Flush()
}
