package preflight

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var projectedLine = regexp.MustCompile(`projected to use (\d+) MiB of (host|device) memory`)

// FitDryRun asks llama-server itself what a run at p would use: it starts
// the server with --fit on, reads llama.cpp's projection (made before any
// weight is loaded) and stops the server at once. The projection covers
// model, context and compute buffers, not the process's own overhead. The
// answer is kept as evidence beside rig's verdict; it never changes the pins.
func FitDryRun(ctx context.Context, serverBin, model string, p Profile) (Size, Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	port, err := freePort()
	if err != nil {
		return 0, Evidence{}, err
	}
	args := []string{"--host", "127.0.0.1", "--port", strconv.Itoa(port), "-m", model,
		"-c", strconv.Itoa(p.Context * p.slots()), "-np", strconv.Itoa(p.slots()),
		"--cache-type-k", p.kvType(), "--cache-type-v", p.kvType(), "--fit", "on", "-lv", "4"}
	if !p.Simulated {
		ngl := p.OffloadLayers
		if ngl == OffloadAll {
			ngl = 999
		}
		args = append(args, "-ngl", strconv.Itoa(ngl), "--fit-target", "0")
	} else {
		args = append(args, "-ngl", "0")
	}
	ev := Evidence{Source: "llama-server --fit on (dry run, stopped after the projection)"}
	cmd := exec.CommandContext(ctx, serverBin, args...)
	out, err := cmd.StderrPipe()
	if err != nil {
		return 0, ev, err
	}
	cmd.Stdout = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, ev, fmt.Errorf("preflight: fit dry run: %w", err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	var total Size
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "fit") {
			continue
		}
		lines = append(lines, strings.TrimSpace(line))
		if m := projectedLine.FindStringSubmatch(line); m != nil {
			mib, _ := strconv.Atoi(m[1])
			total += Size(mib) * MiB
		}
		if strings.Contains(line, "fitting params to free memory took") || strings.Contains(line, "failed to fit") {
			break
		}
	}
	ev.Output = strings.Join(lines, "\n")
	if total == 0 {
		return 0, ev, fmt.Errorf("preflight: fit dry run: llama-server printed no projection: %s", tail(ev.Output, 400))
	}
	ev.Says = fmt.Sprintf("llama.cpp projects %s (model + context + compute)", total)
	return total, ev, nil
}

// FitPrint asks llama.cpp itself (llama-fit-params --fit-print on, a dry run
// that builds the model and context without allocating) what the run needs,
// and returns the host total and the raw answer as evidence.
func FitPrint(ctx context.Context, fitBin, model string, p Profile) (Size, Evidence, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	args := []string{"--fit-print", "on", "-m", model, "-c", strconv.Itoa(p.Context * p.slots()), "-np", strconv.Itoa(p.slots()),
		"--cache-type-k", p.kvType(), "--cache-type-v", p.kvType(), "-ngl", "0"}
	cmd := exec.CommandContext(ctx, fitBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ev := Evidence{Source: "llama-fit-params --fit-print on " + strings.Join(args[2:], " ")}
	if err := cmd.Run(); err != nil {
		ev.Output = tail(stderr.String(), 2000)
		return 0, ev, fmt.Errorf("preflight: llama-fit-params: %w: %s", err, tail(stderr.String(), 400))
	}
	ev.Output = stdout.String()
	var total float64
	for _, line := range strings.Split(stdout.String(), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 4 {
			continue
		}
		for _, x := range fs[len(fs)-3:] {
			v, err := strconv.ParseFloat(x, 64)
			if err == nil {
				total += v
			}
		}
	}
	ev.Says = fmt.Sprintf("model + context + compute = %.0f MiB (device lines: %s)", total, strings.Join(strings.Fields(strings.ReplaceAll(stdout.String(), "\n", "; ")), " "))
	return Size(total * float64(MiB)), ev, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
