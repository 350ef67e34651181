package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// caseEnv selects the corpus case a re-executed test binary runs (as
// runtimes/sandbox.go re-executes itself for a stage): its path relative to
// testdata/hostile. The child runs that one case and prints one result line.
const caseEnv = "RIG_HOSTILE_CASE"

// goSpeak matches Go's words where the user's should be: encoding/json's
// own ("Go value of type tasks.jsonKey", "json: unknown field"), which
// name Go types rather than the JSON field and what it should hold, and a
// value printed with %v: a map ("map[...]"), a struct ("{Temperature:0
// TopK:40 ...}") or a pointer's type ("*tasks.Bank").
var goSpeak = regexp.MustCompile(`Go struct field|struct is expected|Go value of type|(^|[^.\w])json: |map\[|\{[A-Z][a-zA-Z]+:|\*[a-z]+\.[A-Z]|\b(tasks|studies|licences|governor|genrecord|preflight|daemon|receipts|runtimes|replay)\.[A-Z]\w*`)

// maxRSS is the most memory any one case may make rig use: a hostile file
// must be refused before it sizes anything by what it claims.
const maxRSS = 512 << 20

func TestMain(m *testing.M) {
	if rel := os.Getenv(caseEnv); rel != "" {
		os.Exit(runChild(rel))
	}
	if spec := os.Getenv(daemonEnv); spec != "" {
		os.Exit(runDaemonChild(spec))
	}
	os.Exit(m.Run())
}

// childResult is what a child reports about its case.
type childResult struct {
	Case    string `json:"case"`
	Err     string `json:"err,omitempty"`
	Panic   string `json:"panic,omitempty"`
	Written string `json:"written,omitempty"` // what changed on disk, if anything
	// Read is how many bytes the entry point read (the kernel's rchar for
	// the process, across the call), or -1 if it could not be told.
	Read int64 `json:"read"`
}

// runChild opens one case through its kind's entry point, recovering a
// panic, and reports whether anything under the corpus or the child's own
// temporary home changed.
func runChild(rel string) int {
	kind := strings.TrimPrefix(rel, "valid/")
	kind, _, _ = strings.Cut(kind, "/")
	path := filepath.Join(corpusDir, rel)
	if filepath.IsAbs(rel) {
		kind, path = os.Getenv(kindEnv), rel
	}
	home := os.Getenv("HOME")
	before := snapshot(corpusDir, home)
	res := childResult{Case: rel}
	readBefore := bytesRead("self")
	func() {
		defer func() {
			if r := recover(); r != nil {
				res.Panic = fmt.Sprintf("%v\n%s", r, debug.Stack())
			}
		}()
		if err := open(kind, path); err != nil {
			res.Err = err.Error()
		}
	}()
	res.Read = -1
	if readBefore >= 0 {
		if after := bytesRead("self"); after >= 0 {
			res.Read = after - readBefore
		}
	}
	if after := snapshot(corpusDir, home); after != before {
		res.Written = "files under " + corpusDir + " or " + home + " changed"
	}
	line, _ := json.Marshal(res)
	fmt.Println(string(line))
	return 0
}

