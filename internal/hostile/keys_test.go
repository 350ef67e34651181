package hostile

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rig/tasks"
)

// TestKeyMessagesSpeakJSON gives the valid bank's first task keys of the
// wrong shape for its grader (json, version 1) and checks what the bank's
// check at register (Registry.Validate) and `rig tasks lint` say: the file,
// the line and the key's JSON, never the grader's Go type ("Go value of
// type tasks.jsonKey") or a Go map ("details map[...]"). The keys decode as
// JSON, so LoadBank accepts the bank: these are not corpus cases.
func TestKeyMessagesSpeakJSON(t *testing.T) {
	valid := validFile(t, kindBanks, "three-lines.jsonl")
	lines := bytes.SplitAfter(valid, []byte("\n"))
	at := bytes.Index(lines[1], []byte(`"key":`))
	end := bytes.Index(lines[1], []byte(`,"source":`))
	if at < 0 || end < at {
		t.Fatalf("the valid bank's second line has no key before its source: %s", lines[1])
	}
	dir := t.TempDir()
	write := func(name, key string) string {
		var b bytes.Buffer
		b.Write(lines[0])
		b.Write(lines[1][:at+len(`"key":`)])
		b.WriteString(key)
		b.Write(lines[1][end:])
		for _, l := range lines[2:] {
			b.Write(l)
		}
		p := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	reg := tasks.DefaultRegistry(nil)
	for name, key := range map[string]string{
		"key-string":        `"INV-2291"`,
		"key-fields-number": `{"fields":5,"schema":{"type":"object"}}`,
		"key-unknown-field": `{"fields":{"invoice_number":"INV-2291"},"surplus":1}`,
	} {
		path := write(name, key)
		b, err := tasks.LoadBank(path)
		if err != nil {
			t.Fatalf("%s: the bank does not load: %v", name, err)
		}
		err = reg.Validate(b)
		switch {
		case err == nil:
			t.Errorf("%s: a key of the wrong shape was accepted", name)
		case !strings.Contains(err.Error(), filepath.Base(path)+":2"):
			t.Errorf("%s: the message does not name the file and line: %v", name, err)
		case goSpeak.MatchString(err.Error()):
			t.Errorf("%s: the message speaks Go: %v", name, err)
		default:
			t.Logf("%s: %v", name, err)
		}
	}

	// A key that decodes but fails its own grader: a regex key whose
	// example the pattern refuses. lint says so, with the grader's details.
	path := write("key-fails", `{"pattern":"^INV-[0-9]+$","example":"invoice 2291"}`)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"grader":{"name":"json","version":1},"holdout":false,"id":"xj-invoice-1"`), []byte(`"grader":{"name":"regex","version":1},"holdout":false,"id":"xj-invoice-1"`), 1)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_, err = tasks.RunLint(context.Background(), &out, path, reg)
	switch {
	case err == nil:
		t.Errorf("lint passed a key that fails its own grader:\n%s", out.String())
	case !strings.Contains(out.String(), "keys failing their own grader: 1"):
		t.Errorf("lint did not find the failing key:\n%s", out.String())
	case goSpeak.MatchString(out.String()):
		t.Errorf("lint's report speaks Go:\n%s", out.String())
	default:
		t.Logf("lint: %s", out.String())
	}
}
