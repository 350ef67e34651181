package studies

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"sorted keys, no whitespace", `{ "b": 1, "a": { "d": [1, 2], "c": null } }`, `{"a":{"c":null,"d":[1,2]},"b":1}`},
		{"numbers shortest", `[1.0, 1e2, 0.5, 1e-7, 1e21, -0.0, 100000000000000000000]`, `[1,100,0.5,1e-7,1e+21,0,100000000000000000000]`},
		{"int64 kept exact", `[9007199254740993]`, `[9007199254740993]`},
		{"no HTML escaping", `["<a&b>"]`, `["<a&b>"]`},
		{"control escapes", `["a\u0001\n\"\\"]`, `["a\u0001\n\"\\"]`},
		{"unicode kept", `["é😀"]`, `["é😀"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Canonical(%s) = %s, want %s", tc.in, got, tc.want)
			}
			again, err := Canonical(json.RawMessage(got))
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("canonical form is not a fixed point: %s → %s (%v)", got, again, err)
			}
		})
	}
}

func TestDesignHashIgnoresLayout(t *testing.T) {
	fromJSON := demoDesign(t)
	var m map[string]any
	if err := json.Unmarshal(readDemo(t), &m); err != nil {
		t.Fatal(err)
	}
	compact, _ := json.Marshal(m) // different layout and key order
	fromCompact, err := ParseDesign("design.json", compact)
	if err != nil {
		t.Fatal(err)
	}
	h1, err := DesignHash(fromJSON)
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := DesignHash(fromCompact)
	if h1 != h2 {
		t.Errorf("same design, different hash: %s vs %s", h1, h2)
	}
	fromCompact.Arms[1].Pins.Sampling.Seed++
	h3, _ := DesignHash(fromCompact)
	if h3 == h1 {
		t.Error("a changed seed did not change the design hash")
	}
	if len(h1) != 64 {
		t.Errorf("design hash %q is not hex SHA-256", h1)
	}
}

// diskAssets hashes real files in a test's temp dir: model files,
// stand-in binaries and JSONL banks whose rows carry an "id".
type diskAssets struct {
	bins map[string]string // component → path
}

func sha256File(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

func (a diskAssets) FileSHA256(_ context.Context, path string) (string, error) {
	return sha256File(path)
}

func (a diskAssets) Binary(_ context.Context, c string) (Binary, error) {
	p, ok := a.bins[c]
	if !ok {
		return Binary{}, fmt.Errorf("no %s installed", c)
	}
	sum, err := sha256File(p)
	return Binary{Component: c, Path: p, SHA256: sum}, err
}

func (a diskAssets) Bank(_ context.Context, jk JobKind) (Bank, error) {
	data, err := os.ReadFile(jk.TaskBank)
	if err != nil {
		return Bank{}, err
	}
	sum := sha256.Sum256(data)
	b := Bank{Path: jk.TaskBank, SHA256: hex.EncodeToString(sum[:])}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		var row struct {
			ID     string `json:"id"`
			Grader struct {
				Name string `json:"name"`
			} `json:"grader"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.ID == "" {
			return Bank{}, fmt.Errorf("line %d: task has no id", line)
		}
		b.Tasks = append(b.Tasks, row.ID)
		if b.Graders == nil {
			b.Graders = map[string]string{}
		}
		if row.Grader.Name == "" {
			row.Grader.Name = jk.Grader.Name // the fixtures' shorthand: the job kind's
		}
		b.Graders[row.ID] = row.Grader.Name
	}
	return b, nil
}

type freezeFixture struct {
	design *Design
	assets diskAssets
	opts   ValidateOptions
	files  map[string]string
}

