// Command rig registers, freezes and runs model-comparison studies of local
// LLMs on local hardware, each model in its native runtime inside a
// loopback-only sandbox. `rig daemon` is the resident process; the other
// commands are its command line.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	// The sandbox re-executes rig itself; importing runtimes installs that hook.
	_ "rig/runtimes"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCommand()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is how a command's error is printed: one "rig:" prefix. An error
// can carry one already when it quotes another rig process (a worker, the
// sandbox's init, a bench's child) whose output began with its own.
func errorLine(err error) string {
	msg := err.Error()
	for {
		rest, ok := strings.CutPrefix(msg, "rig:")
		if !ok {
			break
		}
		msg = strings.TrimLeft(rest, " ")
	}
	return "rig: " + msg
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "rig",
		Short: "Run model-comparison studies of local LLMs on local hardware",
		Long: `rig runs several local LLMs on the same task banks, each in the runtime where it
would really be deployed (Ollama, llama-server, Aider), inside a loopback-only
sandbox, grades the outputs blind and decides by a rule written before any run.

Start here:
  make setup               provision the runtimes and models (idempotent, cached)
  rig runtimes check       what is installed, where, its version and sha256
  rig runtimes smoke       one short generation on each runtime x model`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("home", "", "where studies live (default $RIG_HOME or ~/.local/share/rig)")
	root.PersistentFlags().String("socket", "", "the daemon's unix socket (default HOME/rig.sock)")
	root.AddCommand(newRuntimesCommand(), newDaemonCommand(), newUICommand(), newStudyCommand(), newProposalCommand(), newBudgetCommand(), newReplayCommand(), newReceiptsCommand(), newBenchCommand(), newGradeCommand(), newWorkerCommand(), newEngineCommand(), newTryCommand(), newExportCommand(), newCompareCommand())
	addLeafCommands(root)
	return root
}
