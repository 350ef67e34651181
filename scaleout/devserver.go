package scaleout

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

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
	// waitErr is how the process ended (cmd.Wait's error), read after
	// exited is closed; logFrom is where this start's output begins in Log.
	waitErr error
	logFrom int64
	// stopped says Stop asked the server to end: its exit is then no
	// failure.
	stopped atomic.Bool
}

// Address is the frontend's host:port.
func (d *DevServer) Address() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(d.Port)) }

// Start starts the server and waits until its frontend answers. Every port
// it opens is on 127.0.0.1 (frontend, HTTP, metrics; the web UI is off).
//
// A port rig chose can still be taken by another process before the server
// binds it; the server then exits at once saying "address already in use",
// and Start tries again with new ports, three times in all. A port the
// caller fixed (Port) is not changed: taken, it is an error naming it.
func (d *DevServer) Start(ctx context.Context) error {
	if d.Bin == "" {
		return errors.New("no temporal binary: run make setup (it builds the Temporal CLI; installed.env names it as TEMPORAL_BIN)")
	}
	frontendChosen := d.Port == 0
	const attempts = 3
	for attempt := 1; ; attempt++ {
		if frontendChosen {
			p, err := runtimes.FreeLoopbackPort()
			if err != nil {
				return err
			}
			d.Port = p
		}
		err := d.startOnce(ctx)
		var taken portTakenError
		if !errors.As(err, &taken) || attempt == attempts {
			return err
		}
		if !frontendChosen && strings.Contains(err.Error(), ":"+strconv.Itoa(d.Port)+":") {
			return fmt.Errorf("%w (port %d is the one asked for: stop what holds it or choose another)", err, d.Port)
		}
	}
}

// portTakenError is a start that failed because a port was taken.
type portTakenError struct{ error }

func (e portTakenError) Unwrap() error { return e.error }

func (d *DevServer) startOnce(ctx context.Context) error {
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
	// Where this start's output begins: the log is appended to across
	// starts, and only this one's says why it stopped.
	var logFrom int64
	if d.Log != "" {
		f, err := os.OpenFile(d.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			logFrom = st.Size()
		}
		d.cmd.Stdout, d.cmd.Stderr = f, f
	}
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", d.Bin, err)
	}
	d.logFrom = logFrom
	d.stopped.Store(false)
	d.exited = make(chan struct{})
	go func() { d.waitErr = d.cmd.Wait(); close(d.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			last := lastLines(d.startOutput(logFrom), 3)
			err := fmt.Errorf("the temporal dev server exited at start (its log: %s): %s", d.logName(), last)
			if strings.Contains(last, "address already in use") {
				return portTakenError{err}
			}
			return err
		case <-ctx.Done():
			d.Stop()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if d.answers(ctx) {
			return nil
		}
	}
	d.Stop()
	return fmt.Errorf("the temporal dev server did not answer on %s within 60 s (its log: %s)", d.Address(), d.logName())
}

// answers says whether the frontend on the port is this server's. A TCP
// connect alone is accepted by any socket on the port, such as one that
// held it before the server tried to bind it (the server then exits saying
// "address already in use", after the connect succeeded), so the check is
// Temporal's own: a client's dial and health call, which only a Temporal
// frontend answers.
func (d *DevServer) answers(ctx context.Context) bool {
	c, err := net.DialTimeout("tcp", d.Address(), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	cl, err := client.DialContext(ctx, client.Options{HostPort: d.Address(), Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return false
	}
	defer cl.Close()
	_, err = cl.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err == nil
}

// startOutput is what the server wrote to its log since this start began.
func (d *DevServer) startOutput(logFrom int64) string {
	if d.Log == "" {
		return ""
	}
	f, err := os.Open(d.Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, logFrom, 1<<20))
	return string(b)
}

func (d *DevServer) logName() string {
	if d.Log == "" {
		return "none kept"
	}
	return d.Log
}

// lastLines is the last n non-empty lines of s, joined by " | ", or a word
// saying there were none.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "it wrote nothing to its log"
	}
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s).
func (d *DevServer) Stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	d.stopped.Store(true)
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
	}
}

// Wait blocks until the server exits. It is nil when Stop ended it, and
// otherwise an error naming how it ended (exit status or signal) with the
// last lines of its log: a server that dies on its own is a failure its
// supervisor must see.
func (d *DevServer) Wait() error {
	<-d.exited
	if d.stopped.Load() {
		return nil
	}
	how := "exit status 0"
	if d.waitErr != nil {
		how = d.waitErr.Error()
	}
	return fmt.Errorf("the temporal dev server on %s exited (%s; its log: %s): %s",
		d.Address(), how, d.logName(), lastLines(d.startOutput(d.logFrom), 5))
}
