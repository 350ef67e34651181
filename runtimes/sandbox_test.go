package runtimes

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func unixClient(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}, Timeout: 10 * time.Second}
}

func TestSandboxIsLoopbackOnlyAndForwards(t *testing.T) {
	dir := t.TempDir()
	sock, err := socketPath(dir, "srv.sock")
	if err != nil {
		t.Fatal(err)
	}
	env, err := BuildEnv(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("inside"), 0o600)
	sb, err := StartSandbox(context.Background(), SandboxSpec{
		Argv:    []string{"python3", "-m", "http.server", "8123", "--bind", "127.0.0.1"},
		Env:     env,
		Dir:     dir,
		Inbound: []Forward{{Socket: sock, Port: 8123}},
	}, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(2 * time.Second)
	c := sb.Containment
	if !c.Sandboxed || !c.LoopbackOnly || c.NetNS == c.ParentNetNS || c.NetNS == "" {
		t.Fatalf("containment not established: %+v", c)
	}
	for _, iface := range c.Interfaces {
		if !strings.HasPrefix(iface, "lo ") {
			t.Errorf("non-loopback interface in sandbox: %q", iface)
		}
	}
	host, err := ReadHostContainment()
	if err != nil {
		t.Fatal(err)
	}
	if host.NetNS == c.NetNS {
		t.Fatal("sandbox shares the host namespace")
	}
	var body []byte
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := unixClient(sock).Get("http://sandbox/hello.txt")
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if string(body) != "inside" {
		t.Fatalf("forwarded GET returned %q", body)
	}
}

func TestSandboxRefusesANonLoopbackInterface(t *testing.T) {
	dir := t.TempDir()
	env, _ := BuildEnv(dir, nil)
	_, err := StartSandbox(context.Background(), SandboxSpec{
		Argv: []string{"sleep", "30"}, Env: env, Dir: dir, AddDummyInterface: true,
	}, filepath.Join(dir, "log"))
	if !errors.Is(err, ErrNotContained) {
		t.Fatalf("want ErrNotContained, got %v", err)
	}
	if !strings.Contains(err.Error(), "rigleak0") {
		t.Errorf("error does not name the interface: %v", err)
	}
}

func TestSandboxEnvironmentIsAllowlisted(t *testing.T) {
	t.Setenv("STUDIO_API_KEY", "sk-should-not-leak")
	t.Setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
	t.Setenv("OLLAMA_HOST", "0.0.0.0:1")
	dir := t.TempDir()
	out := filepath.Join(dir, "env.txt")
	env, err := BuildEnv(dir, map[string]string{"RIG_MARK": "1"})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := StartSandbox(context.Background(), SandboxSpec{
		Argv: []string{"sh", "-c", "env > " + out}, Env: env, Dir: dir,
	}, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.ExitError(); err != nil {
		t.Fatal(err, sb.LogTail(5))
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"sk-should-not-leak", "STUDIO_API_KEY", "HTTPS_PROXY", "OLLAMA_HOST"} {
		if strings.Contains(string(got), leak) {
			t.Errorf("%s reached the sandbox", leak)
		}
	}
	if !strings.Contains(string(got), "HOME="+dir) || !strings.Contains(string(got), "RIG_MARK=1") {
		t.Errorf("private HOME or explicit variable missing:\n%s", got)
	}
	if _, err := BuildEnv(dir, map[string]string{"OPENAI_API_KEY": "x"}); err == nil {
		t.Error("a credential-like explicit variable was accepted")
	}
}

func TestSandboxRefusesABusySocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "busy.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env, _ := BuildEnv(dir, nil)
	_, err = StartSandbox(context.Background(), SandboxSpec{
		Argv: []string{"sleep", "1"}, Env: env, Inbound: []Forward{{Socket: sock, Port: 1}},
	}, filepath.Join(dir, "log"))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("want ErrBusy, got %v", err)
	}
}

func TestSandboxMissingBinary(t *testing.T) {
	dir := t.TempDir()
	_, err := StartSandbox(context.Background(), SandboxSpec{Argv: []string{filepath.Join(dir, "no-such-runtime")}}, filepath.Join(dir, "log"))
	if !errors.Is(err, ErrBinaryMissing) {
		t.Fatalf("want ErrBinaryMissing, got %v", err)
	}
}

func TestSocketPathFitsAUnixAddress(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("study-directory-", 8))
	p, err := socketPath(long, "llama-server.sock")
	if err != nil {
		t.Fatal(err)
	}
	if len(p) >= 108 {
		t.Fatalf("socket path %d bytes long: %s", len(p), p)
	}
	q, _ := socketPath(long+"-other", "llama-server.sock")
	if p == q {
		t.Fatal("two work directories share one socket path")
	}
	// Never inside the work folder, which the sandbox binds writable.
	short, _ := socketPath("/tmp/x", "a.sock")
	if within(short, "/tmp/x") || !strings.HasSuffix(short, "-a.sock") {
		t.Fatalf("socket for /tmp/x placed at %s", short)
	}
}
