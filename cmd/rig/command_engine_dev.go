package main

import (
	"os/signal"
	"path/filepath"
	"rig/api"
	"rig/daemon"
	"rig/internal/provision"
	"syscall"

	"github.com/spf13/cobra"
)

func newEngineCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "engine", Short: "The scale-out engine (Temporal) on a single host"}
	var db, installedEnv string
	var port int
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run the Temporal CLI's dev server on loopback, its state in a SQLite file",
		Long: `dev runs the Temporal dev server that make setup builds (temporal server
start-dev), bound to 127.0.0.1 with its web UI off and its state in --db, so
that a restart loses nothing. It is the engine for a single host and for
tests; a studio's production names an existing cluster instead.

  rig engine dev --db ~/.local/share/rig/temporal.db --port 7233 &
  rig daemon --temporal 127.0.0.1:7233 --spool ~/.local/share/rig/spool &
  rig worker --temporal 127.0.0.1:7233 --spool ~/.local/share/rig/spool &`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return daemon.RunEngineDev(ctx, daemon.EngineDevOptions{InstalledEnv: installedEnv, DB: db, Port: port}, cmd.OutOrStdout())
		},
	}
	dev.Flags().StringVar(&db, "db", filepath.Join(api.DefaultHome(), "temporal.db"), "the server's SQLite file")
	dev.Flags().IntVar(&port, "port", 7233, "the frontend's port on 127.0.0.1")
	dev.Flags().StringVar(&installedEnv, "installed-env", provision.Path(), "env file naming the provisioned components")
	cmd.AddCommand(dev)
	return cmd
}