func newFreezeFixture(t *testing.T) freezeFixture {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	files := map[string]string{
		"smol":   write("smol.gguf", "GGUF smol weights"),
		"gemma":  write("smol-q8_0.gguf", "GGUF smol q8_0 weights"), // the candidates' file
		"llama":  write("llama-server", "llama-server binary"),
		"ollama": write("ollama", "ollama binary"),
		"aider":  write("aider", "aider entry point"),
		"bankA":  write("extract.jsonl", "{\"id\":\"ej-1\"}\n{\"id\":\"ej-2\"}\n{\"id\":\"ej-3\"}\n"),
		"bankB":  write("fix.jsonl", "{\"id\":\"ft-1\"}\n{\"id\":\"ft-2\"}\n"),
	}
	d := demoDesign(t)
	d.JobKinds[0].TaskBank = files["bankA"]
	d.JobKinds[1].TaskBank = files["bankB"]
	env := map[string]string{"SMOLLM2_GGUF": files["smol"], "SMOLLM2_REQUANT_Q8_0_GGUF": files["gemma"]}
	return freezeFixture{
		design: d,
		assets: diskAssets{bins: map[string]string{"llama-server": files["llama"], "ollama": files["ollama"], "aider": files["aider"]}},
		opts:   ValidateOptions{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }},
		files:  files,
	}
}

func TestFreeze(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	reg, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Freeze(ctx, FreezeInput{Design: fx.design, Registered: reg, Validate: fx.opts}, fx.assets)
	if err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	smolSum, _ := sha256File(fx.files["smol"])
	if s.Arms[0].ModelSHA256 != smolSum || s.Arms[0].ModelPath != fx.files["smol"] {
		t.Errorf("arm 0 frozen as %s %s, want %s %s", s.Arms[0].ModelPath, s.Arms[0].ModelSHA256, fx.files["smol"], smolSum)
	}
	if got := len(s.Arms[3].Binaries); got != 2 {
		t.Errorf("aider+llama-server arm froze %d binaries, want aider and llama-server", got)
	}
	if got := s.Tasks()["extract-json"]; strings.Join(got, ",") != "ej-1,ej-2,ej-3" {
		t.Errorf("frozen tasks = %v", got)
	}
	if err := s.Verify(); err != nil {
		t.Errorf("fresh snapshot does not verify: %v", err)
	}
	// Freezing the same inputs again gives the same content address.
	s2, err := Freeze(ctx, FreezeInput{Design: fx.design, Registered: reg, Validate: fx.opts}, fx.assets)
	if err != nil || s2.Hash != s.Hash {
		t.Errorf("refreeze hash %v (%v), want %s", s2, err, s.Hash)
	}
	d, err := s.DesignValue()
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := DesignHash(d); h != s.DesignHash {
		t.Errorf("decoded frozen design hashes to %s, snapshot says %s", h, s.DesignHash)
	}
	if err := CheckStale(ctx, s, fx.assets); err != nil {
		t.Errorf("CheckStale on unchanged assets: %v", err)
	}

	// Tampering with the stored snapshot is caught.
	bad := *s
	bad.Arms = append([]FrozenArm(nil), s.Arms...)
	bad.Arms[0].ModelSHA256 = strings.Repeat("0", 64)
	if err := bad.Verify(); !errors.Is(err, ErrTampered) {
		t.Errorf("tampered snapshot Verify = %v, want ErrTampered", err)
	}
}

func TestStaleAsset(t *testing.T) {
	tests := []struct {
		name   string
		change string // fixture file to alter
		asset  string // expected key prefix
	}{
		{"model file", "gemma", "model:"},
		{"runtime binary", "ollama", "runtime:ollama"},
		{"task bank", "bankB", "bank:fix-test"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fx := newFreezeFixture(t)
			reg, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup})
			if err != nil {
				t.Fatal(err)
			}
			snap, err := Freeze(ctx, FreezeInput{Design: fx.design, Registered: reg, Validate: fx.opts}, fx.assets)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(fx.files[tc.change], os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(f, `{"id":"changed"}`)
			f.Close()

			_, err = Freeze(ctx, FreezeInput{Design: fx.design, Registered: reg, Validate: fx.opts}, fx.assets)
			var se *StaleAssetError
			if !errors.As(err, &se) || !errors.Is(err, ErrStaleAsset) {
				t.Fatalf("Freeze after change = %v, want a stale asset", err)
			}
			if !strings.HasPrefix(se.Asset, tc.asset) {
				t.Errorf("stale asset %q, want one starting %q", se.Asset, tc.asset)
			}
			if !strings.Contains(err.Error(), "design.json") {
				t.Errorf("error %q does not name the design file", err)
			}
			if err := CheckStale(ctx, snap, fx.assets); !errors.Is(err, ErrStaleAsset) {
				t.Errorf("CheckStale after change = %v, want ErrStaleAsset", err)
			}
		})
	}
}

