package studies

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/licences"
)

// newBankRegistry is a studio registry holding only the entry a newcomer adds
// for their own task bank; the bundled entries cover the rest of the demo.
const newBankRegistry = `{"schema_version":1,"entries":[
 {"id":"my-new-bank","item":"the studio's new task bank","kind":"dataset","licence":"studio rule","source_page":"studio wiki: banks","clause":"§1","date_read":"2026-12-01",
  "verdicts":{"evaluation":{"verdict":"allowed","reading":"written in-house for this study"}}}
]}`

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestChooseLicenceRegistry(t *testing.T) {
	dir := t.TempDir()
	designFile := filepath.Join(dir, "study", "design.yaml")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if k == "STUDIO" {
			return "/srv/studio", true
		}
		return "", false
	}
	tests := []struct {
		name, flag, key, configured string
		wantPath, wantFrom          string
		wantErr                     string
	}{
		{name: "flag beats design and configured", flag: "/flag/reg.json", key: "design-reg.json", configured: "/env/reg.json",
			wantPath: "/flag/reg.json", wantFrom: "--registry"},
		{name: "relative flag is made absolute", flag: "reg.json", wantPath: filepath.Join(wd, "reg.json"), wantFrom: "--registry"},
		{name: "design key beats configured, relative to the design's folder", key: "../licences/reg.json", configured: "/env/reg.json",
			wantPath: filepath.Join(dir, "licences", "reg.json"), wantFrom: designFile + ": licence_registry"},
		{name: "design key expands references", key: "${STUDIO}/reg.json", wantPath: "/srv/studio/reg.json", wantFrom: designFile + ": licence_registry"},
		{name: "design key with an unset reference names the key", key: "${NOPE}/reg.json", wantErr: designFile + ": licence_registry"},
		{name: "configured when neither names one", configured: "/env/reg.json", wantPath: "/env/reg.json", wantFrom: "$" + LicenceRegistryEnv},
		{name: "bundled alone when nothing names one", wantPath: "", wantFrom: "bundled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &Design{LicenceRegistry: tc.key}
			got, err := ChooseLicenceRegistry(tc.flag, d, designFile, tc.configured, lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Path != tc.wantPath || got.From != tc.wantFrom {
				t.Errorf("got %+v, want path %q from %q", got, tc.wantPath, tc.wantFrom)
			}
		})
	}
}

// registerWith registers the fixture's design, with one dataset item the
// bundled registry has never heard of, against the registry at path ("" for
// the bundled one alone).
func registerWith(t *testing.T, fx freezeFixture, path string) (*Registration, error) {
	t.Helper()
	fx.design.Items = append(fx.design.Items, Item{Role: "dataset", Name: "new bank", RegistryID: "my-new-bank", Use: "evaluation"})
	lic, err := OpenLicences(LicenceRegistryChoice{Path: path, From: "--registry"})
	if err != nil {
		t.Fatal(err)
	}
	none := func(string) bool { return false }
	reg, _, err := Register(context.Background(), RegisterInput{Design: fx.design, Key: "k", Actor: "ana", At: at(0),
		Resolve: ResolveOptions{Lookup: fx.opts.Lookup}}, RegisterDeps{Licences: lic, Assets: fx.assets, Exists: none})
	return reg, err
}

func TestRegisterWithStudioRegistry(t *testing.T) {
	t.Run("bundled alone blocks the new item and says where to add it", func(t *testing.T) {
		_, err := registerWith(t, newFreezeFixture(t), "")
		if !errors.Is(err, licences.ErrBlocked) {
			t.Fatalf("Register = %v, want ErrBlocked", err)
		}
		for _, w := range []string{`no entry "my-new-bank" in ` + licences.BundledFile, "a studio licence registry", "--registry FILE"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error lacks %q:\n%v", w, err)
			}
		}
	})
	t.Run("the studio's entry lets it through, and the registry is recorded", func(t *testing.T) {
		path := writeFile(t, filepath.Join(t.TempDir(), "registry.json"), newBankRegistry)
		reg, err := registerWith(t, newFreezeFixture(t), path)
		if err != nil {
			t.Fatalf("Register with the studio registry: %v", err)
		}
		sum, _ := sha256File(path)
		if got := reg.Assets["licences:"+path]; got != sum {
			t.Errorf("asset licences:%s = %q, want the file's sha256 %s", path, got, sum)
		}
		// The demo's models and runtimes still come from the bundled entries.
		if got := reg.Assets["licences:bundled"]; got != licences.BundledSHA256() {
			t.Errorf("asset licences:bundled = %q, want %s", got, licences.BundledSHA256())
		}
		if reg.Licences.Registry != path || reg.Licences.SHA256 != sum || reg.Licences.From != "--registry" {
			t.Errorf("licence record %+v", reg.Licences)
		}
		lines, err := LicenceLinesFor(registeredItems(t, reg), reg.Licences)
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(lines, "\n")
		for _, w := range []string{"dataset: new bank (my-new-bank, evaluation: allowed) from " + path,
			"runtime: Ollama (ollama, inference: allowed) from " + licences.BundledFile} {
			if !strings.Contains(joined, w) {
				t.Errorf("status lines lack %q:\n%s", w, joined)
			}
		}
	})
}

