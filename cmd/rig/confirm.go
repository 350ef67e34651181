package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

// confirm says whether a command that records something final (a decision,
// an amendment) goes ahead: under --yes at once; with no terminal to ask on
// it refuses, and nothing is recorded; otherwise show prints what will be
// recorded (the daemon's preview) and the person is asked.
func confirm(cmd *cobra.Command, yes bool, question string, show func() error) (bool, error) {
	if yes {
		return true, nil
	}
	if !isTerminal(cmd.InOrStdin()) {
		return false, fmt.Errorf("%s: stdin is not a terminal, so rig cannot ask before recording, and nothing was recorded (add --yes to record without asking)", cmd.CommandPath())
	}
	if err := show(); err != nil {
		return false, err
	}
	ok, err := ask(cmd, question)
	if err == nil && !ok {
		fmt.Fprintln(cmd.OutOrStdout(), "Not recorded.")
	}
	return ok, err
}

// isTerminal reports whether r is a terminal a person can answer on; a pipe
// or /dev/null (a character device, but no terminal) is not.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// ask prints question with a [y/N] prompt and reads one line of the
// command's stdin: only y or yes, in any case, is yes.
func ask(cmd *cobra.Command, question string) (bool, error) {
	fmt.Fprintf(cmd.OutOrStdout(), "%s [y/N] ", question)
	answer, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
