package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/api"
	"rig/studies"
)

// register reads the design itself, with the caller's rights: a missing
// file is refused naming its path and what writes one, and nothing is sent.
func TestStudyRegisterMissingDesign(t *testing.T) {
	fd := newFakeDaemon(t)
	missing := filepath.Join(t.TempDir(), "design.yaml")
	_, err := runRig(t, "study", "register", missing, "--socket", fd.socket)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "rig study init") {
		t.Errorf("register of a missing design = %v; want the path and the fix", err)
	}
	if calls := fd.sent(); len(calls) != 0 {
		t.Errorf("the refused register sent %v", calls)
	}
}

// The daemon may run with another working directory and environment: it is
// sent the design's bytes as read here, and every path absolute, the
// registry from this shell's environment included.
func TestStudyRegisterSendsDesignAndAbsolutePaths(t *testing.T) {
	dir := t.TempDir()
	design, err := os.ReadFile(repoFile("examples", "quick-study", "design.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "d.json"), design, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv(studies.LicenceRegistryEnv, "env-registry.json")
	fd := newFakeDaemon(t)
	fd.answer(api.MethodRegister, api.StudyInfo{Name: "quick", State: "draft", DesignHash: "d35", Replayed: true})
	out, err := runRig(t, "study", "register", "d.json", "--registry", "studio.json", "--name", "quick-2", "--key", "k1", "--socket", fd.socket)
	if err != nil {
		t.Fatal(err)
	}
	var req api.RegisterRequest
	fd.request(t, api.MethodRegister, &req)
	if req.DesignFile != filepath.Join(dir, "d.json") || !bytes.Equal(req.Design, design) {
		t.Errorf("register sent design_file %q and %d design bytes; want %s and its %d bytes", req.DesignFile, len(req.Design), filepath.Join(dir, "d.json"), len(design))
	}
	if req.Registry != filepath.Join(dir, "studio.json") || req.ConfiguredRegistry != filepath.Join(dir, "env-registry.json") {
		t.Errorf("register sent registry %q and configured registry %q; want both absolute under %s", req.Registry, req.ConfiguredRegistry, dir)
	}
	if req.Name != "quick-2" || req.Key != "k1" {
		t.Errorf("register sent name %q key %q", req.Name, req.Key)
	}
	if !strings.Contains(out, "study      quick (idempotent repeat: existing study returned)") {
		t.Errorf("register printed:\n%s", out)
	}
}
