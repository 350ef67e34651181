package main

import (
	"fmt"
	"io"
	"rig/api"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func printStudy(w io.Writer, info api.StudyInfo) {
	fmt.Fprintf(w, "study      %s", info.Name)
	if info.Replayed {
		fmt.Fprint(w, " (idempotent repeat: existing study returned)")
	}
	fmt.Fprintf(w, "\nstate      %s\ndesign     sha256:%s\n", info.State, info.DesignHash)
	if info.SnapshotHash != "" {
		fmt.Fprintf(w, "snapshot   sha256:%s\n", info.SnapshotHash)
	}
	fmt.Fprintf(w, "store      %s\n", info.Store)
	if len(info.Licences) > 0 {
		fmt.Fprintln(w, "licences")
		for _, l := range info.Licences {
			fmt.Fprintln(w, "  "+l)
		}
	}
	printWarnings(w, info.Warnings)
	for _, e := range info.Executions {
		fmt.Fprintf(w, "execution  %s attempt %d: %s, %d/%d trials", e.ID, e.Attempt, e.Status, e.Done, e.Planned)
		if e.Failed > 0 {
			fmt.Fprintf(w, ", %d failed and not scored (rig study rerun %s retries them)", e.Failed, info.Name)
		}
		if e.Engine != "" {
			fmt.Fprintf(w, " through %s, %s", e.Engine, workerCounts(e.Workers))
		}
		if e.Error != "" {
			fmt.Fprintf(w, " (%s)", firstLineOf(e.Error))
		}
		fmt.Fprintln(w)
	}
	printGates(w, info)
	if info.Activity != "" {
		fmt.Fprintf(w, "now        %s\n", info.Activity)
	}
	if n := len(info.Audit); n > 0 {
		a := info.Audit[n-1]
		fmt.Fprintf(w, "last step  %s → %s by %s at %s: %s\n", a.From, a.To, a.Actor, a.At.Format(time.RFC3339), a.Why)
	}
}

func printStatus(cmd *cobra.Command, name string) (api.StudyInfo, error) {
	info, err := client(cmd).Status(cmd.Context(), api.NameRequest{Name: name})
	if err != nil {
		return info, err
	}
	printStudy(cmd.OutOrStdout(), info)
	return info, nil
}

// printAudit prints the whole audit log, one step a line, oldest first.
func printAudit(w io.Writer, audit []api.AuditEntry) {
	if len(audit) == 0 {
		return
	}
	fmt.Fprintln(w, "audit log")
	for _, a := range audit {
		from := string(a.From)
		if from == "" {
			from = "(new)"
		}
		fmt.Fprintf(w, "  %s  %-8s %s → %s  by %s", a.At.Format(time.RFC3339), a.Event, from, a.To, a.Actor)
		if a.Detail != "" {
			fmt.Fprintf(w, "; %s", a.Detail)
		}
		if a.Why != "" {
			fmt.Fprintf(w, "; why: %s", a.Why)
		}
		fmt.Fprintln(w)
	}
}

// workerCounts is "workers: a 3, b 2" in name order.
func workerCounts(ws map[string]int) string {
	if len(ws) == 0 {
		return "workers: none yet"
	}
	names := make([]string, 0, len(ws))
	for w := range ws {
		names = append(names, w)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, w := range names {
		parts[i] = fmt.Sprintf("%s %d", w, ws[w])
	}
	return "workers: " + strings.Join(parts, ", ")
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// printWarnings prints what the design alone says before any trial (a
// decision rule certain to assign one outcome).
func printWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintln(w, "warning    "+m)
	}
}
