package main

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"rig/scaleout"
)

// mostTrialsInFlight is, per task queue, the most trials exec-1 of study
// had in flight at once on the engine at addr, from its first chunk's
// history (a plan of under scaleout.DefaultChunk trials is one chunk).
func mostTrialsInFlight(t *testing.T, addr, spool, study string) map[string]int {
	t.Helper()
	ctx := context.Background()
	cl, err := scaleout.Config{Address: addr, Spool: spool}.Dial(ctx, "test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	most, err := scaleout.MostTrialsInFlight(ctx, cl, scaleout.WorkflowID(study, "exec-1")+"/chunk-0")
	if err != nil {
		t.Fatal(err)
	}
	return most
}
