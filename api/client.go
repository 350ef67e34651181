package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
)

// The wire: one small JSON-over-HTTP protocol on the daemon's unix socket.
// POST /METHOD with the request as the body; the answer is
// {"result": ..., "text": "..."} or {"error": "...", "code": "..."}. Text is
// what the daemon wrote for the user while it handled the request.

// Reply is the envelope of every answer.
type Reply struct {
	Result json.RawMessage `json:"result,omitempty"`
	Text   string          `json:"text,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
}

// Client calls a daemon over its unix socket: one method per call the
// daemon serves. Make it with NewClient and keep it for every call to that
// daemon: it holds one HTTP transport, which the calls share. A Client
// written as a literal (Client{Socket: s}) works too, with a transport made
// for each call and dropped after it.
type Client struct {
	// Socket is the daemon's socket, as errors name it; NewClient's
	// transport dials the one it was made with.
	Socket string
	// hc is NewClient's; nil in a literal.
	hc *http.Client
}

// NewClient is a Client for the daemon serving on socket, with one
// transport for all its calls.
func NewClient(socket string) Client {
	return Client{Socket: socket, hc: &http.Client{Transport: transport(socket)}}
}

// transport dials socket for every request and keeps no connection: the
// daemon closes each connection after its answer (it serves with keep-alives
// off and caps the connections a uid holds open), so an idle connection kept
// here could serve no second request and would only count against that cap
// while, say, `rig study run` polls status every 2 s. Without keep-alives a
// connection is closed as soon as its answer has been read, whatever the
// daemon at the other end does.
func transport(socket string) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
}

// httpClient is NewClient's HTTP client, or for a literal Client one made
// for this call: its transport keeps no connection, so nothing of it
// outlives the call.
func (c Client) httpClient() *http.Client {
	if c.hc != nil {
		return c.hc
	}
	return &http.Client{Transport: transport(c.Socket)}
}

// Call sends one request to method and decodes the result into out (nil
// drops it). Text the daemon produced for the user is written to text (nil
// drops it). An error the daemon returned keeps its class: errors.Is matches
// it against the sentinel its code names (see Sentinel). Commands use the
// typed methods below; Call is the wire itself, for those and for tests of
// the protocol.
func (c Client) Call(ctx context.Context, method string, req, out any, text io.Writer) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, "POST", "http://rig/"+method, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.httpClient().Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		var ne *net.OpError
		if errors.As(err, &ne) && ne.Op == "dial" {
			if errors.Is(err, syscall.EACCES) {
				return fmt.Errorf("cannot connect to the daemon at %s: permission denied (its socket is open only to the daemon's user, or to the studio group its policy names: ask to be added, see docs/security.md)", c.Socket)
			}
			return fmt.Errorf("%w at %s (start it with: rig daemon &)", ErrNoDaemon, c.Socket)
		}
		if droppedConn(err) {
			return c.stopped(method, err)
		}
		return err
	}
	defer resp.Body.Close()
	var rep Reply
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		if ctx.Err() == nil && droppedConn(err) {
			return c.stopped(method, err)
		}
		return fmt.Errorf("daemon answered %s: %w", resp.Status, err)
	}
	if rep.Text != "" && text != nil {
		io.WriteString(text, rep.Text)
	}
	if rep.Error != "" {
		return remoteError(rep.Error, rep.Code)
	}
	if out != nil && len(rep.Result) > 0 {
		return json.Unmarshal(rep.Result, out)
	}
	return nil
}

// call is Call with the result decoded into a Res.
func call[Res any](ctx context.Context, c Client, method string, req any, text io.Writer) (Res, error) {
	var out Res
	err := c.Call(ctx, method, req, &out, text)
	return out, err
}

// droppedConn tells a connection the daemon closed or lost mid-request from
// other failures: the request reached it (the dial worked) and no whole
// answer came back.
func droppedConn(err error) bool {
	var ne *net.OpError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.As(err, &ne) && (ne.Op == "read" || ne.Op == "write")
}

// stopped says that the daemon went away while it handled method, where its
// log is, and how to start it again, instead of the transport's
// `Post "http://rig/…": EOF`. The transport error stays in the chain.
func (c Client) stopped(method string, cause error) error {
	return &stoppedError{
		msg: fmt.Sprintf("%v while handling %s (socket %s); its log is wherever it was started: the terminal, or journalctl -u rig-daemon under systemd; start it again with: rig daemon &",
			ErrDaemonStopped, method, c.Socket),
		cause: cause,
	}
}

type stoppedError struct {
	msg   string
	cause error
}

func (e *stoppedError) Error() string   { return e.msg }
func (e *stoppedError) Unwrap() []error { return []error{ErrDaemonStopped, e.cause} }

// Studies.

// Register registers a study from its design (licences checked, pins
// fingerprinted); the same design twice returns the existing study.
func (c Client) Register(ctx context.Context, req RegisterRequest) (StudyInfo, error) {
	return call[StudyInfo](ctx, c, MethodRegister, req, nil)
}

// Review records an outside review's verdict.
func (c Client) Review(ctx context.Context, req ReviewRequest) (StudyInfo, error) {
	return call[StudyInfo](ctx, c, MethodReview, req, nil)
}

// Approve records the Director's approval of a reviewed study.
func (c Client) Approve(ctx context.Context, req NameRequest) (StudyInfo, error) {
	return call[StudyInfo](ctx, c, MethodApprove, req, nil)
}

// Withdraw withdraws a study before its first counted run.
func (c Client) Withdraw(ctx context.Context, req NameRequest) (StudyInfo, error) {
	return call[StudyInfo](ctx, c, MethodWithdraw, req, nil)
}

// Freeze freezes a study's design into its content-addressed snapshot.
func (c Client) Freeze(ctx context.Context, req NameRequest) (StudyInfo, error) {
	return call[StudyInfo](ctx, c, MethodFreeze, req, nil)
}

// Status is a study's state, hashes, licences, executions, gates and audit log.
func (c Client) Status(ctx context.Context, req NameRequest) (StudyInfo, error) {
	return call[StudyInfo](ctx, c, MethodStatus, req, nil)
}

// List names every study registered with the daemon.
func (c Client) List(ctx context.Context) ([]string, error) {
	return call[[]string](ctx, c, MethodList, struct{}{}, nil)
}

// Gates before counted runs.

// PreflightVerdict is the part of a stored preflight verdict the protocol
// promises (the daemon sends the whole verdict; docs/preflight.md has it):
// one per arm, in the design's order.
type PreflightVerdict struct {
	Outcome      string `json:"outcome"`
	Fits         bool   `json:"fits"`
	Reason       string `json:"reason"`
	Model        string `json:"model"`
	Runtime      string `json:"runtime"`
	MarginBytes  int64  `json:"margin_bytes"`
	NeededMargin int64  `json:"needed_margin"`
}

// Preflight decides and records, per arm, whether it fits at the study's
// card profile; the daemon's account of it goes to text.
func (c Client) Preflight(ctx context.Context, req NameRequest, text io.Writer) ([]PreflightVerdict, error) {
	return call[[]PreflightVerdict](ctx, c, MethodPreflight, req, text)
}

// Validate makes one free validation run per harness; the daemon's account
// of it goes to text.
func (c Client) Validate(ctx context.Context, req NameRequest, text io.Writer) ([]ValidationRecord, error) {
	return call[[]ValidationRecord](ctx, c, MethodValidate, req, text)
}

// DryRun prices the frozen study's plan; the priced table goes to text.
func (c Client) DryRun(ctx context.Context, req DryRunRequest, text io.Writer) (*Estimate, error) {
	return call[*Estimate](ctx, c, MethodDryRun, req, text)
}

// Executions.

// Run starts an execution of a frozen study (a rerun with Parent set) and
// returns at once.
func (c Client) Run(ctx context.Context, req RunRequest) (ExecInfo, error) {
	return call[ExecInfo](ctx, c, MethodRun, req, nil)
}

// Cancel stops the study's running execution.
func (c Client) Cancel(ctx context.Context, req NameRequest) (ExecInfo, error) {
	return call[ExecInfo](ctx, c, MethodCancel, req, nil)
}

// Check reads the study's whole store and counts what it holds.
func (c Client) Check(ctx context.Context, req NameRequest) (StoreSummary, error) {
	return call[StoreSummary](ctx, c, MethodCheck, req, nil)
}

// Merge brings a scale-out execution's spool into the store again.
func (c Client) Merge(ctx context.Context, req MergeRequest) (MergeSummary, error) {
	return call[MergeSummary](ctx, c, MethodMerge, req, nil)
}

// EngineReplay replays a sample of a scale-out execution's trials on the
// workers.
func (c Client) EngineReplay(ctx context.Context, req EngineReplayRequest) ([]ReplayResult, error) {
	return call[[]ReplayResult](ctx, c, MethodEngineReplay, req, nil)
}

// Export writes the study's receipts (req.Format: jsonl, the default, or
// csv) or, with req.Audit, its audit trail, to w.
func (c Client) Export(ctx context.Context, req NameRequest, w io.Writer) error {
	return c.Call(ctx, MethodExport, req, nil, w)
}

// Reports, decisions and re-grades.

// Report analyses an execution and writes the report's files.
func (c Client) Report(ctx context.Context, req ReportRequest) (ReportFiles, error) {
	return call[ReportFiles](ctx, c, MethodReport, req, nil)
}

// Decide records the decision the pre-registered rule assigns.
func (c Client) Decide(ctx context.Context, req DecideRequest) (DecisionRecord, error) {
	return call[DecisionRecord](ctx, c, MethodDecide, req, nil)
}

// AmendDecision appends a correction to the study's recorded decision.
func (c Client) AmendDecision(ctx context.Context, req AmendDecisionRequest) (DecisionAmendment, error) {
	return call[DecisionAmendment](ctx, c, MethodAmendDecision, req, nil)
}

// Regrade re-grades an execution's stored outputs beside the old grades.
func (c Client) Regrade(ctx context.Context, req RegradeRequest) (RegradeReport, error) {
	return call[RegradeReport](ctx, c, MethodGrade, req, nil)
}

// UI starts the read-only workspace (once per daemon) and returns a URL
// with a fresh single-use token.
func (c Client) UI(ctx context.Context) (UIInfo, error) {
	return call[UIInfo](ctx, c, MethodUI, struct{}{}, nil)
}

// Proposals and the baseline.

// Proposals lists every publish proposal.
func (c Client) Proposals(ctx context.Context) ([]Proposal, error) {
	return call[[]Proposal](ctx, c, MethodProposalList, struct{}{}, nil)
}

// Proposal is one proposal by req.ID.
func (c Client) Proposal(ctx context.Context, req ProposalRequest) (Proposal, error) {
	return call[Proposal](ctx, c, MethodProposalShow, req, nil)
}

// ApproveProposal moves a pending proposal to approved (the Director).
func (c Client) ApproveProposal(ctx context.Context, req ProposalRequest) (Proposal, error) {
	return call[Proposal](ctx, c, MethodProposalApprove, req, nil)
}

// RejectProposal moves a pending proposal to rejected (the Director).
func (c Client) RejectProposal(ctx context.Context, req ProposalRequest) (Proposal, error) {
	return call[Proposal](ctx, c, MethodProposalReject, req, nil)
}

// Baseline is the approved proposal the next study starts from; ok is false
// when none has been approved.
func (c Client) Baseline(ctx context.Context) (p Proposal, ok bool, err error) {
	p, err = call[Proposal](ctx, c, MethodBaseline, struct{}{}, nil)
	return p, err == nil && p.ID != "", err
}

// The monthly budget.

// Budget is this month's cap, what was spent and what is left.
func (c Client) Budget(ctx context.Context) (MonthStatus, error) {
	return call[MonthStatus](ctx, c, MethodBudget, struct{}{}, nil)
}

// SetBudget puts a monthly cap in force (the operator role).
func (c Client) SetBudget(ctx context.Context, req BudgetRequest) (MonthlyBudget, error) {
	return call[MonthlyBudget](ctx, c, MethodBudgetSet, req, nil)
}
