package preflight_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"rig/internal/cgroup"
	"rig/internal/gguf"
	"rig/internal/provision"
	"rig/internal/testenv"
	"rig/preflight"
	"rig/runtimes"
)

// trialRun is what one start of Ollama, as a study's trial starts it, reads
// in its reservation.
type trialRun struct {
	peak  preflight.Size // the trial's peak as its receipt records it: the call's window, opened after the start
	anon  preflight.Size // the group's anonymous memory after the call (memory.stat rss or anon)
	cache preflight.Size // the group's page cache after the call
	ooms  uint64
	err   error // the start's or the call's
}

// trialPrompt is an extract-json task's length: the study tests' trials.
const trialPrompt = "Turn this note into a JSON record with the keys name, date and amount: Alice paid 42 dollars to the bakery on 3 March."

// runOllamaTrial starts Ollama on model m at context ctxLen in a fresh
// reservation of limit bytes exactly as run/trial.go does (the launcher's own
// model store in the work directory, the runtime's default threads), opens a
// peak window as the trial does before its call, makes one chat call with a
// study's stop cap, and reads the group.
func runOllamaTrial(t *testing.T, in provision.Installed, m provision.Model, ctxLen int, limit preflight.Size) trialRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := cgroup.Reserve(ctx, uint64(limit))
	testenv.NeedsSetup(t, "a writable memory cgroup", err)
	defer res.Close()
	cfg := runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: ctxLen,
		WorkDir: t.TempDir(), CgroupDir: res.Dir()}
	var r trialRun
	rt, err := runtimes.Launch(ctx, in, preflight.RuntimeOllama, cfg)
	if err == nil {
		defer rt.Stop(context.Background())
		_ = res.ResetPeak()
		var out runtimes.Result
		out, err = rt.Generate(ctx, runtimes.Request{CallID: "preflight-trial",
			Messages: []runtimes.Message{{Role: "user", Content: trialPrompt}},
			Sampling: runtimes.Sampling{TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 42}, MaxTokens: 96})
		if p, perr := res.Peak(); perr == nil {
			r.peak = preflight.Size(max(int64(p), out.PeakMemory))
		}
	}
	r.err = err
	if o, oerr := res.OOM(); oerr == nil {
		r.ooms = o.Kills
	}
	r.anon, r.cache = groupStat(res.Dir())
	return r
}

// groupStat reads the anonymous memory and page cache of a group, v1 or v2.
func groupStat(dir string) (anon, cache preflight.Size) {
	b, _ := os.ReadFile(filepath.Join(dir, "memory.stat"))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseUint(f[1], 10, 64)
		switch f[0] {
		case "rss", "anon":
			anon = preflight.Size(v)
		case "cache", "file":
			cache = preflight.Size(v)
		}
	}
	return anon, cache
}

// predictTrial predicts m's run on Ollama at ctxLen at a simulated card, as
// rig study preflight does for an arm.
func predictTrial(t *testing.T, path string, ctxLen int) preflight.Estimate {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := preflight.DefaultCalibration()
	if err != nil {
		t.Fatal(err)
	}
	p := preflight.Profile{Name: "simulated-8gib", CardMemory: 8 * preflight.GiB, Context: ctxLen, KVType: "f16",
		OffloadLayers: preflight.OffloadAll, Parallel: 1, Simulated: true}
	e, err := preflight.Predict(f, p, preflight.RuntimeOllama, cal)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestOllamaTrialWithinItsBound starts Ollama on the Q8_0 SmolLM2 at a
// context other than the demo design's, as a study's trial starts it, and
// holds the preflight to its printed bound twice: a reservation with room
// reads the predicted peak (the need and Ollama's copy of the model file)
// within the calibration's error, and a reservation of the predicted need
// plus that error holds the run with no OOM kill.
func TestOllamaTrialWithinItsBound(t *testing.T) {
	testenv.Long(t, "starts Ollama twice with a real model")
	in, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes and models", err)
	_, err = runtimes.BuildOf(in, preflight.RuntimeOllama)
	testenv.NeedsSetup(t, "Ollama", err)
	m, ok := in.OtherQuants["smollm2-135m-instruct"]
	if !ok || m.Path == "" {
		testenv.NeedsSetup(t, "SmolLM2's Q8_0 requantization", os.ErrNotExist)
	}
	const ctxLen = 1024
	e := predictTrial(t, m.Path, ctxLen)
	if e.ModelCopy == 0 || e.ReservationPeak() <= e.Peak {
		t.Fatalf("the estimate counts no copy of the model file for Ollama: %+v", e)
	}

	roomy := runOllamaTrial(t, in, m, ctxLen, 8*preflight.GiB)
	if roomy.err != nil {
		t.Fatalf("Ollama at context %d in 8GiB: %v", ctxLen, roomy.err)
	}
	rel := (float64(e.ReservationPeak()) - float64(roomy.peak)) / float64(roomy.peak)
	t.Logf("Q8_0 at %d: measured %s (anon %s, page cache %s); rig needs %s + model copy %s = %s (%+.1f%%, bound %.0f%%)",
		ctxLen, roomy.peak, roomy.anon, roomy.cache, e.Peak, e.ModelCopy, e.ReservationPeak(), 100*rel, 100*e.RelError)
	if math.Abs(rel) > e.RelError {
		t.Errorf("the trial's peak %s is %+.1f%% from rig's %s, past the printed bound of %.0f%%", roomy.peak, 100*rel, e.ReservationPeak(), 100*e.RelError)
	}

	tight := preflight.Size(math.Ceil(float64(e.Card)*(1+e.RelError)/float64(preflight.MiB))) * preflight.MiB
	held := runOllamaTrial(t, in, m, ctxLen, tight)
	if held.err != nil || held.ooms > 0 {
		t.Errorf("a reservation of rig's need plus its bound (%s) did not hold the run: %v (OOM kills %d, peak %s)", tight, held.err, held.ooms, held.peak)
	}
}
