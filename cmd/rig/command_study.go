package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"rig/api"
	"rig/daemon"
	"rig/report"
	"rig/studies"
)

func newStudyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "study",
		Short: "Register, review, approve, freeze, run and decide a model-comparison study",
		Long: `A study goes draft → reviewed → approved → frozen → running → decided, or is
withdrawn before its first counted run. Each step
is checked and audited (who, when, why). All commands but init talk to the
resident daemon (rig daemon), which owns the study stores and the card. Who
you are is what the daemon reads from the socket (your uid), never a flag; the
roles each step needs come from the daemon's policy (docs/security.md). Under a
policy, the registrant may not review or approve, and the reviewer may not
approve.

  rig study init design.yaml                 a commented example to edit
  rig study register design.yaml             licences checked, pins fingerprinted
  rig study review NAME --verdict pass --licence-line "..."   (reviewer role)
  rig study approve NAME                     (director role)
  rig study freeze NAME                      content-addressed snapshot
  rig study preflight NAME                   fit verdict per arm at the card profile
  rig study validate NAME                    one free validation run per harness
  rig study run NAME                         counted run, with progress
  rig study status NAME | cancel NAME | rerun NAME EXEC
  rig study withdraw NAME --why "..."        before a counted run (registrant or Director)`,
	}
	cmd.AddCommand(newStudyInitCommand(), studyRegisterCommand(), studyReviewCommand(), studyApproveCommand(), studyWithdrawCommand(),
		studySimpleCommand("freeze", "Freeze the design: pins resolved to digests, tasks validated, snapshot hashed",
			func(ctx context.Context, c api.Client, req api.NameRequest, _ io.Writer) error {
				_, err := c.Freeze(ctx, req)
				return err
			}),
		studySimpleCommand("preflight", "Decide and record, per arm, whether it fits at the study's card profile",
			func(ctx context.Context, c api.Client, req api.NameRequest, text io.Writer) error {
				_, err := c.Preflight(ctx, req, text)
				return err
			}),
		studySimpleCommand("validate", "Make one free validation run per harness: records, runtime and containment checked",
			func(ctx context.Context, c api.Client, req api.NameRequest, text io.Writer) error {
				_, err := c.Validate(ctx, req, text)
				return err
			}),
		studySimpleCommand("cancel", "Stop the study's running execution (its receipts stay)",
			func(ctx context.Context, c api.Client, req api.NameRequest, _ io.Writer) error {
				_, err := c.Cancel(ctx, req)
				return err
			}),
		studyRunCommand(), studyRerunCommand(), studyReportCommand(), studyDecideCommand(), studyCheckCommand(), studyMergeCommand(), studyReplayCommand(), studyDryRunCommand(), studyStatusCommand(), studyListCommand())
	return cmd
}

