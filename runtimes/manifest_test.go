package runtimes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The same model imported into two directories has two manifest files that
// differ only in each layer's "from" path; its fingerprint must not.
func TestManifestDigestIgnoresBlobPaths(t *testing.T) {
	write := func(dir, from string) string {
		p := filepath.Join(dir, "manifests", "registry.ollama.ai", "library", "rig-m")
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		body := `{"schemaVersion":2,"mediaType":"m","config":{"mediaType":"c","digest":"sha256:cc","size":1},"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:aa","size":9,"from":"FROM"},{"mediaType":"t","digest":"sha256:bb","size":3}]}`
		if err := os.WriteFile(filepath.Join(p, "pinned"), []byte(strings.Replace(body, "FROM", from, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, err := manifestDigest(write(t.TempDir(), "/one/blobs/sha256-aa"), "rig-m:pinned")
	if err != nil {
		t.Fatal(err)
	}
	b, err := manifestDigest(write(t.TempDir(), "/two/blobs/sha256-aa"), "rig-m:pinned")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || len(a) != 64 {
		t.Errorf("digests %q and %q differ for the same layers", a, b)
	}
	// A different layer is a different model.
	dir := t.TempDir()
	p := filepath.Join(dir, "manifests", "registry.ollama.ai", "library", "rig-m")
	os.MkdirAll(p, 0o700)
	os.WriteFile(filepath.Join(p, "pinned"), []byte(`{"schemaVersion":2,"config":{"digest":"sha256:cc"},"layers":[{"digest":"sha256:ab","size":9}]}`), 0o600)
	if c, err := manifestDigest(dir, "rig-m:pinned"); err != nil || c == a {
		t.Errorf("another layer gave digest %q (err %v), want one that differs from %q", c, err, a)
	}
	if _, err := manifestDigest(t.TempDir(), "rig-m:pinned"); err == nil {
		t.Error("a missing manifest gave no error")
	}
}
