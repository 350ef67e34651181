package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fakeCgroupfs writes files into a temporary directory laid out as a cgroup
// directory is, so the parsing runs on content the test controls. It is a
// fake: no kernel behind it, nothing resets or counts.
func fakeCgroupfs(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for n, v := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestParseLimitHandlesMax(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint64
		bad  bool
	}{
		{"max\n", Unlimited, false},
		{"9223372036854771712\n", Unlimited, false}, // v1's "no limit" with 4 KiB pages
		{"9223372036854710272\n", Unlimited, false}, // the same with 64 KiB pages
		{"134217728\n", 134217728, false},
		{"0\n", 0, false},
		{"", 0, true},
		{"\n", 0, true},
		{"lots\n", 0, true},
		{"-1\n", 0, true},
		{"max max\n", 0, true},
	} {
		got, err := parseLimit("memory.max", []byte(tt.in))
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("parseLimit(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.bad)
		}
		if err != nil && !errors.Is(err, ErrBadValue) {
			t.Errorf("parseLimit(%q): %v is not ErrBadValue", tt.in, err)
		}
	}
}

func TestParseCounterRefusesMax(t *testing.T) {
	for _, in := range []string{"max\n", "", "12k", "-3"} {
		if n, err := parseCounter("memory.current", []byte(in)); !errors.Is(err, ErrBadValue) {
			t.Errorf("parseCounter(%q) = %d, %v; want ErrBadValue", in, n, err)
		}
	}
	if n, err := parseCounter("memory.current", []byte("4096\n")); err != nil || n != 4096 {
		t.Errorf("parseCounter(4096) = %d, %v", n, err)
	}
}

