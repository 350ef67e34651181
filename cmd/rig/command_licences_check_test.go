package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/licences"
)

// demoDesign copies the demo study's design into a temporary folder after
// edit changes its decoded JSON, and returns the copy's path.
func demoDesign(t *testing.T, edit func(d map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(repoFile("examples", "demo-study", "design.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	// The copy lives in a temporary folder, away from the repository's
	// banks: it reads them where they are.
	d["allow_paths_outside"] = true
	if edit != nil {
		edit(d)
	}
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "design.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// testEnv writes an installed.env naming the model files the demo design
// refers to, so the test does not depend on `make setup`.
func testEnv(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "installed.env")
	body := "SMOLLM2_GGUF=/models/smollm2.gguf\nSMOLLM2_REQUANT_Q8_0_GGUF=/models/smollm2-q8_0.gguf\nGEMMA3_GGUF=/models/gemma3.gguf\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func setItem(i int, field, value string) func(map[string]any) {
	return func(d map[string]any) {
		d["items"].([]any)[i].(map[string]any)[field] = value
	}
}

func itemIndex(t *testing.T, registryID string) int {
	t.Helper()
	data, err := os.ReadFile(repoFile("examples", "demo-study", "design.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Items []licences.Item `json:"items"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for i, it := range d.Items {
		if it.RegistryID == registryID {
			return i
		}
	}
	t.Fatalf("demo design has no item %q", registryID)
	return -1
}

func TestLicencesCheck(t *testing.T) {
	bank := itemIndex(t, "rig-bank-extract-json")
	tests := []struct {
		name      string
		edit      func(map[string]any)
		wantOut   []string
		wantErrIs error
		wantErr   string
	}{
		{name: "demo passes", wantOut: []string{"smollm2-135m-instruct", "smollm2-135m-instruct-q8_0", "rig-bank-extract-json"}},
		{name: "banned use blocks", edit: setItem(bank, "use", "fine_tuning"),
			wantErrIs: licences.ErrBlocked, wantErr: "rig-bank-extract-json"},
		{name: "unknown entry blocks", edit: setItem(bank, "registry_id", "no-such-entry"),
			wantErrIs: licences.ErrBlocked, wantErr: "no-such-entry"},
		{name: "invalid design names the field", edit: func(d map[string]any) { delete(d, "arms") },
			wantErr: "arms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := demoDesign(t, tt.edit)
			out, err := runRig(t, "licences", "check", path, "--installed-env", testEnv(t))
			if tt.wantErr == "" && tt.wantErrIs == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v\n%s", err, out)
				}
			} else {
				if err == nil {
					t.Fatalf("want an error, got none\n%s", out)
				}
				if tt.wantErrIs != nil && !errors.Is(err, tt.wantErrIs) {
					t.Errorf("err = %v, want errors.Is %v", err, tt.wantErrIs)
				}
				if !strings.Contains(err.Error()+out, tt.wantErr) {
					t.Errorf("neither error nor output names %q:\nerr: %v\nout: %s", tt.wantErr, err, out)
				}
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestLicencesCheckMissingEnvFileFallsBack(t *testing.T) {
	t.Setenv("SMOLLM2_GGUF", "/models/smollm2.gguf")
	t.Setenv("SMOLLM2_REQUANT_Q8_0_GGUF", "/models/smollm2-q8_0.gguf")
	t.Setenv("GEMMA3_GGUF", "/models/gemma3.gguf")
	path := demoDesign(t, nil)
	missing := filepath.Join(t.TempDir(), "absent.env")
	if _, err := runRig(t, "licences", "check", path, "--installed-env", missing); err != nil {
		t.Fatalf("absent env file should fall back to the environment: %v", err)
	}
}

// A newcomer's entry for their own task bank, in the studio's registry file:
// check must pass however the file is named, the same way register finds it.
func TestLicencesCheckStudioRegistry(t *testing.T) {
	const studio = `{"schema_version":1,"entries":[
 {"id":"my-new-bank","item":"the studio's new task bank","kind":"dataset","licence":"studio rule","source_page":"studio wiki","clause":"§1","date_read":"2026-12-01",
  "verdicts":{"evaluation":{"verdict":"allowed","reading":"written in-house"}}}]}`
	bank := itemIndex(t, "rig-bank-extract-json")
	tests := []struct {
		name    string
		how     string // "flag", "design", "env" or "" (bundled alone)
		wantOut []string
		wantErr string
	}{
		{name: "bundled alone blocks the new item", how: "",
			wantErr: `no entry "my-new-bank" in ` + licences.BundledFile},
		{name: "--registry", how: "flag", wantOut: []string{"(--registry)", "(my-new-bank, evaluation: allowed) from "}},
		{name: "licence_registry in the design", how: "design", wantOut: []string{": licence_registry)", "(my-new-bank, evaluation: allowed) from "}},
		{name: "$RIG_LICENCE_REGISTRY", how: "env", wantOut: []string{"($RIG_LICENCE_REGISTRY)", "(my-new-bank, evaluation: allowed) from "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edit := setItem(bank, "registry_id", "my-new-bank")
			if tt.how == "design" {
				edit = func(d map[string]any) {
					setItem(bank, "registry_id", "my-new-bank")(d)
					d["licence_registry"] = "licences/studio.json"
				}
			}
			path := demoDesign(t, edit)
			reg := filepath.Join(filepath.Dir(path), "licences", "studio.json")
			if err := os.MkdirAll(filepath.Dir(reg), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(reg, []byte(studio), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("RIG_LICENCE_REGISTRY", "")
			args := []string{"licences", "check", path, "--installed-env", testEnv(t)}
			switch tt.how {
			case "flag":
				args = append(args, "--registry", reg)
			case "env":
				t.Setenv("RIG_LICENCE_REGISTRY", reg)
			}
			out, err := runRig(t, args...)
			if tt.wantErr != "" {
				if !errors.Is(err, licences.ErrBlocked) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrBlocked naming %q\n%s", err, tt.wantErr, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("check with the studio registry: %v\n%s", err, out)
			}
			for _, w := range append(tt.wantOut, "licence registry: "+reg, reg+"\n", "from "+licences.BundledFile) {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
