package genrecord

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "GENRECORD_CRASH_CHILD"

// crashChild runs in the re-executed test binary: it appends rows forever,
// printing "row N" after each synced append, until the parent kills it.
// In "tear" mode it writes half of row tearAt, says so, and hangs, so the
// SIGKILL lands mid-line for certain; in "split" mode every line goes out
// in two writes with a pause between, so a kill often lands mid-line.
func crashChild(path, mode string) {
	m := fakeModel{salt: "smol", vocab: 40}
	w, err := OpenWriter(path, testPins())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	const tearAt = 25
	for i := 0; ; i++ {
		switch {
		case mode == "tear" && i == tearAt:
			w.write = func(b []byte) (int, error) {
				n, err := w.f.Write(b[:len(b)/2])
				w.f.Sync()
				fmt.Println("torn-pending")
				time.Sleep(time.Minute)
				return n, err
			}
		case mode == "split":
			w.write = func(b []byte) (int, error) {
				n1, err := w.f.Write(b[:len(b)/2])
				if err != nil {
					return n1, err
				}
				time.Sleep(200 * time.Microsecond)
				n2, err := w.f.Write(b[len(b)/2:])
				return n1 + n2, err
			}
		}
		if err := w.Append(makeRow(m, i, 5+i%7)); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("row", i)
	}
}

func TestCrashKill(t *testing.T) {
	if spec := os.Getenv(crashEnv); spec != "" {
		mode, path, _ := strings.Cut(spec, ":")
		crashChild(path, mode)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	for _, tc := range []struct {
		mode      string
		afterRows int
		wantTorn  bool // true: must be torn; false: may be torn or clean
	}{
		{mode: "tear", wantTorn: true},
		{mode: "split", afterRows: 40},
		{mode: "plain", afterRows: 60},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "generations.jsonl")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashEnv+"="+tc.mode+":"+path)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := 0
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				line := sc.Text()
				if strings.HasPrefix(line, "error") {
					t.Fatalf("child: %s", line)
				}
				if strings.HasPrefix(line, "row ") {
					acked++
				}
				if line == "torn-pending" || tc.afterRows > 0 && acked >= tc.afterRows {
					break
				}
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()

			m := fakeModel{salt: "smol", vocab: 40}
			_, rows, err := ReadAll(path)
			var torn *TornLineError
			switch {
			case err == nil && tc.wantTorn:
				t.Fatalf("killed mid-line but no torn line reported (%d rows)", len(rows))
			case err != nil && !errors.As(err, &torn):
				t.Fatalf("read after crash: %v", err)
			}
			if torn != nil && torn.Line != len(rows)+2 {
				t.Errorf("torn line reported at %d, want %d (after header and %d rows)", torn.Line, len(rows)+2, len(rows))
			}
			if len(rows) < acked {
				t.Fatalf("%d rows on disk, child had synced %d", len(rows), acked)
			}
			for i, r := range rows {
				if want := makeRow(m, i, 5+i%7); !reflect.DeepEqual(r, want) {
					t.Fatalf("row %d damaged by the crash", i)
				}
			}
			t.Logf("%s: %d rows intact, torn tail: %v", tc.mode, len(rows), torn)
		})
	}
}
