package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"rig/internal/gguf"
	"rig/studies/studytest"
)

// The attack in this file is issue 43's: a member of the studio group with
// the staff role owns a folder on the way to a task bank, a licence
// registry or a model file their design names. The daemon (root) checks the
// file with the caller's rights; the caller swaps a link in their folder
// for one to a root-only file; if the daemon then reads the file again by
// path, it parses or hashes root's file and its reply quotes it (a parse
// error naming the file's first key, or the file's sha256 in a stale-pin
// error). It passes only when no reply quotes root's file.

// linkSwapRig is the accounts, files and daemon the attack needs.
type linkSwapRig struct {
	pd    policyDaemon
	staff *user.User
	mine  string // the caller's own folder
	// secretJSON is a root-only JSON file whose first key is a leak.
	secretJSON string
	// leaks are strings that appear in root's files and nowhere else (a
	// model's sha256 as a stale-pin error shortens it).
	leaks []string
	// armed maps a link in mine to the root-only file the hook swaps it to
	// once the daemon has checked it; real maps it back to the file the
	// caller may read.
	mu    sync.Mutex
	armed map[string]string
	real  map[string]string
	// arm makes the hook swap link at the daemon's next check of it (and
	// puts the link armed before back); "" disarms.
	arm func(link string)
}

// relink points link at target atomically (a new link renamed over the old),
// as a caller swapping it in a tight loop would.
func relink(t testing.TB, link, target string, uid int) {
	tmp := link + ".swap"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		t.Error(err)
		return
	}
	os.Lchown(tmp, uid, -1)
	if err := os.Rename(tmp, link); err != nil {
		t.Error(err)
	}
}

func newLinkSwapRig(t *testing.T) *linkSwapRig {
	t.Helper()
	needAccounts(t)
	u := osUsers{t: t, prefix: fmt.Sprintf("rigs%d", os.Getpid()%100000)}
	studio := u.name("studio")
	u.addGroup(studio)
	staff := u.addUser(u.name("staff"), studio)
	uid, _ := strconv.Atoi(staff.Uid)

	// A provisioned cache of root's: registration hashes the runtime's
	// binary, so one must exist; nothing is run.
	cache := mkdirMode(t, 0o755)
	bin := filepath.Join(cache, "llama-server")
	writeMode(t, bin, "#!/bin/sh\nexit 1\n", 0o755)
	writeMode(t, filepath.Join(cache, "installed.env"), "RIG_CACHE="+cache+"\nLLAMA_SERVER_BIN="+bin+"\n", 0o644)
	t.Setenv("RIG_CACHE", cache)

	// Root's files: a folder anyone may enter, files only root may read,
	// each shaped so that a reader that follows the link gets far enough to
	// quote it.
	pid := strconv.Itoa(os.Getpid())
	key := "SECRET_KEY_ab12_" + pid
	secrets := mkdirMode(t, 0o755)
	secretRegistry := filepath.Join(secrets, "registry.json")
	writeMode(t, secretRegistry, `{"`+key+`":"root's","schema_version":1,"entries":[]}`, 0o600)
	secretBank := filepath.Join(secrets, "bank.jsonl")
	writeMode(t, secretBank, `{"`+key+`":"root's","schema_version":1,"job_kind":"extract-json","bank_version":"1"}`+"\n", 0o600)
	secretModel := filepath.Join(secrets, "model.gguf")
	if err := gguf.WriteTiny(secretModel, gguf.TinyOptions{Seed: 99, ChatTemplate: "{{ messages }}"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(secretModel, 0o600); err != nil {
		t.Fatal(err)
	}

	// The caller's folder, files it may read, and links to them.
	mine := mkdirMode(t, 0o755)
	realDir := filepath.Join(mine, "real")
	audits := filepath.Join(mine, "audits")
	for _, d := range []string{realDir, audits} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	root := studytest.Root(t)
	copyFile(t, filepath.Join(root, "tasks", "banks", "extract-json.jsonl"), filepath.Join(realDir, "bank.jsonl"))
	records, _ := filepath.Glob(filepath.Join(root, "tasks", "banks", "audits", "audit-*.json"))
	for _, r := range records {
		copyFile(t, r, filepath.Join(audits, filepath.Base(r)))
	}
	writeMode(t, filepath.Join(realDir, "registry.json"), `{"schema_version":1,"entries":[]}`, 0o644)
	model := filepath.Join(realDir, "model.gguf")
	if err := gguf.WriteTiny(model, gguf.TinyOptions{Seed: 1, ChatTemplate: "{{ messages }}"}); err != nil {
		t.Fatal(err)
	}
	r := &linkSwapRig{staff: staff, mine: mine, leaks: []string{key, fileSHA256(t, secretModel)[:16]}, secretJSON: secretRegistry,
		armed: map[string]string{}, real: map[string]string{}}
	for name, secret := range map[string]string{"bank.jsonl": secretBank, "registry.json": secretRegistry, "model.gguf": secretModel} {
		link := filepath.Join(mine, name)
		r.real[link] = filepath.Join(realDir, name)
		r.armed[link] = secret
		relink(t, link, r.real[link], uid)
	}
	filepath.Walk(mine, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, -1) })
	for _, p := range []string{mine, realDir, audits} {
		os.Chmod(p, 0o755)
	}

	// The hook runs in the daemon between its check of a file and its reads
	// of it; it swaps only a link the test armed. Set before the daemon
	// starts and cleared after it stops (cleanups run last first).
	var armedNow string
	afterCallerCheck = func(path string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if path == armedNow {
			relink(t, path, r.armed[path], uid)
		}
	}
	t.Cleanup(func() { afterCallerCheck = nil })
	r.arm = func(link string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if armedNow != "" {
			relink(t, armedNow, r.real[armedNow], uid)
		}
		armedNow = link
	}
	r.pd = startPolicyDaemon(t, studio, []map[string]any{{"group": studio, "roles": []string{"staff"}}}, nil)
	return r
}

