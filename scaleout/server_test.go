package scaleout

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/internal/serverspec"
	"rig/runtimes"
	"rig/studies"
)

// fakeServerInstall writes a stand-in for a generic server's install on
// this worker: an executable file and a venv with one distribution. No
// server runs: the worker's check reads digests only.
func fakeServerInstall(t *testing.T, version string) (exe, venv string) {
	t.Helper()
	dir := t.TempDir()
	exe = filepath.Join(dir, "bin", "python")
	venv = dir
	dist := filepath.Join(dir, "lib", "python3.12", "site-packages", "llama_cpp_python-"+version+".dist-info")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, "METADATA"), []byte("Name: llama_cpp_python\nVersion: "+version+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return exe, venv
}

// serverSnapshot is a snapshot with one openai-server arm whose server was
// frozen as exe and venv are now.
func serverSnapshot(t *testing.T, exe, venv string) *studies.Snapshot {
	t.Helper()
	sum, err := runtimes.FileSHA256(exe)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := serverspec.PythonEnvDigest(venv)
	if err != nil {
		t.Fatal(err)
	}
	return &studies.Snapshot{DesignHash: "h",
		Design: json.RawMessage(`{"name":"s1","arms":[{"name":"lcp","runtime":"openai-server"}]}`),
		Arms:   []studies.FrozenArm{{Name: "lcp", Binaries: []studies.Binary{{Component: serverspec.Kind, Path: exe, SHA256: sum, PythonEnv: venv, EnvSHA256: env}}}}}
}

// TestWorkerTakesAnOpenAIServerArm: a worker started for a study serves
// the queue of its openai-server arm when the frozen server is here, and
// a trial of it passes the worker's stack check (before: "unknown
// runtime").
func TestWorkerTakesAnOpenAIServerArm(t *testing.T) {
	exe, venv := fakeServerInstall(t, "0.3.16")
	snap := serverSnapshot(t, exe, venv)
	spool := t.TempDir()
	if err := publish(spool, "s1", "exec-1", snap, nil); err != nil {
		t.Fatal(err)
	}
	opts := WorkerOptions{Config: Config{Spool: spool}, Study: "s1", Execution: "exec-1", CardClass: "cpu", Log: slog.New(slog.DiscardHandler)}
	sum := snap.Arms[0].Binaries[0].SHA256
	want := Queue(serverspec.Kind, sum, "cpu")
	if qs := serverQueues(opts); len(qs) != 1 || qs[0] != want {
		t.Fatalf("queues %v, want [%s]", qs, want)
	}
	w := &Worker{opts: opts}
	in := TrialInput{Study: "s1", Execution: "exec-1", DesignHash: "h", Key: "lcp/qa/t1/1", Runtime: serverspec.Kind, BinarySHA256: sum, Queue: want}
	if got, err := w.stackSHA256(in); err != nil || got != sum {
		t.Fatalf("stack %q, %v; want %s", got, err, sum)
	}
}

// TestWorkerRefusesAServerThatDiffers: the executable missing, changed, or
// its environment upgraded on the worker is refused naming the pin, and
// the arm's queue is not served.
func TestWorkerRefusesAServerThatDiffers(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(exe, venv string) error
		pin    string
	}{
		{"executable missing", func(exe, _ string) error { return os.Remove(exe) }, "pin server:lcp: the server's executable"},
		{"executable changed", func(exe, _ string) error { return os.WriteFile(exe, []byte("#!/bin/sh\nexit 1\n"), 0o755) }, "pin server:lcp: %s has sha256"},
		{"environment upgraded", func(_, venv string) error {
			// The distribution's METADATA says another version: the digest moves.
			meta := filepath.Join(venv, "lib", "python3.12", "site-packages", "llama_cpp_python-0.3.16.dist-info", "METADATA")
			return os.WriteFile(meta, []byte("Name: llama_cpp_python\nVersion: 0.3.17\n"), 0o644)
		}, "pin server-env:lcp"},
	} {
		exe, venv := fakeServerInstall(t, "0.3.16")
		snap := serverSnapshot(t, exe, venv)
		spool := t.TempDir()
		if err := publish(spool, "s1", "exec-1", snap, nil); err != nil {
			t.Fatal(err)
		}
		if err := c.change(exe, venv); err != nil {
			t.Fatal(err)
		}
		_, err := serverStack(snap, "lcp")
		want := strings.Replace(c.pin, "%s", exe, 1)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "install") {
			t.Errorf("%s: %v, want it to name %q and the fix", c.name, err, want)
		}
		opts := WorkerOptions{Config: Config{Spool: spool}, Study: "s1", Execution: "exec-1", CardClass: "cpu", Log: slog.New(slog.DiscardHandler)}
		if qs := serverQueues(opts); len(qs) != 0 {
			t.Errorf("%s: the arm's queue is served: %v", c.name, qs)
		}
	}
}
