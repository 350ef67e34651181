package runtimes

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A settled file's sum is kept; the file rewritten in place with the same
// size and its mtime set back is hashed again (the cache keys on ctime too,
// which no unprivileged process can set back), and a file written a moment
// ago is never kept.
func TestStampedSumFollowsAnyChange(t *testing.T) {
	p := filepath.Join(t.TempDir(), "llama-server")
	if err := os.WriteFile(p, []byte("build one"), 0o755); err != nil {
		t.Fatal(err)
	}
	first, err := stampedSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, kept := stampedSums.Load(p); kept {
		t.Fatal("the sum of a file written a moment ago was kept")
	}
	time.Sleep(settled + 100*time.Millisecond)
	if again, _ := stampedSHA256(p); again != first {
		t.Fatalf("the same file hashed %s then %s", first, again)
	}
	if _, kept := stampedSums.Load(p); !kept {
		t.Fatal("the sum of a settled file was not kept")
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("build two"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	got, err := stampedSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := FileSHA256(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || got == first {
		t.Fatalf("after an in-place rewrite with the mtime set back: %s, the file's %s, the first %s", got, want, first)
	}
}
