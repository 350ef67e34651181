package runtimes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"rig/internal/untrusted"
)

// AiderCaps are the turn, time and token caps, held equal across models. A run
// that hits one is flagged capped and reported apart, because a cap one model
// hits first censors it.
type AiderCaps struct {
	Turns  int           `json:"turns"`  // model calls per task
	Wall   time.Duration `json:"wall"`   // whole run
	Tokens int           `json:"tokens"` // output tokens summed over calls
}

// AiderConfig runs Aider (the harness) against one arm's server.
type AiderConfig struct {
	Binary string
	// Arm answers Aider's calls through rig's recording proxy: a
	// *LlamaServer, an *Ollama or an *OpenAIServer (aider+llama-server,
	// aider+ollama, aider+openai-server).
	Arm        Runtime
	WorkDir    string // rig's own: the log, the proxy socket, and home/ (the one part the sandbox sees)
	Sampling   Sampling
	MaxTokens  int // per-call stop cap
	TopK       int
	Caps       AiderCaps
	EditFormat string // default "whole": the simplest format small models can follow
	NoSandbox  bool
	// Slot, when above 0, is the arm's slot every call of this run asks
	// for (Request.Slot): N Aider runs in flight on an arm of N slots each
	// keep to their own, so the server's report of it is this run's
	// progress. 0 lets the server pick.
	Slot int
}

// AiderTask is one scratch git repository and the request for it.
type AiderTask struct {
	// Repo is a git work tree Aider edits in place. It must be one rig made
	// (tasks.Materialize) and nothing has run in yet: its state now is what
	// the run's changes are measured against.
	Repo    string
	Files   []string // files added to the chat, relative to Repo
	Message string
	// Before are user turns sent ahead of Message, each its own model call
	// (a conversation rather than one request); one line each.
	Before []string
	// TestCommand, when set, is run by Aider after each edit (its
	// --auto-test), inside the same sandbox; a failure goes back to the
	// model as its next turn. These are the test-fix turns the caps count.
	TestCommand []string
}

// AiderResult is what one Aider run did.
type AiderResult struct {
	ExitCode     int           `json:"exit_code"`
	Wall         time.Duration `json:"wall_ns"`
	Turns        int           `json:"turns"`
	EditedFiles  []string      `json:"edited_files"`
	OutputTokens int           `json:"output_tokens"`
	PromptTokens int           `json:"prompt_tokens"`
	Capped       bool          `json:"capped"`
	CapHit       string        `json:"cap_hit,omitempty"` // turns, time or tokens
	Calls        []Result      `json:"calls"`
	// CallErrors are the calls the arm did not answer, each with why.
	CallErrors  []string    `json:"call_errors,omitempty"`
	Version     string      `json:"version"`
	Containment Containment `json:"containment"`
	// LogTail is the end of Aider's log, short enough to quote in a message.
	LogTail string `json:"log_tail,omitempty"`
}

// aiderInnerPort is where Aider finds the arm inside its own namespace.
const aiderInnerPort = 18080

// RunAider runs Aider non-interactively on task.Repo in its own loopback-only
// sandbox, pointed at the arm through a recording proxy.
func RunAider(ctx context.Context, cfg AiderConfig, task AiderTask) (AiderResult, error) {
	var res AiderResult
	if cfg.Arm == nil {
		return res, errors.New("aider: no arm to point at")
	}
	cfg = withAiderDefaults(cfg)
	home, err := prepareAiderHome(cfg.WorkDir)
	if err != nil {
		return res, err
	}
	proxySock, err := socketPath(cfg.WorkDir, "aider-proxy.sock")
	if err != nil {
		return res, err
	}
	proxy, err := newRecordingProxy(proxySock, cfg.Arm, cfg.Sampling, cfg.MaxTokens, cfg.TopK, cfg.Caps)
	if err != nil {
		return res, err
	}
	proxy.serverSlot = cfg.Slot
	defer proxy.close()

	port := aiderInnerPort
	if cfg.NoSandbox {
		if port, err = FreeLoopbackPort(); err != nil {
			return res, err
		}
	}
	args, err := aiderArgs(cfg, task, home, port)
	if err != nil {
		return res, err
	}
	env, err := aiderEnv(home)
	if err != nil {
		return res, err
	}
	before, err := repoManifest(task.Repo)
	if err != nil {
		return res, err
	}
	logPath := filepath.Join(cfg.WorkDir, "aider.log")
	runCtx, cancel := context.WithTimeout(ctx, cfg.Caps.Wall)
	defer cancel()
	start := time.Now()
	sb, err := StartSandbox(runCtx, SandboxSpec{
		Argv: args, Env: env, Dir: task.Repo, NoSandbox: cfg.NoSandbox,
		Writable: []string{home}, Limits: AiderLimits(),
		Outbound: []Forward{{Socket: proxySock, Port: port}},
	}, logPath)
	if err != nil {
		return res, err
	}
	res.Containment = sb.Containment
	select {
	case <-sb.Done():
	case <-runCtx.Done():
		sb.Stop(3 * time.Second)
		if ctx.Err() == nil {
			res.Capped, res.CapHit = true, "time"
		}
	}
	res.Wall = time.Since(start)
	recordAiderEnd(&res, sb, proxy)
	after, walkErr := repoManifest(task.Repo)
	if walkErr == nil {
		res.EditedFiles = before.Changed(after)
	}
	res.Version = strings.TrimSpace(versionLine(cfg.Binary, "--version"))
	res.LogTail = aiderLogTail(sb)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	if walkErr != nil {
		return res, fmt.Errorf("aider: reading what the run left: %w", walkErr)
	}
	return res, nil
}

