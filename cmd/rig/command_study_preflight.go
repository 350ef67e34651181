package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"rig/api"
)

func studyPreflightCommand() *cobra.Command {
	return studySimpleCommand("preflight", "Decide and record, per arm, whether it fits at the study's card profile",
		func(ctx context.Context, c api.Client, req api.NameRequest, text io.Writer) error {
			_, err := c.Preflight(ctx, req, text)
			return err
		})
}
