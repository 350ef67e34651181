package scaleout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"rig/runtimes"
)

// DevServer is the Temporal CLI's dev server (temporal server start-dev) on
// loopback, with its state in a SQLite file so that it survives a restart:
// the engine for tests and single hosts, never for a studio's production.
type DevServer struct {
	Bin    string // the temporal binary (provision.Installed.Temporal)
	DB     string // its SQLite file
	Port   int    // the frontend's port on 127.0.0.1
	Log    string // where its output goes
	cmd    *exec.Cmd
	exited chan struct{}
}

// Address is the frontend's host:port.
func (d *DevServer) Address() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port)) }

// Start starts the server and waits until its frontend answers. Every port
// it opens is on 127.0.0.1 (frontend, HTTP, metrics; the web UI is off).
func (d *DevServer) Start(ctx context.Context) error {
	if d.Bin == "" {
		return errors.New("no temporal binary: run make setup (it builds the Temporal CLI; installed.env names it as TEMPORAL_BIN)")
	}
	if d.Port == 0 {
		p, err := runtimes.FreeLoopbackPort()
		if err != nil {
			return err
		}
		d.Port = p
	}
	httpPort, err := runtimes.FreeLoopbackPort()
	if err != nil {
		return err
	}
	metricsPort, err := runtimes.FreeLoopbackPort()
	if err != nil {
		return err
	}
	args := []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", strconv.Itoa(d.Port),
		"--http-port", strconv.Itoa(httpPort), "--metrics-port", strconv.Itoa(metricsPort), "--log-level", "warn",
		// One partition per task queue: on a single host, the default four
		// only add a forwarding hop between a poll and its task.
		"--dynamic-config-value", "matching.numTaskqueueReadPartitions=1",
		"--dynamic-config-value", "matching.numTaskqueueWritePartitions=1",
		// A merge is scheduled on the coordinator's own queue, which the
		// worker running the chunk workflow serves: handed back with the
		// workflow task's answer, it skips a round of matching.
		"--dynamic-config-value", "system.enableActivityEagerExecution=true",
		// The history service reads its queue of tasks to hand to matching
		// at most 20 times a second by default: every activity and workflow
		// task then waits about 48 ms before a worker can take it, which is
		// most of a trial's engine overhead (rig bench scale: 47.9 ms → 3 ms
		// one in flight).
		"--dynamic-config-value", "history.transferProcessorMaxPollRPS=2000"}
	if d.DB != "" {
		args = append(args, "--db-filename", d.DB)
	}
	d.cmd = exec.Command(d.Bin, args...)
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if d.Log != "" {
		f, err := os.OpenFile(d.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		d.cmd.Stdout, d.cmd.Stderr = f, f
	}
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", d.Bin, err)
	}
	d.exited = make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("the temporal dev server exited at start (its log: %s)", d.Log)
		case <-ctx.Done():
			d.Stop()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if c, err := net.DialTimeout("tcp", d.Address(), time.Second); err == nil {
			c.Close()
			return nil
		}
	}
	d.Stop()
	return fmt.Errorf("the temporal dev server did not answer on %s within 60 s (its log: %s)", d.Address(), d.Log)
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s).
func (d *DevServer) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
	}
}

// Wait blocks until the server exits.
func (d *DevServer) Wait() { <-d.exited }
