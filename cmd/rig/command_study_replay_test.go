package main

import (
	"strings"
	"testing"

	"rig/api"
)

// study replay sends its sample's flags, prints a line per replayed trial,
// and fails, counting them, when any did not reproduce.
func TestStudyReplay(t *testing.T) {
	fd := newFakeDaemon(t)
	fd.answer(api.MethodEngineReplay, []api.ReplayResult{
		{Key: "gemma/t1/r0", Attempt: 1, Worker: "gpu07", Queue: "rig.trials.llama-server.b6500.cpu", Status: api.ReplayReproduced, Replayed: 4, Reproduced: 4},
		{Key: "gemma/t2/r0", Attempt: 2, Worker: "gpu08", Queue: "rig.trials.llama-server.b6500.cpu", Status: "mismatch", Replayed: 4, Reproduced: 3, MaxAbsDiff: 0.25},
	})
	out, err := runRig(t, "study", "replay", "s1", "--execution", "exec-3", "--per-arm", "1", "--seed", "9", "--socket", fd.socket)
	if err == nil || err.Error() != "1 of 2 replayed trials did not reproduce" {
		t.Errorf("replay with a mismatch = %v", err)
	}
	var req api.EngineReplayRequest
	fd.request(t, api.MethodEngineReplay, &req)
	if req.Study != "s1" || req.Execution != "exec-3" || req.PerArm != 1 || req.Seed != 9 {
		t.Errorf("replay sent %+v", req)
	}
	for _, want := range []string{"gemma/t1/r0", "attempt 1 on gpu07 via rig.trials.llama-server.b6500.cpu: " + api.ReplayReproduced + " (4/4 rows reproduced",
		"attempt 2 on gpu08 via rig.trials.llama-server.b6500.cpu: mismatch (3/4 rows reproduced, max |Δ| 0.25)"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay printed no %q:\n%s", want, out)
		}
	}

	fd.answer(api.MethodEngineReplay, []api.ReplayResult{{Key: "gemma/t1/r0", Status: api.ReplayReproduced, Replayed: 4, Reproduced: 4}})
	if _, err := runRig(t, "study", "replay", "s1", "--socket", fd.socket); err != nil {
		t.Errorf("replay where every trial reproduced = %v", err)
	}
	req = api.EngineReplayRequest{}
	fd.request(t, api.MethodEngineReplay, &req)
	if req.PerArm != 2 || req.Seed != 1 || req.Execution != "" {
		t.Errorf("replay's defaults sent %+v; want 2 per arm, seed 1, the latest execution", req)
	}
}