func registeredItems(t *testing.T, r *Registration) []Item {
	t.Helper()
	d, err := ParseDesign("registration.json", r.Design)
	if err != nil {
		t.Fatal(err)
	}
	return d.Items
}

func TestFreezeRefusesChangedLicenceRegistry(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	path := writeFile(t, filepath.Join(t.TempDir(), "registry.json"), newBankRegistry)
	reg, err := registerWith(t, fx, path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDesign("design.json", reg.Design)
	if err != nil {
		t.Fatal(err)
	}
	in := FreezeInput{Design: d, Registered: reg.Assets, Validate: fx.opts}
	snap, err := Freeze(ctx, in, fx.assets)
	if err != nil {
		t.Fatalf("Freeze with the registry unchanged: %v", err)
	}
	if snap.Assets["licences:"+path] != reg.Assets["licences:"+path] {
		t.Errorf("snapshot assets %v lack the registry's hash", snap.Assets)
	}
	if err := CheckStale(ctx, snap, fx.assets); err != nil {
		t.Errorf("CheckStale with the registry unchanged: %v", err)
	}

	// A reading changed after register: the study was checked against the old one.
	writeFile(t, path, strings.Replace(newBankRegistry, "written in-house", "bought in", 1))
	_, err = Freeze(ctx, in, fx.assets)
	var se *StaleAssetError
	if !errors.As(err, &se) || se.Asset != "licences:"+path {
		t.Fatalf("Freeze after the registry changed = %v, want a stale asset licences:%s", err, path)
	}
	if !strings.Contains(err.Error(), "licence registry "+path) || !strings.Contains(err.Error(), "design.json") {
		t.Errorf("error %q does not name the registry file and the design", err)
	}
	if err := CheckStale(ctx, snap, fx.assets); !errors.Is(err, ErrStaleAsset) {
		t.Errorf("CheckStale after the registry changed = %v, want ErrStaleAsset", err)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Freeze(ctx, in, fx.assets); !errors.Is(err, ErrStaleAsset) || !strings.Contains(err.Error(), path) {
		t.Errorf("Freeze with the registry gone = %v, want a stale asset naming %s", err, path)
	}
}

// TestWrongRegistryNamed: with another registry file passed, a blocked item's
// message names that file (where the entry was looked for and where to add
// it), never the bundled licences/registry.json alone or the advice to make
// a studio registry the user already has.
func TestWrongRegistryNamed(t *testing.T) {
	path := writeFile(t, filepath.Join(t.TempDir(), "other-licences.json"), strings.ReplaceAll(newBankRegistry, `"my-new-bank"`, `"someone-else"`))
	_, err := registerWith(t, newFreezeFixture(t), path)
	if !errors.Is(err, licences.ErrBlocked) {
		t.Fatalf("Register = %v, want ErrBlocked", err)
	}
	for _, w := range []string{`no entry "my-new-bank" in ` + path + " or " + licences.BundledFile, `add an entry with id "my-new-bank" to ` + path} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), "a studio licence registry (a file") {
		t.Errorf("error tells the user to make the studio registry they passed:\n%v", err)
	}
	// A registry that does not parse is named, with what chose it.
	bad := writeFile(t, filepath.Join(t.TempDir(), "broken-licences.json"), `{"schema_version": 1, "entries": [`)
	_, err = OpenLicences(LicenceRegistryChoice{Path: bad, From: "--registry"})
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "--registry") || strings.Contains(err.Error(), "licences/registry.json") {
		t.Errorf("OpenLicences(broken) = %v, want it to name %s and --registry only", err, bad)
	}
}