func fileSHA256(t testing.TB, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// design writes, in the caller's folder, a design whose every arm runs the
// model the caller may read (pinned to its sha256), the first through the
// link mine/model.gguf, and whose bank is the link mine/bank.jsonl, with
// edit applied last.
func (r *linkSwapRig) design(t *testing.T, name string, edit func(map[string]any)) (string, []byte) {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(studytest.JudgedStudyDesign(t, name), &d); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(r.mine, "model.gguf")
	sum := fileSHA256(t, r.real[link])
	for i, a := range d["arms"].([]any) {
		am := a.(map[string]any)
		// The first arm names the link; the others the file itself, so the
		// daemon checks the link once and the hook's swap is the last word.
		am["model"].(map[string]any)["file"] = r.real[link]
		if i == 0 {
			am["model"].(map[string]any)["file"] = link
		}
		am["model"].(map[string]any)["sha256"] = sum
		am["pins"].(map[string]any)["quant"] = "F16"
	}
	d["job_kinds"].([]any)[0].(map[string]any)["task_bank"] = filepath.Join(r.mine, "bank.jsonl")
	if edit != nil {
		edit(d)
	}
	b, _ := json.Marshal(d)
	path := filepath.Join(r.mine, name+".json")
	writeMode(t, path, string(b), 0o644)
	return path, b
}

// leaked is the first of root's strings the reply quotes, or "".
func (r *linkSwapRig) leaked(rep childReply) string {
	whole := rep.Error + rep.Text + string(rep.Result)
	for _, l := range r.leaks {
		if strings.Contains(whole, l) {
			return l
		}
	}
	return ""
}

// TestRedTeamLinkSwapDuringRegister: for each file a design can name (task
// bank, licence registry, --registry, model file), register swaps the
// caller's link to a root-only file the moment the daemon's check of it has
// passed (a hook in the daemon, so the race is won every time); freeze does
// the same to the bank of a registered study. The reply must never quote
// root's file, and the request must be refused. Then the race is run for
// real, a goroutine flipping the registry's link in a tight loop through up
// to 200 registrations: no reply may quote root's file. Last, the same
// designs with no swap register, so the refusals were the swap's doing.
func TestRedTeamLinkSwapDuringRegister(t *testing.T) {
	r := newLinkSwapRig(t)
	regLink := filepath.Join(r.mine, "registry.json")
	bankLink := filepath.Join(r.mine, "bank.jsonl")
	modelLink := filepath.Join(r.mine, "model.gguf")
	withRegistry, withRegistryContent := r.design(t, "swap-registry", func(d map[string]any) { d["licence_registry"] = regLink })
	plain, plainContent := r.design(t, "swap-plain", nil)

	for _, c := range []struct {
		what   string
		method string
		req    any
		link   string
	}{
		{"register: the design's licence_registry", "register", RegisterRequest{DesignFile: withRegistry, Design: withRegistryContent}, regLink},
		{"register: --registry", "register", RegisterRequest{DesignFile: plain, Design: plainContent, Registry: regLink}, regLink},
		{"register: the task bank", "register", RegisterRequest{DesignFile: plain, Design: plainContent}, bankLink},
		{"register: the model file", "register", RegisterRequest{DesignFile: plain, Design: plainContent}, modelLink},
	} {
		r.arm(c.link)
		rep := callAs(t, r.pd.bin, r.pd.socket, r.staff, c.method, c.req)
		r.arm("")
		if l := r.leaked(rep); l != "" {
			t.Errorf("%s: the link was swapped after the check and the reply quotes root's file (%q): code %q: %s", c.what, l, rep.Code, rep.Error)
			continue
		}
		if rep.Error == "" {
			t.Errorf("%s: the link was swapped to root's file after the check, and the request went through: %s", c.what, rep.Result)
			continue
		}
		if !strings.Contains(rep.Error, "may not read this file") {
			t.Errorf("%s: refused, but not because the caller may not read root's file: code %q: %s", c.what, rep.Code, rep.Error)
		}
		t.Logf("%s: refused: code %q: %s", c.what, rep.Code, rep.Error)
	}

	uid, _ := strconv.Atoi(r.staff.Uid)
	// Freeze reads the registered study's bank again: swap it there.
	if rep := callAs(t, r.pd.bin, r.pd.socket, r.staff, "register", RegisterRequest{DesignFile: plain, Design: plainContent}); rep.Error != "" {
		t.Fatalf("registering the design with no swap: %s", rep.Error)
	}
	r.arm(bankLink)
	rep := callAs(t, r.pd.bin, r.pd.socket, r.staff, "freeze", NameRequest{Name: "swap-plain"})
	r.arm("")
	if l := r.leaked(rep); l != "" {
		t.Errorf("freeze: the bank's link was swapped after the check and the reply quotes root's file (%q): code %q: %s", l, rep.Code, rep.Error)
	} else if !strings.Contains(rep.Error, "may not read this file") {
		t.Errorf("freeze with the bank swapped to root's file: want refused because the caller may not read it, got code %q: %q %s", rep.Code, rep.Error, rep.Result)
	} else {
		t.Logf("freeze: refused: code %q: %s", rep.Code, rep.Error)
	}

	// Freeze also reads the bank's used-versions record (audits/used.json
	// beside the bank, the seed rule's), which nothing checked: a link there
	// to root's file needs no race.
	used := filepath.Join(r.mine, "audits", "used.json")
	relink(t, used, r.secretJSON, uid)
	rep = callAs(t, r.pd.bin, r.pd.socket, r.staff, "freeze", NameRequest{Name: "swap-plain"})
	os.Remove(used)
	if l := r.leaked(rep); l != "" {
		t.Errorf("freeze: audits/used.json is a link to root's file and the reply quotes it (%q): code %q: %s", l, rep.Code, rep.Error)
	} else if !strings.Contains(rep.Error, "may not read this file") {
		t.Errorf("freeze with audits/used.json a link to root's file: want refused because the caller may not read it, got code %q: %q %s", rep.Code, rep.Error, rep.Result)
	} else {
		t.Logf("freeze, used.json linked: refused: code %q: %s", rep.Code, rep.Error)
	}

	// The race for real: no hook, a goroutine flipping the link as fast as
	// it can while the caller registers.
	stop := make(chan struct{})
	var flips sync.WaitGroup
	flips.Add(1)
	go func() {
		defer flips.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				relink(t, regLink, r.real[regLink], uid)
				return
			default:
			}
			if i%2 == 0 {
				relink(t, regLink, r.armed[regLink], uid)
			} else {
				relink(t, regLink, r.real[regLink], uid)
			}
		}
	}()
	leaks, refused, tries := 0, 0, 0
	for deadline := time.Now().Add(20 * time.Second); tries < 200 && time.Now().Before(deadline); tries++ {
		rep := callAs(t, r.pd.bin, r.pd.socket, r.staff, "register", RegisterRequest{DesignFile: withRegistry, Design: withRegistryContent})
		if l := r.leaked(rep); l != "" {
			if leaks == 0 {
				t.Errorf("raced register %d: the reply quotes root's file (%q): code %q: %s", tries+1, l, rep.Code, rep.Error)
			}
			leaks++
		} else if rep.Error != "" {
			refused++
		}
	}
	close(stop)
	flips.Wait()
	if leaks > 0 {
		t.Errorf("the race won %d of %d registrations (root's file quoted in the reply)", leaks, tries)
	}
	t.Logf("raced registrations: %d, refused %d, root's file quoted in %d", tries, refused, leaks)

	// With no swap, the registry design registers: the refusals above were
	// the swaps' doing.
	if rep := callAs(t, r.pd.bin, r.pd.socket, r.staff, "register", RegisterRequest{DesignFile: withRegistry, Design: withRegistryContent}); rep.Error != "" {
		t.Fatalf("registering the registry design with no swap: %s", rep.Error)
	}
}
