package hostile

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"rig/internal/testenv"
	"strings"
	"testing"
	"time"

	"rig/api"
	"rig/daemon"
	"rig/internal/provision"
)

// TestHostileCorpusThroughDaemon sends the kinds the daemon reads through a
// real `rig daemon` (daemon.Run on a private home and socket): each hostile
// design registered as it is, each bank, model and licence registry named
// by the valid design. Every one is refused naming the file, no study is
// created, and the daemon still answers `list` after each. A hostile
// governor.json stops a daemon from starting, naming the file, before it
// opens a socket. Last, the valid design registers, so the refusals were
// the hostile files' doing.
func TestHostileCorpusThroughDaemon(t *testing.T) {
	_, err := provision.Load()
	testenv.NeedsSetup(t, "the provisioned runtimes (register fingerprints them)", err)
	hostile, _ := corpusCases(t)
	abs := func(rel string) string {
		p, err := filepath.Abs(filepath.Join(corpusDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The daemon expands the design's model variables from the environment
	// first: the committed valid models.
	for v, f := range validGGUF {
		t.Setenv(v, abs("valid/"+kindGGUF+"/"+f))
	}
	t.Setenv("RIG_CACHE", provision.CacheDir()) // before HOME moves
	tmp := t.TempDir()
	t.Setenv("HOME", tmp) // the governor's state folder is under HOME
	t.Setenv("RIG_DAEMON_LOCK", filepath.Join(tmp, "daemon.lock"))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	// governor.json is read as the daemon starts.
	for _, rel := range hostile {
		if !strings.HasPrefix(rel, kindGovernor+"/") {
			continue
		}
		home := filepath.Join(t.TempDir(), "home")
		data, err := os.ReadFile(abs(rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(home, "governor.json")
		if err := os.WriteFile(cfg, data, 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = daemon.Run(ctx, daemon.Options{Home: home, Socket: filepath.Join(home, "rig.sock"), Log: log})
		cancel()
		if err == nil || !strings.Contains(err.Error(), cfg) {
			t.Errorf("%s: daemon started or did not name %s: %v", rel, cfg, err)
		}
		if _, serr := os.Stat(filepath.Join(home, "rig.sock")); serr == nil {
			t.Errorf("%s: a daemon with a bad governor.json opened its socket", rel)
		}
	}

	home := filepath.Join(tmp, "rig")
	sock := filepath.Join(home, "rig.sock")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, daemon.Options{Home: home, Socket: sock, Log: log}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("daemon: %v", err)
		}
	})
	c := api.Client{Socket: sock}
	// list answers: the daemon is up (and, later, still up) with no study.
	list := func() ([]string, error) {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		var names []string
		err := c.Call(cctx, "list", struct{}{}, &names, nil)
		return names, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := list(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	validDesign := abs("valid/" + kindDesigns + "/demo.json")
	base := readJSON(t, validDesign).(map[string]any)
	designDir := t.TempDir()
	// writeDesign is the valid design with one path changed to a corpus
	// file's, in a folder of its own (so it may read files outside it).
	writeDesign := func(rel string, edit func(d map[string]any)) string {
		d := deepCopy(base).(map[string]any)
		d["allow_paths_outside"] = true
		jk := d["job_kinds"].([]any)[0].(map[string]any)
		bank, _ := filepath.Abs(filepath.Join(corpusDir, "valid", kindDesigns, jk["task_bank"].(string)))
		jk["task_bank"] = bank
		edit(d)
		path := filepath.Join(designDir, strings.ReplaceAll(rel, "/", "_")+".design.json")
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	sent := map[string]int{}
	corpusBefore := snapshot(corpusDir)
	for _, rel := range hostile {
		kind, _, _ := strings.Cut(rel, "/")
		req := daemon.RegisterRequest{}
		switch kind {
		case kindDesigns:
			req.DesignFile = abs(rel)
		case kindBanks:
			req.DesignFile = writeDesign(rel, func(d map[string]any) {
				d["job_kinds"].([]any)[0].(map[string]any)["task_bank"] = abs(rel)
			})
		case kindGGUF:
			req.DesignFile = writeDesign(rel, func(d map[string]any) {
				d["arms"].([]any)[0].(map[string]any)["model"].(map[string]any)["file"] = abs(rel)
			})
		case kindRegistries:
			req.DesignFile, req.Registry = validDesign, abs(rel)
		default:
			continue // generation records and governor.json reach no register
		}
		before := snapshot(filepath.Join(home, "studies"))
		cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := c.Call(cctx, "register", req, nil, nil)
		ccancel()
		switch {
		case err == nil:
			t.Errorf("%s: registered", rel)
		case errors.Is(err, api.ErrDaemonStopped) || errors.Is(err, api.ErrNoDaemon):
			t.Fatalf("%s: the daemon stopped: %v", rel, err)
		case !strings.Contains(err.Error(), filepath.Base(rel)):
			t.Errorf("%s: the daemon's refusal does not name the file: %v", rel, err)
		}
		if snapshot(filepath.Join(home, "studies")) != before {
			t.Errorf("%s: the daemon wrote under its studies folder", rel)
		}
		names, err := list()
		if err != nil {
			t.Fatalf("after %s the daemon does not answer: %v", rel, err)
		}
		if len(names) != 0 {
			t.Fatalf("after %s the daemon lists studies %v", rel, names)
		}
		sent[kind]++
	}
	// Only the designs this test wrote are in its folder; the corpus is as
	// it was.
	if snapshot(corpusDir) != corpusBefore {
		t.Error("the daemon changed the corpus")
	}
	var info daemon.StudyInfo
	if err := c.Call(context.Background(), "register", daemon.RegisterRequest{DesignFile: validDesign}, &info, nil); err != nil {
		t.Fatalf("the valid design does not register: %v", err)
	}
	if names, err := list(); err != nil || len(names) != 1 {
		t.Fatalf("after the valid design: %v %v", names, err)
	}
	t.Logf("sent through the daemon's socket: %v", sent)
}
