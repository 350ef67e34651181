package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"rig/api"
)

func studyFreezeCommand() *cobra.Command {
	return studySimpleCommand("freeze", "Freeze the design: pins resolved to digests, tasks validated, snapshot hashed",
		func(ctx context.Context, c api.Client, req api.NameRequest, _ io.Writer) error {
			_, err := c.Freeze(ctx, req)
			return err
		})
}
