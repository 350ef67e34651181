package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newUICommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ui",
		Short: "Print the URL of the read-only workspace (every study's report and live progress)",
		Long: `rig ui asks the running daemon for its workspace and prints the URL to open:

    http://127.0.0.1:PORT/?token=TOKEN

The daemon starts the workspace on the first call; each call prints a URL
with a fresh token. A URL opens the workspace once: the first load trades
its token for a session cookie (HttpOnly, SameSite=Strict) and drops the
token from the address bar, and the same URL opened again is refused (403).
A token nobody used expires after 10 minutes. For another browser, run
rig ui again. The workspace shows, for every study on this
machine, the same report page rig study report writes (gate slider, paired
rows, receipts) and the live progress of a running execution: trials done,
rate, ETA, current arm, preempted and capped counts and the governor's state.

It is read-only (GET only; nothing in it starts, cancels or decides), it
listens on 127.0.0.1 alone, never on another address, and it answers 403 to
any request without an unused token or the session's cookie. The token is
printed here and nowhere else: open the URL promptly, and treat it like a
password until then. To reach it from another
machine, forward the port over SSH (ssh -L PORT:127.0.0.1:PORT HOST) rather
than exposing it.

The daemon must be running (rig daemon, or the systemd unit).`,
		Example: "  rig ui\n  xdg-open \"$(rig ui)\"",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := client(cmd).UI(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), info.URL)
			return nil
		},
	}
}