func studyRegisterCommand() *cobra.Command {
	var key, actor, registry, name string
	cmd := &cobra.Command{
		Use:   "register DESIGN",
		Short: "Register a study from its design file (licences checked first)",
		Long: `register reads the design (JSON or YAML), checks every item against the licence
registry (a missing entry, a banned use, or a commonly banned use without a
clause reading blocks it), fingerprints every pinned asset, and creates the
study's own store. Nothing is written when a check fails.

The design is read by this command, with your rights, and sent to the daemon;
the task banks, licence registry and model files it names are read by the
daemon only if you could read them yourself (or they lie in the daemon's home
or the provisioned cache).

The licence registry is chosen as rig licences check chooses it: --registry
FILE, else the design's licence_registry, else $RIG_LICENCE_REGISTRY (as set
for this command, not for the daemon), else the bundled registry alone; a
studio file is read over the bundled one. Its hash is recorded, and freeze
refuses the study if the file changes.

A study's name is the design's name, or --name: a registered study's design
and inputs never change, so a changed design (or a changed task bank) goes
again under a new name; withdraw the old study with rig study withdraw.

Registering the same design with the same inputs twice returns the existing
study. --key makes that explicit: the same key with the same design returns
the existing study; the same key with another design is a conflict.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			// The design is read here, with your rights, and sent: the daemon
			// (often root) never reads a file for you that you could not.
			design, err := studies.ReadDesignFile(path)
			if err != nil {
				return fmt.Errorf("read design: %w", err)
			}
			req := api.RegisterRequest{DesignFile: path, Design: design, Key: key, Actor: actor, Name: name}
			// The daemon may run elsewhere with another working directory and
			// environment: it gets absolute paths, and this shell's setting.
			if req.Registry, err = absOrEmpty(registry); err != nil {
				return err
			}
			if req.ConfiguredRegistry, err = absOrEmpty(os.Getenv(studies.LicenceRegistryEnv)); err != nil {
				return err
			}
			info, err := client(cmd).Register(cmd.Context(), req)
			if err != nil {
				return err
			}
			printStudy(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key")
	cmd.Flags().StringVar(&name, "name", "", "the study's name, in place of the design's name (to register a changed design again under a new name)")
	cmd.Flags().StringVar(&actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	cmd.Flags().StringVar(&registry, "registry", "", "the studio's licence registry file, read over the bundled one (default: the design's licence_registry, else $"+studies.LicenceRegistryEnv+", else the bundled registry alone)")
	return cmd
}

func absOrEmpty(p string) (string, error) {
	if p == "" {
		return "", nil
	}
	return filepath.Abs(p)
}

func studyReviewCommand() *cobra.Command {
	var r api.Review
	var why string
	cmd := &cobra.Command{
		Use:   "review NAME",
		Short: "Record an outside review's verdict (a pass needs a licence line naming the licences)",
		Long: `review first prints the licence terms the study rests on (each registry
entry's licence, the page its terms were read from, the clause, what it allows
per use and the uses this study puts it to, restricted ones marked), then
records the verdict. A pass needs --licence-line, the reviewer's statement on
the licence check, and it must name every restricted entry (by its id or its
licence's name), or at least one entry when none is restricted.

  rig study review demo --verdict pass \
    --licence-line "licences: smollm2-135m-instruct (Apache-2.0) and the rest checked against registry.json, no banned or restricted use"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The terms first: a reviewer writes the licence line having
			// seen what each licence allows and restricts.
			now, err := client(cmd).Status(cmd.Context(), api.NameRequest{Name: args[0]})
			if err != nil {
				return err
			}
			printLicenceTerms(cmd.OutOrStdout(), args[0], now.LicenceTerms)
			if r.Verdict == "pass" && strings.TrimSpace(r.LicenceLine) == "" {
				return fmt.Errorf("a pass needs --licence-line: your statement on the licence check, naming the licences above (nothing was recorded)")
			}
			fmt.Fprintln(cmd.OutOrStdout())
			info, err := client(cmd).Review(cmd.Context(), api.ReviewRequest{Name: args[0], Review: r, Why: why})
			if err != nil {
				return err
			}
			printStudy(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&r.Reviewer, "reviewer", "", "optional, for readability: must be you (rig records the caller's identity)")
	cmd.Flags().StringVar(&r.Verdict, "verdict", "", "pass or fail (required)")
	cmd.Flags().StringVar(&r.LicenceLine, "licence-line", "", "the reviewer's statement on the licence check; a pass without one does not count")
	cmd.Flags().StringVar(&r.Notes, "notes", "", "the review's notes")
	cmd.Flags().StringVar(&why, "why", "", "why, for the audit log")
	return cmd
}

func studyApproveCommand() *cobra.Command {
	var director, why string
	cmd := &cobra.Command{
		Use:   "approve NAME",
		Short: "Record the Director's approval of a reviewed study",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := client(cmd).Approve(cmd.Context(), api.NameRequest{Name: args[0], Actor: director, Why: why})
			if err != nil {
				return err
			}
			printStudy(cmd.OutOrStdout(), info)
			return nil
		},
	}
	cmd.Flags().StringVar(&director, "director", "", "optional, for readability: must be you, the Director (rig records the caller's identity)")
	cmd.Flags().StringVar(&why, "why", "", "why, for the audit log")
	return cmd
}

// studyCall is one of the daemon's calls on a named study whose reply the
// command does not print; what the daemon wrote for the user goes to text.
type studyCall func(ctx context.Context, c api.Client, req api.NameRequest, text io.Writer) error

func studySimpleCommand(use, short string, call studyCall) *cobra.Command {
	var actor string
	cmd := &cobra.Command{
		Use:   use + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.NameRequest{Name: args[0], Actor: actor}
			send := func(text io.Writer) error { return call(cmd.Context(), client(cmd), req, text) }
			var err error
			if use == "validate" {
				err = withHeartbeat(cmd.Context(), cmd.OutOrStdout(), socketPath(cmd), args[0], "validating", send)
			} else {
				err = send(cmd.OutOrStdout())
			}
			if err != nil {
				return err
			}
			if use == "freeze" {
				_, err := printStatus(cmd, args[0])
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	return cmd
}

func studyRunCommand() *cobra.Command {
	var key, actor, engine string
	var detach bool
	var inFlight int
	var startWait time.Duration
	cmd := &cobra.Command{
		Use:   "run NAME",
		Short: "Start a counted run of a frozen study and follow its progress",
		Long: `run asks the daemon to start an execution of the frozen study. It refuses unless
every arm has a recorded "fits" preflight verdict, the governor's fault suite
passed recently and its heartbeat is fresh, and every harness passed its
validation run. Progress (trials done/total, current trial, rate, ETA) is
printed until the execution ends; Ctrl-C stops following, not the run.

With --engine temporal the trials are spread over rig worker processes on
other machines through the daemon's Temporal cluster (rig daemon --temporal
HOST:PORT --spool DIR): each trial goes to a task queue named by its runtime
build and card class, the workers' receipts and generation records come back
through the shared spool and are merged exactly once, and progress shows how
many receipts each worker returned. See docs/scale-out.md.

  rig study run demo                      on this machine's card
  rig study run demo --engine temporal    on the workers`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := client(cmd).Run(cmd.Context(), api.RunRequest{Study: args[0], Key: key, Actor: actor, Engine: engine, InFlight: inFlight, StartWait: startWait})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "execution %s started (attempt %d)\n", info.ID, info.Attempt)
			for _, w := range info.Walls {
				fmt.Fprintln(cmd.OutOrStdout(), "derived "+w)
			}
			if detach {
				return nil
			}
			return follow(cmd.Context(), cmd, args[0], info.ID)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key: the same key returns the same execution")
	cmd.Flags().StringVar(&actor, "actor", "", "optional: must be you (rig records the caller's identity)")
	cmd.Flags().StringVar(&engine, "engine", "", "local (this card, the default) or temporal (rig workers through the daemon's Temporal cluster)")
	cmd.Flags().IntVar(&inFlight, "in-flight", 0, fmt.Sprintf("with --engine temporal: trials of one task queue (runtime build and card class) running at once (default %d)", daemon.EngineDefaultInFlight))
	cmd.Flags().DurationVar(&startWait, "start-wait", 0, fmt.Sprintf("with --engine temporal: how long a trial waits for a worker of its task queue before it ends as an error receipt naming the queue, when no worker serves it (default %s)", daemon.EngineDefaultStartWait))
	cmd.Flags().BoolVar(&detach, "detach", false, "return at once; follow with rig study status")
	return cmd
}

func studyRerunCommand() *cobra.Command {
	var key, engine string
	var inFlight int
	var startWait time.Duration
	cmd := &cobra.Command{
		Use:   "rerun NAME EXECUTION",
		Short: "Run a frozen study again as a new execution whose parent is EXECUTION",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := client(cmd).Run(cmd.Context(), api.RunRequest{Study: args[0], Key: key, Parent: args[1], Engine: engine, InFlight: inFlight, StartWait: startWait})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "execution %s started (attempt %d, parent %s)\n", info.ID, info.Attempt, info.Parent)
			for _, w := range info.Walls {
				fmt.Fprintln(cmd.OutOrStdout(), "derived "+w)
			}
			return follow(cmd.Context(), cmd, args[0], info.ID)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "idempotency key")
	cmd.Flags().StringVar(&engine, "engine", "", "local (this card, the default) or temporal (rig workers through the daemon's Temporal cluster)")
	cmd.Flags().IntVar(&inFlight, "in-flight", 0, fmt.Sprintf("with --engine temporal: trials of one task queue (runtime build and card class) running at once (default %d)", daemon.EngineDefaultInFlight))
	cmd.Flags().DurationVar(&startWait, "start-wait", 0, fmt.Sprintf("with --engine temporal: how long a trial waits for a worker of its task queue before it ends as an error receipt naming the queue, when no worker serves it (default %s)", daemon.EngineDefaultStartWait))
	return cmd
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

// follow prints progress until the execution ends.
func follow(ctx context.Context, cmd *cobra.Command, name, id string) error {
	last, engine := "", false
	c := client(cmd)
	for {
		info, err := c.Status(ctx, api.NameRequest{Name: name})
		if err != nil && engine && (errors.Is(err, api.ErrNoDaemon) || errors.Is(err, api.ErrDaemonStopped)) {
			// The workers and the engine run the trials, not the daemon:
			// the run goes on, and its merges wait for the coordinator.
			gone := api.ErrNoDaemon
			if errors.Is(err, api.ErrDaemonStopped) {
				gone = api.ErrDaemonStopped
			}
			return fmt.Errorf("%w (socket %s): execution %s goes on on the workers through the engine, and its receipts wait for the coordinator: start the daemon again with the same --temporal and --spool it had (or the same RIG_TEMPORAL and RIG_SPOOL), then follow the run with: rig study status %s",
				gone, socketPath(cmd), id, name)
		}
		if err != nil {
			return err
		}
		for _, e := range info.Executions {
			if e.ID != id {
				continue
			}
			engine = e.Engine != ""
			line := fmt.Sprintf("%s: %d/%d trials, %d preempted and rerun, %d failed (not scored), %.1f/min, ETA %s, now %s", e.Status, e.Done, e.Planned, e.Preempted, e.Failed, e.RatePerMin, orDash(e.ETA), orDash(e.Current))
			if e.Status != api.ExecStatusRunning {
				// Ended: a time left or a trial running now would be stale
				// (a stopped execution leaves planned trials unrun on purpose).
				line = fmt.Sprintf("%s: %d/%d trials, %d preempted and rerun, %d failed (not scored), %.1f/min", e.Status, e.Done, e.Planned, e.Preempted, e.Failed, e.RatePerMin)
			}
			if e.Engine != "" {
				line += ", " + workerCounts(e.Workers)
			}
			if line != last {
				fmt.Fprintf(cmd.OutOrStdout(), "[%s] %s\n", time.Now().Format("15:04:05"), line)
				last = line
			}
			if e.Status != api.ExecStatusRunning {
				if e.Error != "" {
					return fmt.Errorf("execution %s %s: %s", id, e.Status, e.Error)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "receipts: %s/store.bolt\ngeneration records: %s\n", info.Dir, e.Records)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(cmd.OutOrStdout(), "stopped following; the execution goes on (rig study status", name+")")
			return nil
		case <-time.After(2 * time.Second):
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func studyStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Print a study's state, licences, executions and audit log",
		Long: `status prints where the study is: its state and hashes, licences, executions,
the gates before a run, what a request is doing now, and the audit log: every
step in order, who took it (the identity the daemon read from the socket),
when, from which state to which, and why.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := printStatus(cmd, args[0])
			if err != nil {
				return err
			}
			printAudit(cmd.OutOrStdout(), info.Audit)
			return nil
		},
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

func studyListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the studies registered on this machine",
		RunE: func(cmd *cobra.Command, _ []string) error {
			names, err := client(cmd).List(cmd.Context())
			if err != nil {
				return err
			}
			for _, n := range names {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	}
}

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

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func studyReportCommand() *cobra.Command {
	var opts api.ReportOptions
	var screenshot string
	cmd := &cobra.Command{
		Use:   "report NAME",
		Short: "Analyse an execution and write the HTML, JSON and Markdown report",
		Long: `report runs the pre-registered analysis on the study's latest finished execution
(or --execution): per-arm scores with bootstrap intervals over tasks, P(best),
exact McNemar on the named pairs with Holm, power, cost and outcome classes,
and the decision rule's result with its logic. It writes one self-contained
HTML file (figures as inline SVG), plus report.json and report.md, and prints
a summary and where the files are. It records nothing: rig study decide does.

A card sub-study's report carries the card table (model × profile: fits or
not, token rates, score with its interval, peak memory, wall time, energy).

  rig study report demo-small-models
  rig study report demo-small-models --replay-sample 5      replay 5 kept rows per record first
  rig study report demo-small-models --screenshot shot.png  open it in headless Chromium too

--replay-sample re-scores a seeded sample of every generation record through
its pinned runtime (see rig replay) and puts the result in the report; the
replay is kept with the execution, so later reports show it without
--replay-sample. --screenshot checks the page in a real headless browser
(every figure rendered) and saves a PNG of it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var files api.ReportFiles
			what := "analysing"
			if opts.ReplaySample > 0 {
				// The daemon answers once, at the end; say what the wait is for.
				fmt.Fprintf(cmd.OutOrStdout(), "replaying %d kept rows of every generation record through its pinned runtime first: about as long as generating them took\n", opts.ReplaySample)
				what = "replaying and analysing"
			}
			err := withHeartbeat(cmd.Context(), cmd.OutOrStdout(), socketPath(cmd), args[0], what, func(text io.Writer) error {
				var err error
				files, err = client(cmd).Report(cmd.Context(), api.ReportRequest{Name: args[0], ReportOptions: opts})
				return err
			})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), files.Summary)
			fmt.Fprintf(cmd.OutOrStdout(), "\nreport: %s\n        %s\n        %s\n", files.HTML, files.JSON, files.Markdown)
			if screenshot != "" {
				if err := checkInBrowser(cmd.Context(), files, screenshot); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "screenshot: %s (rendered in headless Chromium; every figure present)\n", screenshot)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Execution, "execution", "", "execution to analyse (default: the latest finished)")
	cmd.Flags().IntVar(&opts.ReplaySample, "replay-sample", 0, "replay this many kept rows of every generation record first (0: show the last replay, if any)")
	cmd.Flags().StringVar(&screenshot, "screenshot", "", "render the HTML in headless Chromium, check its figures and save a PNG here")
	return cmd
}

// checkInBrowser renders the report in headless Chromium, checks that every
// figure the data calls for is in the rendered page, and saves a screenshot.
func checkInBrowser(ctx context.Context, files api.ReportFiles, png string) error {
	bin, err := report.FindBrowser()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(files.JSON)
	if err != nil {
		return err
	}
	var data report.Data
	if err := json.Unmarshal(raw, &data); err != nil {
		return fmt.Errorf("%s: %w", files.JSON, err)
	}
	profile, removeProfile, err := report.TempProfile()
	if err != nil {
		return err
	}
	defer removeProfile()
	b := report.Browser{Bin: bin, Profile: profile}
	dom, err := b.DumpDOM(ctx, files.HTML)
	if err != nil {
		return err
	}
	if err := report.CheckFigures(dom, data); err != nil {
		return fmt.Errorf("%s in headless Chromium: %w", files.HTML, err)
	}
	if abs, err := filepath.Abs(png); err == nil {
		png = abs
	}
	return b.PageScreenshot(ctx, files.HTML, png, 1280)
}

func studyDecideCommand() *cobra.Command {
	var req api.DecideRequest
	cmd := &cobra.Command{
		Use:   "decide NAME --comparison HASH --rationale TEXT",
		Short: "Record the decision the pre-registered rule assigns, citing the comparison you read",
		Long: `decide evaluates the design's decision rule exactly as written on the latest
finished execution and records the outcome, its logic, the actor, the rationale
and the comparison hash. A hash that no longer matches the inputs (receipts
changed since you read the report) is refused: read the new report first.

--key makes the request idempotent, as for register and run: the same key with
the same request returns the recorded decision; the same key with another
request is a conflict.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Study = args[0]
			rec, err := client(cmd).Decide(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "decision   %s (%s)\nnext baseline %s\nrecorded by %s at %s\n", rec.Action, rec.Verdict, rec.NextBaseline, rec.Actor, rec.At.Format(time.RFC3339))
			for _, t := range rec.Trace {
				fmt.Fprintln(cmd.OutOrStdout(), "  "+t)
			}
			if rec.Proposal != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "proposal   %s pending_approval: a Director approves it with rig proposal approve %s --why TEXT\n", rec.Proposal, rec.Proposal)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.ComparisonHash, "comparison", "", "the comparison hash printed by rig study report (required)")
	cmd.Flags().StringVar(&req.Rationale, "rationale", "", "why, in words")
	cmd.Flags().StringVar(&req.Actor, "actor", "", "optional: must be you, the Director (rig records the caller's identity)")
	cmd.Flags().StringVar(&req.Execution, "execution", "", "execution (default: the latest finished)")
	cmd.Flags().StringVar(&req.Key, "key", "", "idempotency key: the same key returns the recorded decision")
	return cmd
}

func studyMergeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "merge NAME [EXECUTION]",
		Short: "Bring a scale-out execution's spool into the store again (idempotent)",
		Long: `merge reads every finished entry the workers left in the spool for the
execution (default: the latest that ran through the engine) and merges it the
way the engine does: put-if-absent by trial key and attempt, digests checked
against the receipt. An entry already merged is a no-op, a different receipt
for a key and attempt already merged is kept apart as a divergent duplicate,
and an entry a worker never finished is left alone. Running it twice changes
nothing: rig receipts export prints the same bytes.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.MergeRequest{Study: args[0]}
			if len(args) == 2 {
				req.Execution = args[1]
			}
			sum, err := client(cmd).Merge(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "spool entries: %d; merged now %d, already merged %d, divergent duplicates kept apart %d, unfinished (never merged) %d\n",
				sum.Entries, sum.Merged, sum.Already, sum.Divergent, sum.Partial)
			for _, r := range sum.Refused {
				fmt.Fprintf(cmd.OutOrStdout(), "refused (not merged): %s\n", r)
			}
			return nil
		},
	}
}

func studyReplayCommand() *cobra.Command {
	var req api.EngineReplayRequest
	cmd := &cobra.Command{
		Use:   "replay NAME",
		Short: "Replay a sample of a scale-out execution's trials on the workers, each on the queue it ran on",
		Long: `replay picks --per-arm merged trials of every arm of an execution that ran
through the engine (default: the latest), seeded by --seed, and has a worker
replay each trial's own generation record on the task queue the trial ran on:
the same runtime build and card class. Each record's sha256 is checked against
the merged receipt before anything starts. It prints, per trial, the worker
that replayed it and whether every replayed row reproduced.

For an execution on this machine's card, rig study report --replay-sample
replays through the daemon instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Study = args[0]
			out, err := client(cmd).EngineReplay(cmd.Context(), req)
			if err != nil {
				return err
			}
			bad := 0
			for _, r := range out {
				fmt.Fprintf(cmd.OutOrStdout(), "%-40s attempt %d on %s via %s: %s (%d/%d rows reproduced, max |Δ| %.3g)\n",
					r.Key, r.Attempt, r.Worker, r.Queue, r.Status, r.Reproduced, r.Replayed, r.MaxAbsDiff)
				if r.Status != api.ReplayReproduced {
					bad++
				}
			}
			if bad > 0 {
				return fmt.Errorf("%d of %d replayed trials did not reproduce", bad, len(out))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Execution, "execution", "", "the execution (default: the latest that ran through the engine)")
	cmd.Flags().IntVar(&req.PerArm, "per-arm", 2, "trials replayed per arm")
	cmd.Flags().Uint64Var(&req.Seed, "seed", 1, "the sample's seed")
	return cmd
}

func studyCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check NAME",
		Short: "Check the study store's integrity: receipts decode, keys unique, no trial scored twice",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sum, err := client(cmd).Check(cmd.Context(), api.NameRequest{Name: args[0]})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "store ok: %d executions, %d receipts (%d counted), %d audit entries, %d governor events\n",
				sum.Executions, sum.Receipts, sum.Counted, sum.Audit, sum.Governor)
			return nil
		},
	}
}

func newReceiptsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "receipts", Short: "Export a study's receipts in the shared schema"}
	var format string
	var audit bool
	export := &cobra.Command{
		Use:   "export NAME",
		Short: "Write every receipt of the study as JSONL (default) or CSV on standard output",
		Long: `export writes every receipt in the shared, versioned receipt schema (each row
carries schema_version) so a later study can reuse them, for example effort
against difficulty for each model.

  rig receipts export demo-small-models > receipts.jsonl
  rig receipts export demo-small-models --format csv > receipts.csv
  rig receipts export demo-small-models --audit     the audit trail: who did what, when`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return client(cmd).Export(cmd.Context(), api.NameRequest{Name: args[0], Format: format, Audit: audit}, cmd.OutOrStdout())
		},
	}
	export.Flags().StringVar(&format, "format", "jsonl", "jsonl or csv")
	export.Flags().BoolVar(&audit, "audit", false, "write the store's audit trail (JSONL) instead of the receipts")
	cmd.AddCommand(export)
	return cmd
}

func studyDryRunCommand() *cobra.Command {
	var speeds string
	cmd := &cobra.Command{
		Use:   "dry-run NAME",
		Short: "Price every arm x task x repeat in wall time and energy; execute nothing",
		Long: `dry-run prices the frozen study's whole plan from a pilot's speed table
(--speeds FILE, JSON: {"ARM": {"gen_tokens_per_sec": ..., "source": "pilot"}})
or, without one, from the speeds measured in this machine's validation runs,
and says which. A plan over the design's wall-time or energy cap is refused
(exit status 1) before anything runs.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if speeds != "" {
				abs, err := filepath.Abs(speeds)
				if err != nil {
					return err
				}
				speeds = abs
			}
			_, err := client(cmd).DryRun(cmd.Context(), api.DryRunRequest{Name: args[0], Speeds: speeds}, cmd.OutOrStdout())
			return err
		},
	}
	cmd.Flags().StringVar(&speeds, "speeds", "", "a pilot's speed table (JSON)")
	return cmd
}
