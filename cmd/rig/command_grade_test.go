package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"rig/daemon"
	"strings"
	"testing"
	"time"
)

func TestGradeRegradeCommand(t *testing.T) {
	t.Run("no study named", func(t *testing.T) {
		_, err := runRig(t, "grade", "--home", t.TempDir())
		if err == nil || !strings.Contains(err.Error(), "rig grade --regrade STUDY") {
			t.Fatalf("err = %v, want the usage named", err)
		}
	})

	t.Run("no daemon: the store is opened here", func(t *testing.T) {
		home := t.TempDir()
		_, err := runRig(t, "grade", "--regrade", "nosuch", "--home", home)
		if err == nil || !strings.Contains(err.Error(), `study "nosuch" is not frozen`) {
			t.Fatalf("err = %v, want the unknown study named", err)
		}
		if entries, _ := os.ReadDir(filepath.Join(home, "studies")); len(entries) != 0 {
			t.Errorf("a refused re-grade left %d entries under studies/", len(entries))
		}
	})

	t.Run("through the daemon", func(t *testing.T) {
		home := t.TempDir()
		svc, err := daemon.NewService(home, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		sock := filepath.Join(home, "rig.sock")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go svc.Serve(ctx, sock)
		for i := 0; i < 100; i++ {
			if c, err := net.Dial("unix", sock); err == nil {
				c.Close()
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		_, err = runRig(t, "grade", "--regrade", "nosuch", "--grader", "json", "--version", "9", "--home", home)
		if err == nil || !strings.Contains(err.Error(), `study "nosuch" is not frozen`) {
			t.Fatalf("err = %v, want the daemon's refusal", err)
		}
	})
}
