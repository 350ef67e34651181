package runtimes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"rig/bench/memory"
	"rig/internal/cgroup"
	"rig/internal/provision"
	"rig/preflight"
	"rig/runtimes"
)

// TestStackIsByteIdenticalOnEveryPath starts the real provisioned build of
// each runtime the three ways rig starts one (a trial's arm, a replay, a
// preflight bench row), each with the config that path uses, and checks the
// runtime's pins come out byte for byte the same: they may depend on the
// build alone, never on the path, context, KV type, card or work directory.
func TestStackIsByteIdenticalOnEveryPath(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts the real llama-server and Ollama three times each")
	}
	in, err := provision.Load()
	if err != nil {
		t.Skipf("the real runtimes are not provisioned here (run make setup): %v", err)
	}
	m, err := in.Model("smollm2-135m-instruct")
	if err != nil {
		t.Skipf("run make setup: %v", err)
	}
	ctx := context.Background()
	for _, kind := range []string{"llama-server", "ollama"} {
		t.Run(kind, func(t *testing.T) {
			b, err := runtimes.BuildOf(in, kind)
			if err != nil {
				t.Skipf("run make setup: %v", err)
			}
			stacks := map[string]runtimes.Stack{}

			// A trial: the arm's build, checked against the digest frozen
			// at registration, started at the arm's pins.
			trial, err := b.Start(ctx, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 2048, WorkDir: t.TempDir()})
			if err != nil {
				t.Fatalf("trial path: %v", err)
			}
			stacks["trial"] = trial.Pins().Stack
			trial.Stop(ctx)

			// A replay: the record's runtime, launched from what is
			// provisioned, at replay's own context.
			replay, err := runtimes.Launch(ctx, in, kind, runtimes.Config{Model: m.Path, ModelName: m.Name, ModelSHA256: m.SHA256, Context: 4096, WorkDir: t.TempDir()})
			if err != nil {
				t.Fatalf("replay path: %v", err)
			}
			stacks["replay"] = replay.Pins().Stack
			replay.Stop(ctx)

			// A bench row: in a memory reservation, another KV type,
			// llama-server's verbose log, Ollama's shared store.
			row, err := memory.Measure(ctx, memory.Options{Installed: in, Limit: 2 * preflight.GiB, RunTimeout: 5 * time.Minute}, kind, m, 1024, "q8_0")
			if errors.Is(err, cgroup.ErrNoCgroup) {
				t.Skipf("the bench path needs a writable memory cgroup: %v", err)
			}
			if err != nil {
				t.Fatalf("bench path: %v", err)
			}
			stacks["bench"] = row.Stack

			want, _ := json.Marshal(stacks["trial"])
			for _, path := range []string{"replay", "bench"} {
				got, _ := json.Marshal(stacks[path])
				if string(got) != string(want) {
					t.Errorf("%s's stack differs from the trial's: %s", path, stackDiff(stacks["trial"], stacks[path]))
				}
			}
			s := stacks["trial"]
			if s.Runtime != kind || s.BinarySHA256 != b.BinarySHA256 || s.BuildFlags != b.BuildFlags || s.RuntimeVersion == "" || len(s.Libraries) == 0 {
				t.Errorf("the stack is not the build's: %+v; build %+v", s, b)
			}
			t.Logf("%s %s, binary %s, build flags %q, %d libraries: the same on all three paths", kind, s.RuntimeVersion, s.BinarySHA256[:12], s.BuildFlags, len(s.Libraries))
		})
	}
}

// stackDiff names what differs between two stacks.
func stackDiff(a, b runtimes.Stack) string {
	var out []string
	add := func(field, x, y string) {
		if x != y {
			out = append(out, fmt.Sprintf("%s %q vs %q", field, x, y))
		}
	}
	add("runtime", a.Runtime, b.Runtime)
	add("runtime_version", a.RuntimeVersion, b.RuntimeVersion)
	add("binary_sha256", a.BinarySHA256, b.BinarySHA256)
	add("build_flags", a.BuildFlags, b.BuildFlags)
	libs := slices.Sorted(maps.Keys(a.Libraries))
	for _, k := range slices.Sorted(maps.Keys(b.Libraries)) {
		if !slices.Contains(libs, k) {
			libs = append(libs, k)
		}
	}
	for _, k := range libs {
		add("libraries["+k+"]", a.Libraries[k], b.Libraries[k])
	}
	return fmt.Sprint(out)
}
