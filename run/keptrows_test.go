package run

import (
	"context"
	"strings"
	"testing"

	"rig/genrecord"
	"rig/receipts"
	"rig/runtimes"
	"rig/studies"
)

// A process killed after it kept a call's rows and before it stored the
// receipt leaves rows with no receipt. The next try of that trial must not
// write them again under the same call id: the attempt gets a preempted
// (uncounted) receipt saying it was lost, and the trial runs as the next
// attempt. A trial with no kept rows keeps its attempt. (No runtime: the
// record is written here as the runner writes it.)
func TestKeptRowsWithoutReceiptAreSkipped(t *testing.T) {
	ctx := context.Background()
	d, plan := stopDesign(studies.StopAnytime, 2)
	for i := range d.Arms {
		d.Arms[i].Runtime = studies.Runtime("llama-server")
	}
	x, st := stopExecution(t, d, plan)
	x.recDir, x.snap, x.writers = t.TempDir(), &studies.Snapshot{DesignHash: "h"}, map[string]*genrecord.Writer{}
	rp := runtimes.Pins{ModelSHA256: strings.Repeat("a", 64), ModelName: "m", Machine: runtimes.ReadMachine(),
		Stack: runtimes.Stack{Runtime: "llama-server", RuntimeVersion: "b1", BinarySHA256: strings.Repeat("b", 64), Libraries: map[string]string{}}}
	lost, fresh := plan.Trials[0].Key, plan.Trials[1].Key
	sink := storeSink{x}
	if a, p, err := x.skipKeptAttempts(ctx, sink, d.Arms[0], lost, rp, 1, 0); err != nil || a != 1 || p != 0 {
		t.Fatalf("with no record yet: attempt %d (parent %d), %v; want 1 and 0", a, p, err)
	}
	w, err := x.writer(lost.Arm, rp)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(genrecord.Row{RowID: lost.CallID(1), Arm: lost.Arm, Prompt: lost.String(), Role: genrecord.RoleCandidate,
		RenderedPrompt: "p", K: 1, Output: []genrecord.Step{}, StopReason: genrecord.StopLength, Text: "kept"}); err != nil {
		t.Fatal(err)
	}
	a, p, err := x.skipKeptAttempts(ctx, sink, d.Arms[0], lost, rp, 1, 0)
	if err != nil || a != 2 || p != 1 {
		t.Fatalf("with attempt 1's rows kept: attempt %d (parent %d), %v; want 2 rerunning 1", a, p, err)
	}
	if a, p, err := x.skipKeptAttempts(ctx, sink, d.Arms[0], fresh, rp, 1, 0); err != nil || a != 1 || p != 0 {
		t.Fatalf("a trial with no kept rows: attempt %d (parent %d), %v; want 1 and 0", a, p, err)
	}
	rs, err := st.Receipts(ctx, x.exec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Trial() != receiptTrial(lost) || rs[0].Attempt != 1 || rs[0].Outcome != receipts.Preempted || rs[0].Outcome.Counted() || !strings.Contains(rs[0].Detail, "lost") {
		t.Fatalf("receipts %+v; want one uncounted preempted receipt of %s attempt 1 saying it was lost", rs, lost)
	}
}