func TestParseKeyedRefusesGarbage(t *testing.T) {
	kv, err := parseKeyed("memory.events", []byte("low 0\nhigh 7\n\noom 1\noom_kill 4\n"))
	if err != nil || kv["high"] != 7 || kv["oom"] != 1 || kv["oom_kill"] != 4 {
		t.Errorf("memory.events: %v %v", kv, err)
	}
	for _, in := range []string{"oom_kill lots\n", "oom_kill\n", "oom_kill 1 2\n", "oom_kill max\n"} {
		if kv, err := parseKeyed("memory.events", []byte(in)); !errors.Is(err, ErrBadValue) {
			t.Errorf("parseKeyed(%q) = %v, %v; want ErrBadValue", in, kv, err)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	got, err := parseCPUList("cpuset.cpus.effective", []byte("0-2,5,7-8\n"))
	if err != nil || !slices.Equal(got, []int{0, 1, 2, 5, 7, 8}) {
		t.Errorf("0-2,5,7-8: %v %v", got, err)
	}
	for _, in := range []string{"", "\n", "a-b", "3-1", "0-"} {
		if got, err := parseCPUList("cpuset.cpus.effective", []byte(in)); !errors.Is(err, ErrBadValue) {
			t.Errorf("parseCPUList(%q) = %v, %v; want ErrBadValue", in, got, err)
		}
	}
}

func TestReadMemoryFakeV1AndV2(t *testing.T) {
	v1 := fakeCgroupfs(t, map[string]string{
		"memory.usage_in_bytes": "1000\n", "memory.max_usage_in_bytes": "2000\n", "memory.failcnt": "5\n",
		"memory.limit_in_bytes": "9223372036854771712\n",
		"memory.oom_control":    "oom_kill_disable 0\nunder_oom 1\noom_kill 3\n"})
	v2 := fakeCgroupfs(t, map[string]string{
		"memory.current": "500\n", "memory.peak": "900\n", "memory.max": "max\n",
		"memory.events": "low 0\nhigh 7\nmax 2\noom 1\noom_kill 4\noom_group_kill 0\n"})
	v2old := fakeCgroupfs(t, map[string]string{ // a kernel before 5.19: no memory.peak
		"memory.current": "500\n", "memory.max": "1048576\n", "memory.events": "oom 0\noom_kill 0\n"})

	m, err := ReadMemory(v1)
	want := Memory{Version: 1, Current: 1000, Peak: 2000, HasPeak: true, OOM: OOM{Kills: 3, Events: 5, UnderOOM: true}}
	if err != nil || m != want {
		t.Errorf("v1: %+v %v; want %+v", m, err, want)
	}
	m, err = ReadMemory(v2)
	want = Memory{Version: 2, Current: 500, Peak: 900, HasPeak: true, HighEvents: 7, OOM: OOM{Kills: 4, Events: 1}}
	if err != nil || m != want {
		t.Errorf("v2: %+v %v; want %+v", m, err, want)
	}
	m, err = ReadMemory(v2old)
	if err != nil || m.HasPeak || m.Current != 500 {
		t.Errorf("v2 without memory.peak: %+v %v; want a reading without a peak", m, err)
	}
	for dir, want := range map[string]uint64{v1: Unlimited, v2: Unlimited, v2old: 1 << 20} {
		if got, err := MemoryMax(dir); err != nil || got != want {
			t.Errorf("MemoryMax(%s) = %d, %v; want %d", dir, got, err, want)
		}
	}
}

func TestReadMemoryFakeRefusesEmptyAndGarbage(t *testing.T) {
	for name, files := range map[string]map[string]string{
		"no memory files":      {"cgroup.procs": ""},
		"empty current":        {"memory.current": "", "memory.events": "oom 0\n"},
		"garbage current":      {"memory.current": "lots\n", "memory.events": "oom 0\n"},
		"max as a counter":     {"memory.current": "max\n", "memory.events": "oom 0\n"},
		"garbage peak":         {"memory.current": "1\n", "memory.peak": "x\n", "memory.events": "oom 0\n"},
		"no memory.events":     {"memory.current": "1\n"},
		"garbage events":       {"memory.current": "1\n", "memory.events": "oom many\n"},
		"v1 without peak file": {"memory.usage_in_bytes": "1\n", "memory.oom_control": "under_oom 0\n"},
		"v1 garbage failcnt":   {"memory.usage_in_bytes": "1\n", "memory.max_usage_in_bytes": "1\n", "memory.oom_control": "under_oom 0\n", "memory.failcnt": "?\n"},
	} {
		if m, err := ReadMemory(fakeCgroupfs(t, files)); err == nil {
			t.Errorf("%s: read %+v; want an error", name, m)
		}
	}
	if _, err := ReadMemory(fakeCgroupfs(t, nil)); !errors.Is(err, ErrNotMemoryGroup) {
		t.Errorf("empty dir: %v; want ErrNotMemoryGroup", err)
	}
}

func TestWindowFakeV1ReadsItsFile(t *testing.T) {
	dir := fakeCgroupfs(t, map[string]string{"memory.usage_in_bytes": "10\n", "memory.max_usage_in_bytes": "7777\n"})
	w, err := OpenWindow(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The fake has no kernel to set the mark back to the current use, so the
	// written 0 is what a read finds: proof the window reset the v1 file.
	if p, err := w.Peak(); err != nil || p != 0 || !w.SinceOpen() {
		t.Errorf("after reset: peak %d, %v, since open %v", p, err, w.SinceOpen())
	}
}

func TestParseProcCgroupAndMountinfo(t *testing.T) {
	v2, v1 := parseProcCgroup([]byte("9:name=systemd:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/x\n0::/user.slice/rig.service\n"))
	if v2 != "/user.slice/rig.service" || v1["memory"] != "/process_api/abc" || v1["cpuacct"] != "/x" || v1["cpu"] != "/x" {
		t.Errorf("v2 %q v1 %v", v2, v1)
	}
	mi := "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"39 31 0:36 /docker/abc /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	if m, r, ok := parseMountinfo([]byte(mi), "memory"); !ok || m != "/sys/fs/cgroup/memory" || r != "/" {
		t.Errorf("memory: %q %q %v", m, r, ok)
	}
	if m, r, ok := parseMountinfo([]byte(mi), "pids"); !ok || m != "/sys/fs/cgroup/pids" || r != "/docker/abc" {
		t.Errorf("pids: %q %q %v", m, r, ok)
	}
	if _, _, ok := parseMountinfo([]byte(mi), "cpuset"); ok {
		t.Error("found a cpuset hierarchy that is not mounted")
	}
}
