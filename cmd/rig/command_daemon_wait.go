package main

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"rig/api"
)

// newDaemonWaitCommand builds `rig daemon wait`: scripts that start the
// daemon in the background wait on it instead of sleeping a guessed time.
func newDaemonWaitCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait",
		Short: "Wait until the daemon answers on its socket",
		Long: `wait returns as soon as a rig daemon accepts connections on the socket
($RIG_HOME/rig.sock, or --socket), and fails after --timeout when none does.

  rig daemon > daemon.log 2>&1 &
  rig daemon wait

Exit status 0 once the daemon answers, 1 when the timeout passes first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sock := socketPath(cmd)
			deadline := time.Now().Add(timeout)
			for {
				if c, err := net.DialTimeout("unix", sock, 200*time.Millisecond); err == nil {
					c.Close()
					fmt.Fprintf(cmd.OutOrStdout(), "rig daemon answers on %s\n", sock)
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%w on %s within %s (start one with: rig daemon &; if one was started, its own output says why it stopped)", api.ErrNoDaemon, sock, timeout)
				}
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "how long to wait")
	return cmd
}
