package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rig/genrecord"
	"rig/licences"
	"rig/studies"
	"rig/tasks"
)

// kindEnv names the corpus kind of a case given to a child by absolute path
// (the big inputs, made at test time), where the kind is not its folder.
const kindEnv = "RIG_HOSTILE_KIND"

// refusalGoal is how long a big input's refusal may take, at most: a speed
// goal, measured by BenchmarkBigInputRefusals.
const refusalGoal = time.Second

// readSlack is what an entry point may read past the cap that refuses a
// file: a reader's buffer, the lines before the long one, and the process's
// own reads of /proc while it runs.
const readSlack = 1 << 20

// bigCase is one large input, written when the test runs (never committed):
// its kind, its name, and how to write it.
type bigCase struct {
	kind, name string
	write      func(t testing.TB, path string)
	// want is a word the refusal must contain: the refusal is for the size
	// or the count, not for something found after reading it all.
	want string
	// readCap is the cap that refuses the file, the most of it an entry
	// point may read first (plus readSlack); 0 for a file refused for a
	// count inside it, which must be read whole to be counted.
	readCap int64
}

// validFile reads the committed valid case of a kind.
func validFile(t testing.TB, kind, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, "valid", kind, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// spliceString writes base with a string of n bytes of 'a' put into the
// first string value of key, streaming it, so the test holds none of it.
func spliceString(t testing.TB, path string, base []byte, key string, n int64) {
	t.Helper()
	at := bytes.Index(base, []byte(`"`+key+`":`))
	if at < 0 {
		t.Fatalf("no %q in the valid case", key)
	}
	q := at + len(key) + 3
	q += bytes.IndexByte(base[q:], '"') + 1
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(base[:q])
	chunk := bytes.Repeat([]byte{'a'}, 1<<20)
	for w := int64(0); w < n; w += int64(len(chunk)) {
		f.Write(chunk[:min(int64(len(chunk)), n-w)])
	}
	if _, err := f.Write(base[q:]); err != nil {
		t.Fatal(err)
	}
}

// sparseLine writes head, then a line of n bytes that the file system
// holds as a hole (NUL bytes when read), then a newline: the length is what
// is hostile, and the test machine's disk is spared it.
func sparseLine(t testing.TB, path string, head []byte, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(head)
	f.Write([]byte(`{"id":"`))
	if _, err := f.WriteAt([]byte("\"}\n"), int64(len(head))+7+n); err != nil {
		t.Fatal(err)
	}
}

func bigCases() []bigCase {
	return []bigCase{
		{kindDesigns, "10000-arms.json", func(t testing.TB, path string) {
			var d map[string]any
			if err := json.Unmarshal(validFile(t, kindDesigns, "demo.json"), &d); err != nil {
				t.Fatal(err)
			}
			arms := d["arms"].([]any)
			var many []any
			for i := 0; i < 10000; i++ {
				a := map[string]any{}
				for k, v := range arms[i%len(arms)].(map[string]any) {
					a[k] = v
				}
				a["name"] = fmt.Sprintf("arm-%05d", i)
				a["role"] = "candidate"
				many = append(many, a)
			}
			d["arms"] = many
			b, _ := json.Marshal(d)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "arms", 0},
		{kindDesigns, "50mib-sentence.json", func(t testing.TB, path string) {
			spliceString(t, path, validFile(t, kindDesigns, "demo.json"), "why_the_measure", 50<<20)
		}, "cap", studies.DesignCap.Limit},
		{kindBanks, "100mb-prompt.jsonl", func(t testing.TB, path string) {
			b := validFile(t, kindBanks, "three-lines.jsonl")
			spliceString(t, path, b, "prompt", 100_000_000)
		}, "cap", tasks.BankLineCap.Limit},
		{kindBanks, "20mb-prompt.jsonl", func(t testing.TB, path string) {
			// Under the bank's cap, over a line's.
			spliceString(t, path, validFile(t, kindBanks, "three-lines.jsonl"), "prompt", 20_000_000)
		}, "cap", tasks.BankLineCap.Limit},
		{kindRegistries, "60mb.json", func(t testing.TB, path string) {
			spliceString(t, path, validFile(t, kindRegistries, "one-entry.json"), "clause", 60_000_000)
		}, "cap", licences.RegistryCap.Limit},
		{kindGenRecords, "300mb-line.jsonl", func(t testing.TB, path string) {
			b := validFile(t, kindGenRecords, "two-rows.jsonl")
			sparseLine(t, path, b[:bytes.IndexByte(b, '\n')+1], 300_000_000)
		}, "cap", genrecord.MaxLineBytes},
		{kindGovernor, "100mb.json", func(t testing.TB, path string) {
			sparseLine(t, path, nil, 100_000_000)
		}, "cap", 1 << 20}, // governor.configCap
		{kindPolicyFile, "100mb.json", func(t testing.TB, path string) {
			sparseLine(t, path, nil, 100_000_000)
		}, "cap", 4 << 20}, // daemon.policyCap
	}
}

// TestBigInputsAreRefusedAtTheDoor writes each big input, runs it in a
// child through its kind's entry point, and checks the refusal: it names
// the file and says why (the cap or the count), it speaks no Go, the
// child's peak memory stays under 512 MiB, and the entry point read no more
// of the file than the cap that refuses it: the size is checked before the
// work it would cost. How long a refusal takes is a speed goal (under a
// second), measured by BenchmarkBigInputRefusals, not asserted here: the
// CPU time of one refusal was seen to go from 0.18 s alone to 1.27 s with
// the whole suite running beside it.
func TestBigInputsAreRefusedAtTheDoor(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	materialize(t)
	dir := t.TempDir()
	for _, c := range bigCases() {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.kind+"-"+c.name)
			c.write(t, path)
			defer os.Remove(path)
			st, _ := os.Stat(path)
			res, usage, err := runCaseAt(t, exe, c.kind, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%d MiB): read %d KiB, %.2fs CPU, peak %d MiB: %s", c.name, st.Size()>>20, res.Read>>10, usage.cpu.Seconds(), usage.rss>>20, res.Err)
			switch {
			case res.Panic != "":
				t.Errorf("panic: %s", res.Panic)
			case res.Err == "":
				t.Errorf("accepted")
			case !strings.Contains(res.Err, filepath.Base(path)):
				t.Errorf("the refusal does not name the file: %s", res.Err)
			case !strings.Contains(res.Err, c.want):
				t.Errorf("the refusal does not say %q (it should be refused for its size or count, before it is read): %s", c.want, res.Err)
			case goSpeak.MatchString(res.Err):
				t.Errorf("the refusal speaks Go: %s", res.Err)
			}
			if usage.rss > maxRSS {
				t.Errorf("peak memory %d MiB, over %d MiB", usage.rss>>20, maxRSS>>20)
			}
			limit := c.readCap + readSlack
			if c.readCap == 0 {
				limit = st.Size() + readSlack
			}
			switch {
			case res.Read < 0:
				t.Errorf("the child could not tell how much it read (/proc/self/io)")
			case res.Read > limit:
				t.Errorf("the entry point read %d MiB of a %d MiB file before refusing it, over the %d MiB its cap allows: it was read before its size was checked", res.Read>>20, st.Size()>>20, limit>>20)
			}
		})
	}
}

// BenchmarkBigInputRefusals times each big input's refusal through its
// kind's entry point, in this process, against the goal of a refusal in
// under a second:
//
//	go test -run '^$' -bench BigInputRefusals ./internal/hostile
func BenchmarkBigInputRefusals(b *testing.B) {
	materialize(b)
	dir := b.TempDir()
	for _, c := range bigCases() {
		path := filepath.Join(dir, c.kind+"-"+c.name)
		c.write(b, path)
		b.Run(c.kind+"/"+c.name, func(b *testing.B) {
			for b.Loop() {
				if err := open(c.kind, path); err == nil {
					b.Fatalf("%s was accepted", c.name)
				}
			}
			// ns/op is the refusal's time; this, its ratio to the goal.
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(refusalGoal), "×goal")
		})
		os.Remove(path)
	}
}
