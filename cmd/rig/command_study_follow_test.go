package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"rig/api"
)

// The daemon stops while `rig study run --engine temporal` follows: the
// command says the run goes on and how to start the daemon again, not
// only that no daemon runs. The daemon here is a fake on a real unix
// socket: it answers one status with a running engine execution, then
// goes away.
func TestFollowSaysAnEngineRunGoesOnWhenTheDaemonStops(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "fake-daemon.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	info := api.StudyInfo{Executions: []api.ExecInfo{{ID: "exec-1", Status: api.ExecStatusRunning, Engine: "temporal", Planned: 4, Done: 1}}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, _ := json.Marshal(info)
		json.NewEncoder(w).Encode(api.Reply{Result: res})
		go ln.Close() // the daemon dies after its answer
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cmd := &cobra.Command{}
	cmd.Flags().String("socket", sock, "")
	var out bytes.Buffer
	cmd.SetOut(&out)
	err = follow(context.Background(), cmd, "s1", "exec-1")
	if !errors.Is(err, api.ErrNoDaemon) {
		t.Fatalf("follow after the daemon went: %v; want it to say no daemon runs", err)
	}
	for _, want := range []string{"goes on on the workers", "--temporal", "--spool", "rig study status s1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not say %q", err, want)
		}
	}
	if !strings.Contains(out.String(), "1/4 trials") {
		t.Errorf("progress before the stop: %q", out.String())
	}
}