// withAiderDefaults fills the top-k, edit format and wall cap cfg leaves unset.
func withAiderDefaults(cfg AiderConfig) AiderConfig {
	if cfg.TopK <= 0 {
		cfg.TopK = 5
	}
	if cfg.EditFormat == "" {
		cfg.EditFormat = "whole"
	}
	if cfg.Caps.Wall <= 0 {
		cfg.Caps.Wall = 5 * time.Minute
	}
	return cfg
}

// prepareAiderHome makes and seeds the home folder Aider runs with.
func prepareAiderHome(workDir string) (string, error) {
	// Only home and the repository are bound into the sandbox. The work
	// folder above them stays rig's own: the log and the proxy's socket
	// there are out of the contained code's reach, so it cannot swap either
	// for a link that rig, as root, would then read or dial.
	home := filepath.Join(workDir, "home")
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		return "", err
	}
	if err := seedAiderHome(home); err != nil {
		return "", err
	}
	return home, nil
}

// aiderArgs is Aider's command line: pointed at the proxy on port, every
// prompt, update check and commit turned off, and task's earlier turns
// written to a file in home for --load.
func aiderArgs(cfg AiderConfig, task AiderTask, home string, port int) ([]string, error) {
	args := []string{cfg.Binary,
		"--model", "openai/rig-arm",
		"--openai-api-base", "http://127.0.0.1:" + strconv.Itoa(port) + "/v1",
		// A loopback server takes any key; the placeholder keeps Aider from asking for one.
		"--openai-api-key", "rig-loopback-placeholder",
		"--edit-format", cfg.EditFormat,
		"--no-stream", "--yes-always", "--no-pretty", "--no-fancy-input",
		"--no-auto-commits", "--no-dirty-commits", "--no-gitignore",
		"--no-analytics", "--analytics-disable", "--no-check-update", "--no-show-release-notes",
		"--no-show-model-warnings", "--no-check-model-accepts-settings", "--no-detect-urls",
		"--no-suggest-shell-commands", "--no-auto-lint", "--map-tokens", "0",
		"--no-restore-chat-history",
		"--chat-history-file", filepath.Join(home, "chat-history.md"),
		"--input-history-file", filepath.Join(home, "input-history"),
		"--model-metadata-file", filepath.Join(home, "rig-model-metadata.json"),
		"--timeout", strconv.Itoa(int(cfg.Caps.Wall.Seconds())),
		"--message", task.Message,
	}
	if len(task.TestCommand) > 0 {
		args = append(args, "--auto-test", "--test-cmd", ShellJoin(task.TestCommand))
	}
	if len(task.Before) > 0 {
		// Aider runs a loaded file's lines as commands before --message.
		var lines strings.Builder
		for i, m := range task.Before {
			if strings.ContainsAny(m, "\r\n") || strings.TrimSpace(m) == "" {
				return nil, fmt.Errorf("aider: turn %d before the message is empty or spans lines; give each earlier turn as one line", i+1)
			}
			lines.WriteString("/code " + m + "\n")
		}
		load := filepath.Join(home, "turns-before")
		if err := os.WriteFile(load, []byte(lines.String()), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--load", load)
	}
	return append(args, task.Files...), nil
}

// aiderEnv is the environment Aider runs in: home, no cost-map download, no
// analytics, and a fixed git identity.
func aiderEnv(home string) ([]string, error) {
	return BuildEnv(home, map[string]string{
		"LITELLM_LOCAL_MODEL_COST_MAP": "True",
		"AIDER_ANALYTICS":              "false",
		"AIDER_CHECK_UPDATE":           "false",
		"GIT_AUTHOR_NAME":              "rig", "GIT_AUTHOR_EMAIL": "rig@localhost",
		"GIT_COMMITTER_NAME": "rig", "GIT_COMMITTER_EMAIL": "rig@localhost",
		"PYTHONDONTWRITEBYTECODE": "1",
	})
}

// recordAiderEnd fills res with how the sandbox ended, the first cap that
// stopped the run, and what the proxy saw of the model calls.
func recordAiderEnd(res *AiderResult, sb *Sandbox, proxy *recordingProxy) {
	var ee *exec.ExitError
	if err := sb.ExitError(); errors.As(err, &ee) {
		res.ExitCode = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		}
	}
	if limit := sb.LimitHit(); limit != "" && res.CapHit == "" {
		res.Capped, res.CapHit = true, "sandbox limit: "+limit
	}
	calls, out, hit := proxy.results()
	res.Calls, res.Turns, res.OutputTokens = calls, len(calls), out
	res.CallErrors = proxy.failed()
	for _, c := range calls {
		res.PromptTokens += c.PromptTokens
	}
	if hit != "" && res.CapHit == "" {
		res.Capped, res.CapHit = true, hit
	}
}

