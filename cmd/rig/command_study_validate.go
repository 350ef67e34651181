package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"rig/api"
)

func studyValidateCommand() *cobra.Command {
	return studySimpleCommand("validate", "Make one free validation run per harness: records, runtime and containment checked",
		func(ctx context.Context, c api.Client, req api.NameRequest, text io.Writer) error {
			_, err := c.Validate(ctx, req, text)
			return err
		})
}
