package run

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"rig/analysis"
	"rig/receipts"
	"rig/studies"
)

// The engine's look (StopLook over the counted receipts, from the start)
// is the local runner's: on the same receipts it stops at the same block,
// with the same statistics, boundaries and not-run trials as the look the
// local loop stored; through a block before that it does not stop.
func TestStopLookIsTheLocalRunnersLook(t *testing.T) {
	for _, method := range []string{studies.StopAnytime, studies.StopGroupSequential} {
		d, plan := stopDesign(method, 40)
		x, st := stopExecution(t, d, plan)
		candWins := func(k studies.TrialKey) bool { return k.Arm == "cand" }
		counted := map[receipts.TrialKey]receipts.Receipt{}
		at := walk(t, x, plan, candWins, counted)
		if at < 0 {
			t.Fatalf("%s: the local runner never stopped; the test needs a stop", method)
		}
		raw, found, err := st.Stop(context.Background(), "exec-1")
		if err != nil || !found {
			t.Fatalf("%s: no stored look (%v)", method, err)
		}
		var local analysis.Sequential
		if err := json.Unmarshal(raw, &local); err != nil {
			t.Fatal(err)
		}
		// The engine's trials of later blocks have not run: only the
		// receipts through the stop are counted.
		upTo := map[receipts.TrialKey]receipts.Receipt{}
		for _, tr := range plan.Trials[:at+1] {
			upTo[receiptTrial(tr.Key)] = counted[receiptTrial(tr.Key)]
		}
		seq, ruled, err := StopLook(d, plan, upTo, at)
		if err != nil || !ruled {
			t.Fatalf("%s: StopLook: ruled %v, %v", method, ruled, err)
		}
		got, _ := json.Marshal(seq)
		want, _ := json.Marshal(local)
		if !seq.StoppedEarly || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the engine's look differs from the local runner's:\nengine %s\nlocal  %s", method, got, want)
		}
		if at > 15 {
			before, _, err := StopLook(d, plan, upTo, 15)
			if err != nil || before.StoppedEarly {
				t.Fatalf("%s: through the first block (the local stop was at %d): stopped %v, %v", method, at, before.StoppedEarly, err)
			}
		}
		t.Logf("%s: both stop after trial %d: %s", method, at, DescribeStop(seq))
	}
	if ruled, err := CheckStopping(&studies.Design{}, &studies.Plan{}); ruled || err != nil {
		t.Fatalf("a design without stopping: ruled %v, %v", ruled, err)
	}
}