// seedAiderHome writes what Aider would otherwise try to download at start: a
// fresh model-price cache and the metadata of the loopback model.
func seedAiderHome(home string) error {
	meta := map[string]any{"openai/rig-arm": map[string]any{
		"max_input_tokens": 8192, "max_output_tokens": 2048, "max_tokens": 8192,
		"input_cost_per_token": 0, "output_cost_per_token": 0,
		"litellm_provider": "openai", "mode": "chat",
	}}
	b, _ := json.Marshal(meta)
	if err := os.WriteFile(filepath.Join(home, "rig-model-metadata.json"), b, 0o600); err != nil {
		return err
	}
	caches := filepath.Join(home, ".aider", "caches")
	if err := os.MkdirAll(caches, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(caches, "model_prices_and_context_window.json"), b, 0o600)
}

// The walk of a repository a harness ran in is bounded far above any task's
// repository, and low enough that a run which litters its repository ends in
// a clear error rather than in hours of hashing.
const (
	repoMaxEntries = 100_000
	repoMaxBytes   = 2 << 30
)

// repoManifest is the repository's work tree (its .git folders left out) as
// rig sees it, by a walk that follows no link and runs nothing. The
// repository after a run belongs to the sandbox user and holds whatever was
// written there, its .git/config included; git on the host would obey that
// config (a clean filter is a command git runs to compare a file).
func repoManifest(repo string) (untrusted.Manifest, error) {
	m, err := untrusted.Snapshot(repo, untrusted.Limits{Entries: repoMaxEntries, Bytes: repoMaxBytes}, func(rel string, e untrusted.Entry) bool {
		return e.Kind == untrusted.Dir && filepath.Base(rel) == ".git"
	})
	if errors.Is(err, untrusted.ErrTooBig) {
		return m, fmt.Errorf("%w (a harness run should leave a task's repository near the size it was given; look at what its test command writes)", err)
	}
	return m, err
}

// aiderLogTailBytes bounds what a result quotes of Aider's log.
const aiderLogTailBytes = 4 << 10

// aiderLogTail is what a result quotes of Aider's log: its last lines, read
// through the descriptor the sandbox created the log with (never by its
// name), and no more than aiderLogTailBytes of them.
func aiderLogTail(sb *Sandbox) string {
	t := sb.LogTail(15)
	if len(t) > aiderLogTailBytes {
		t = strings.ToValidUTF8(t[len(t)-aiderLogTailBytes:], "")
	}
	return t
}

// Describe is a one-line summary for logs and the smoke command.
func (r AiderResult) Describe() string {
	c := ""
	if r.Capped {
		c = ", CAPPED (" + r.CapHit + ")"
	}
	for _, e := range r.CallErrors {
		c += "; unanswered " + e
	}
	return fmt.Sprintf("exit %d, %d turns, %d output tokens, edited %v, %s%s", r.ExitCode, r.Turns, r.OutputTokens, r.EditedFiles, r.Wall.Round(time.Millisecond), c)
}

// ShellJoin quotes argv for a POSIX shell: Aider runs its test command
// through one.
func ShellJoin(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			quoted[i] = a
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}
