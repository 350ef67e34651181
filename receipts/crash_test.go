package receipts

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	crashEnv    = "RIG_RECEIPTS_CRASH_DB"
	crashTrials = 120
)

// TestCrashWriterProcess is the child of TestKillDuringWrites: it writes the
// receipts of crashTrials trials, resuming from what the store holds, and
// prints each key once its transaction has committed. Every seventh trial is
// preempted once first, so reruns are part of what a crash can interrupt.
func TestCrashWriterProcess(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("run only as the child of TestKillDuringWrites")
	}
	ctx := context.Background()
	s, err := Open(path, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done, err := s.Counted(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range crashTrials {
		k := TrialKey{Arm: []string{"a", "b"}[i%2], TaskID: fmt.Sprintf("t%03d", i), Repeat: 0}
		if _, ok := done[k]; ok {
			continue
		}
		for {
			attempt, _, err := s.NextAttempt(ctx, "e1", k)
			if err != nil {
				t.Fatal(err)
			}
			out := Scored
			if i%7 == 0 && attempt == 1 {
				out = Preempted
			}
			r := sample(k.Arm, k.TaskID, k.Repeat, attempt, out)
			if err := s.PutReceipt(ctx, r); err != nil {
				t.Fatal(err)
			}
			fmt.Printf("ACK %s#%d\n", k, attempt)
			if out.Counted() {
				break
			}
		}
	}
}

// TestKillDuringWrites kills a writing process with SIGKILL at random points,
// ten times, resuming each time, and then checks that every acknowledged
// receipt survived, that the store passes Check, and that each trial is
// counted exactly once.
func TestKillDuringWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "s1.db")
	s, _ := openFrozenAt(t, path)
	s.Close()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	acked := map[string]bool{}
	run := func(killAfter int) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for sc.Scan() {
			if key, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
				acked[key] = true
				n++
				if killAfter > 0 && n >= killAfter {
					_ = cmd.Process.Kill()
					break
				}
			}
		}
		_ = cmd.Wait()
	}
	for range 10 {
		run(1 + rng.IntN(25))
	}
	run(0) // let the last one finish

	s2, err := Open(path, "s1")
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ctx := context.Background()
	sum, err := s2.Check(ctx)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	all, err := s2.Receipts(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, r := range all {
		stored[fmt.Sprintf("%s#%d", r.Trial(), r.Attempt)] = true
	}
	for k := range acked {
		if !stored[k] {
			t.Errorf("seed %d: acknowledged receipt %s was lost", seed, k)
		}
	}
	if sum.Counted != crashTrials {
		t.Errorf("seed %d: %d trials counted, want %d", seed, sum.Counted, crashTrials)
	}
	wantPreempted := (crashTrials + 6) / 7
	if sum.Receipts != crashTrials+wantPreempted {
		t.Errorf("seed %d: %d receipts, want %d", seed, sum.Receipts, crashTrials+wantPreempted)
	}
}
