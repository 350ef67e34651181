package main

import (
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"rig/api"
	"rig/daemon"
	"rig/internal/metrics"
)

func homeDir(cmd *cobra.Command) string {
	if h, _ := cmd.Flags().GetString("home"); h != "" {
		return h
	}
	return api.DefaultHome()
}

func socketPath(cmd *cobra.Command) string {
	if s, _ := cmd.Flags().GetString("socket"); s != "" {
		return s
	}
	return api.SocketIn(homeDir(cmd))
}

// client is the daemon's typed client on the socket the flags name: every
// call a command makes to the daemon goes through it. A command that calls
// more than once (follow polls every 2 s) keeps the one it made, and with it
// one transport.
func client(cmd *cobra.Command) api.Client { return api.NewClient(socketPath(cmd)) }

func newDaemonCommand() *cobra.Command {
	var noSandbox bool
	var policy string
	var engine *daemon.EngineConfig
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the resident process that owns the card and runs studies",
		Long: `daemon is rig's resident process: one per machine, whatever its RIG_HOME. It
takes a machine-wide lock at start (an flock on /run/lock/rig-daemon.lock, or
rig-daemon.lock in the temporary directory where /run/lock is absent); a second
daemon is refused, naming the lock file and the pid and RIG_HOME of the one that
holds it. RIG_DAEMON_LOCK names another lock file: only for tests that start a
private daemon per RIG_HOME, never beside a daemon that drives the real card.

It owns the card, runs the safety governor and its watchdog, serves the command
line over a unix socket (default $RIG_HOME/rig.sock), and runs one execution at
a time.

Who may do what comes from a policy file (--policy, else $RIG_POLICY, else
/etc/rig/policy.json when it exists): users and groups mapped to the roles
staff, reviewer, director and operator, and optionally a socket_group whose
members may connect (the socket is then 0660 and its folder 0750, owned by the
group: give it a folder of its own, e.g. /run/rig). The daemon reads each
caller's uid from the socket and records that identity in every audit entry.
The file must belong to root or the daemon's user and be writable by nobody
else, or the daemon refuses to start; SIGHUP reloads it, and every policy in
force is logged in $RIG_HOME/audits/policy.jsonl. With no policy file the
daemon's own user holds every role, the socket is 0600, nobody else may
connect, and separation of duties is not enforced (it says so at start).
Executions survive the command line going away; if the daemon itself is killed,
starting it again resumes every execution that was running, with no receipt lost
or duplicated.

The governor's thresholds are the defaults unless $RIG_HOME/governor.json
overrides them (poll_ms, heartbeat_ms, grace_ms, read_timeout_ms and policies,
e.g. {"policies":{"hung-runtime":{"limit":30}}}); a file with an impossible
value stops the daemon at start, naming the file, the field and the fix.

With --temporal HOST:PORT and --spool DIR it is also the coordinator of
scale-out runs (rig study run NAME --engine temporal): it submits them to
that Temporal cluster and merges what the rig workers return.

It serves Prometheus metrics at http://127.0.0.1:9479/metrics (--metrics
HOST:PORT elsewhere, off for none; a default port taken by another process of
the daemon's own account gives way to a free loopback one, logged; taken by
another account it stops the daemon, naming who holds it). docs/scale-out.md lists them.

  rig daemon &                 start it (or under systemd: deploy/systemd/rig-daemon.service)
  rig study status NAME        follow a study`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := daemon.Options{Home: homeDir(cmd), Socket: socketPath(cmd), NoSandbox: noSandbox, Policy: policy,
				Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
			opts.Metrics, opts.MetricsDefault = metricsAddr(cmd) // metrics (metrics.go)
			if engine.Address != "" || engine.Spool != "" {
				if err := engine.Check(); err != nil {
					return err
				}
				opts.Engine = engine
			}
			return daemon.Run(cmd.Context(), opts)
		},
	}
	engine = engineFlags(cmd)
	cmd.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run runtimes without network namespaces (recorded on every receipt)")
	cmd.Flags().StringVar(&policy, "policy", daemon.PolicyPath(), "the policy file (roles of users and groups); empty: single-user mode")
	metricsFlag(cmd, metrics.DaemonAddr)
	cmd.AddCommand(newDaemonWaitCommand())
	return cmd
}