func TestFreezeRefuses(t *testing.T) {
	ctx := context.Background()
	t.Run("pinned sha256 differs", func(t *testing.T) {
		fx := newFreezeFixture(t)
		fx.design.Arms[0].Model.SHA256 = strings.Repeat("a", 64)
		_, err := Freeze(ctx, FreezeInput{Design: fx.design, Validate: fx.opts}, fx.assets)
		if !errors.Is(err, ErrStaleAsset) || !strings.Contains(err.Error(), "arms[0].model.sha256") {
			t.Errorf("Freeze = %v, want a stale asset at arms[0].model.sha256", err)
		}
	})
	t.Run("bad task", func(t *testing.T) {
		fx := newFreezeFixture(t)
		if err := os.WriteFile(fx.files["bankB"], []byte("{\"id\":\"ft-1\"}\n{\"prompt\":\"no id\"}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Freeze(ctx, FreezeInput{Design: fx.design, Validate: fx.opts}, fx.assets)
		if err == nil || !strings.Contains(err.Error(), "job_kinds[1].task_bank") || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("Freeze = %v, want the bad task named", err)
		}
	})
	t.Run("invalid design", func(t *testing.T) {
		fx := newFreezeFixture(t)
		fx.design.Repeats = 0
		_, err := Freeze(ctx, FreezeInput{Design: fx.design, Validate: fx.opts}, fx.assets)
		if !errors.Is(err, ErrInvalidDesign) {
			t.Errorf("Freeze = %v, want ErrInvalidDesign", err)
		}
	})
	t.Run("missing binary", func(t *testing.T) {
		fx := newFreezeFixture(t)
		delete(fx.assets.bins, "aider")
		_, err := Freeze(ctx, FreezeInput{Design: fx.design, Validate: fx.opts}, fx.assets)
		if err == nil || !strings.Contains(err.Error(), "arms[3].runtime") {
			t.Errorf("Freeze = %v, want the arm needing aider named", err)
		}
	})
}

func FuzzCanonical(f *testing.F) {
	f.Add([]byte(`{"b":[1.5e300,-0.0,"\u00e9"],"a":{"x":null,"y":true}}`))
	f.Add([]byte(`[9007199254740993, 1e-7, 123456789012345678901234567890]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		c, err := Canonical(json.RawMessage(data))
		if err != nil {
			return // numbers out of float64 range
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form %q is not JSON", c)
		}
		again, err := Canonical(json.RawMessage(c))
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("not a fixed point: %q → %q (%v)", c, again, err)
		}
	})
}

// A relative task_bank is read from the design file's folder at register
// and at freeze, wherever the daemon runs; the design keeps the path as
// written, so its hash does not depend on where the study folder lives.
func TestRelativeTaskBankResolvesFromTheDesignFolder(t *testing.T) {
	ctx := context.Background()
	fx := newFreezeFixture(t)
	designDir := filepath.Dir(fx.files["bankA"])
	fx.design.JobKinds[0].TaskBank = "extract.jsonl"
	fx.design.JobKinds[1].TaskBank = "./fix.jsonl"
	before, _ := DesignHash(fx.design)
	t.Chdir(t.TempDir()) // the daemon's working directory is elsewhere
	reg, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup, BaseDir: designDir})
	if err != nil {
		t.Fatalf("register with relative banks: %v", err)
	}
	opts := fx.opts
	opts.BaseDir = designDir
	s, err := Freeze(ctx, FreezeInput{Design: fx.design, Registered: reg, Validate: opts}, fx.assets)
	if err != nil {
		t.Fatalf("freeze with relative banks: %v", err)
	}
	if s.Banks[0].Path != fx.files["bankA"] || s.Banks[1].Path != fx.files["bankB"] {
		t.Errorf("frozen bank paths %s, %s; want %s, %s", s.Banks[0].Path, s.Banks[1].Path, fx.files["bankA"], fx.files["bankB"])
	}
	if after, _ := DesignHash(fx.design); after != before || s.DesignHash != before {
		t.Errorf("resolving the banks changed the design hash: %s → %s (snapshot %s)", before, after, s.DesignHash)
	}
	if err := CheckStale(ctx, s, fx.assets); err != nil {
		t.Errorf("CheckStale on the frozen, relative banks: %v", err)
	}
	if _, err := Fingerprint(ctx, fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup}); err == nil {
		t.Error("without the design's folder the relative banks were found in the working directory")
	}
}

// TestRegisterRefusesTasksOfAnotherGrader: a bank half of whose tasks name
// another grader than the job kind's is refused at register (and so at
// freeze), naming the job kind's field, the first tasks and a count, and
// the ways on; leaving those tasks out with exclude_tasks lets it through,
// and a judged job kind grades every task whatever grader it names.
func TestRegisterRefusesTasksOfAnotherGrader(t *testing.T) {
	fx := newFreezeFixture(t)
	var rows []string
	for i := range 14 {
		g := "json"
		if i%2 == 1 {
			g = "normalized"
		}
		rows = append(rows, fmt.Sprintf(`{"id":"ej-%d","grader":{"name":%q,"version":1}}`, i, g))
	}
	if err := os.WriteFile(fx.files["bankA"], []byte(strings.Join(rows, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Fingerprint(context.Background(), fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup, BaseDir: fx.opts.BaseDir})
	if err == nil {
		t.Fatal("a bank graded half by another grader was accepted")
	}
	for _, want := range []string{`job_kinds[0].grader.name: "json"`, "7 of the 14 tasks", `"ej-1" ("normalized")`, `"ej-9" ("normalized")`, "and 2 more", "set grader.name", "exclude_tasks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not say %q:\n%v", want, err)
		}
	}
	for i := 1; i < 14; i += 2 {
		fx.design.ExcludeTasks = append(fx.design.ExcludeTasks, ExcludedTask{JobKind: "extract-json", Task: fmt.Sprintf("ej-%d", i), Why: "graded by normalized"})
	}
	if _, err := Fingerprint(context.Background(), fx.design, fx.assets, ResolveOptions{Lookup: fx.opts.Lookup, BaseDir: fx.opts.BaseDir}); err != nil {
		t.Errorf("with the other grader's tasks left out: %v", err)
	}
	fx.design.ExcludeTasks = nil
	fx.design.JobKinds[0].Grader = Grader{Name: JudgeGrader, Version: JudgeGraderVersion}
	if err := checkGraders(0, fx.design.JobKinds[0], Bank{Path: "b.jsonl", Tasks: []string{"a"}, Graders: map[string]string{"a": "json"}}); err != nil {
		t.Errorf("a judged job kind refused for its tasks' own graders: %v", err)
	}
	if err := checkGraders(0, JobKind{Grader: Grader{Name: "regex"}}, Bank{Path: "b.jsonl", Tasks: []string{"a"}}); err == nil {
		t.Error("a bank whose graders were not reported was let through")
	}
}

// TestSnapshotReadsItsOwnNulls: a snapshot or a registration holds the
// design as rig wrote it, where an empty list may be null; reading it back
// must not refuse what rig wrote, while a user's design file with the same
// null is refused, whatever the file is called.
func TestSnapshotReadsItsOwnNulls(t *testing.T) {
	for _, name := range []string{"design.json", "snapshot.json"} {
		d, err := ParseDesign(name, []byte(`{"decision_rule": {"clauses": null}}`))
		if err == nil || !strings.Contains(err.Error(), "null is no value") {
			t.Errorf("a user's null list in %s: %v (design %v), want it refused as null", name, err, d)
		}
	}
	_, err := ParseStoredDesign("snapshot.json", []byte(`{"decision_rule": {"clauses": null}, "items": null}`))
	if err != nil && strings.Contains(err.Error(), "null") {
		t.Errorf("rig's own snapshot with null lists is refused over them: %v", err)
	}
	if _, err := ParseStoredDesign("snapshot.json", []byte(`{"name": null}`)); err == nil || !strings.Contains(err.Error(), "null is no value") {
		t.Errorf("a stored null where no list is: %v, want it refused", err)
	}
}
