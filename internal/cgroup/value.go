package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// Unlimited is what a limit reads as when its file says there is none.
const Unlimited = math.MaxUint64

// v1NoLimit is the smallest value v1 prints for "no limit": the kernel's
// PAGE_COUNTER_MAX (2^63-1 bytes) rounded down to a page, 9223372036854771712
// with 4 KiB pages. Larger pages round it further down, so anything at or
// above 2^62 counts; no machine has that much memory to limit.
const v1NoLimit = 1 << 62

// ErrBadValue marks a cgroup file whose content is not what the kernel writes
// there: empty, not a number, or "max" where only a count can be.
var ErrBadValue = errors.New("unexpected cgroup file content")

// parseCounter reads a counter (current, peak, a pid count): a plain decimal.
func parseCounter(path string, b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %q is not a count", path, ErrBadValue, s)
	}
	return n, nil
}

// parseLimit reads a limit: a decimal, or "max" (v2) or v1's no-limit value,
// both of which read as Unlimited. This is the one place "max" is read.
func parseLimit(path string, b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return Unlimited, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %q is neither a number nor \"max\"", path, ErrBadValue, s)
	}
	if n >= v1NoLimit {
		return Unlimited, nil
	}
	return n, nil
}

// parseKeyed reads the "key value" lines of memory.events, memory.oom_control
// and pids.events. A line whose value is not a count is an error, so a
// garbled file cannot read as "no events".
func parseKeyed(path string, b []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("%s: %w: line %q is not \"key value\"", path, ErrBadValue, sc.Text())
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: line %q: value is not a count", path, ErrBadValue, sc.Text())
		}
		out[f[0]] = n
	}
	return out, sc.Err()
}

// parsePids reads cgroup.procs: one pid a line.
func parsePids(path string, b []byte) ([]int, error) {
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil || p <= 0 {
			return nil, fmt.Errorf("%s: %w: %q is not a pid", path, ErrBadValue, f)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

func readCounter(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseCounter(path, b)
}

func readLimit(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseLimit(path, b)
}

func readKeyed(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeyed(path, b)
}

// Procs lists the pids in the group at dir.
func Procs(dir string) ([]int, error) {
	path := dir + "/cgroup.procs"
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parsePids(path, b)
}

// parseCPUList reads the kernel's CPU list format ("0-3,8,10-11").
func parseCPUList(path string, b []byte) ([]int, error) {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil, fmt.Errorf("%s: %w: empty CPU list", path, ErrBadValue)
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		z := a
		if err == nil && found {
			z, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || z < a || z-a > 1<<16 {
			return nil, fmt.Errorf("%s: %w: %q is not a CPU range", path, ErrBadValue, part)
		}
		for c := a; c <= z; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