// bytesRead is the bytes a process ("self" or a pid) has read by read(2)
// and its kin so far (rchar in /proc/PROC/io), or -1 where the kernel does
// not say.
func bytesRead(proc string) int64 {
	b, err := os.ReadFile("/proc/" + proc + "/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// snapshot hashes every file (name, mode, size and content) under roots.
func snapshot(roots ...string) string {
	h := sha256.New()
	for _, root := range roots {
		var names []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil {
				names = append(names, p)
			}
			return nil
		})
		sort.Strings(names)
		for _, p := range names {
			st, err := os.Lstat(p)
			if err != nil {
				continue
			}
			fmt.Fprintf(h, "%s %v %d\n", p, st.Mode(), st.Size())
			if st.Mode().IsRegular() {
				if f, err := os.Open(p); err == nil {
					io.Copy(h, f)
					f.Close()
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// corpusCases lists the committed cases, hostile and valid, by path
// relative to testdata/hostile.
func corpusCases(t *testing.T) (hostile, valid []string) {
	t.Helper()
	materialize(t)
	err := filepath.WalkDir(corpusDir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "README.md" || d.Name() == generatedList {
			return err
		}
		rel, _ := filepath.Rel(corpusDir, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "valid/") {
			valid = append(valid, rel)
		} else {
			hostile = append(hostile, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(hostile) < 300 || len(valid) == 0 {
		t.Fatalf("%d hostile and %d valid cases: is testdata/hostile committed?", len(hostile), len(valid))
	}
	return hostile, valid
}

// TestHostileCorpus runs every corpus case in its own child process and
// checks: no panic; a hostile case is refused with a message that says
// where (the file's name, or a line, offset or field) and a valid one is
// accepted; nothing was written; and the child's peak resident memory
// stayed under 512 MiB.
func TestHostileCorpus(t *testing.T) {
	hostile, valid := corpusCases(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	repoBefore := snapshot(corpusDir, "../../tasks/banks")
	var worst int64
	var worstCase string
	perKind := map[string]int{}
	for _, rel := range append(valid, hostile...) {
		isValid := strings.HasPrefix(rel, "valid/")
		res, rss, err := runCase(t, exe, rel)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		if rss > worst {
			worst, worstCase = rss, rel
		}
		switch {
		case res.Panic != "":
			t.Errorf("%s: panic: %s", rel, res.Panic)
		case res.Written != "":
			t.Errorf("%s: %s", rel, res.Written)
		case rss > maxRSS:
			t.Errorf("%s: peak memory %d MiB, over %d MiB", rel, rss>>20, maxRSS>>20)
		case isValid && res.Err != "":
			t.Errorf("valid %s refused: %s", rel, res.Err)
		case !isValid && res.Err == "":
			t.Errorf("hostile %s accepted", rel)
		case !isValid && !locates(res.Err, rel):
			t.Errorf("%s: message says neither the file nor where in it: %s", rel, res.Err)
		case !isValid && goSpeak.MatchString(res.Err):
			// encoding/json's own words name Go types, not the JSON field
			// and what it should hold.
			t.Errorf("%s: message speaks Go, not JSON: %s", rel, res.Err)
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(rel, "valid/"), "/")
		perKind[kind]++
	}
	if snapshot(corpusDir, "../../tasks/banks") != repoBefore {
		t.Error("the corpus or the bundled banks changed while the cases ran")
	}
	t.Logf("%d hostile and %d valid cases, per kind %v; peak memory of any case %d MiB (%s)", len(hostile), len(valid), perKind, worst>>20, worstCase)
}

// runCase re-executes the test binary on one case with a private, empty
// HOME and temporary folder, and returns its result and peak RSS in bytes.
func runCase(t *testing.T, exe, rel string) (childResult, int64, error) {
	res, u, err := runCaseAt(t, exe, "", rel)
	return res, u.rss, err
}

// usage is what a child cost: its peak RSS in bytes and its CPU time.
type usage struct {
	rss int64
	cpu time.Duration
}

// runCaseAt is runCase for a case named by its path relative to the corpus,
// or by an absolute path with its kind.
func runCaseAt(t *testing.T, exe, kind, rel string) (childResult, usage, error) {
	tmp := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), caseEnv+"="+rel, kindEnv+"="+kind, "HOME="+tmp, "TMPDIR="+tmp, "XDG_CACHE_HOME="+tmp, "XDG_STATE_HOME="+tmp, "RIG_HOME="+filepath.Join(tmp, "rig"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var u usage
	if cmd.ProcessState != nil {
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			u.rss = ru.Maxrss * 1024 // kilobytes on Linux
		}
		u.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return childResult{}, u, fmt.Errorf("child: %v\n%s%s", err, out, stderr.Bytes())
	}
	var res childResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if json.Unmarshal(sc.Bytes(), &res) == nil && res.Case == rel {
			return res, u, nil
		}
	}
	return childResult{}, u, fmt.Errorf("child printed no result:\n%s%s", out, stderr.Bytes())
}
