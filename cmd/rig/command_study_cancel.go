package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"rig/api"
)

func studyCancelCommand() *cobra.Command {
	return studySimpleCommand("cancel", "Stop the study's running execution (its receipts stay)",
		func(ctx context.Context, c api.Client, req api.NameRequest, _ io.Writer) error {
			_, err := c.Cancel(ctx, req)
			return err
		})
}
