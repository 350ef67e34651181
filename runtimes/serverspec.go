package runtimes

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"rig/internal/serverspec"
)

// OpenAIServerKind is the runtime name of a generic OpenAI-compatible server.
const OpenAIServerKind = serverspec.Kind

// Server APIs a ServerSpec may speak.
const (
	APIChat        = serverspec.APIChat
	APICompletions = serverspec.APICompletions
)

// ServerSpec describes an OpenAI-compatible server rig starts in its sandbox
// and drives (see package serverspec). Its Command[0] and PythonEnv are
// paths here: a caller expands a design's references first.
type ServerSpec = serverspec.Spec

// PythonEnvDigest digests a Python environment's installed distributions.
func PythonEnvDigest(dir string) (string, []string, error) { return serverspec.PythonEnvDigest(dir) }

// serverExecutable resolves the command's executable as the sandbox will
// run it: an absolute path, its links kept (a venv's python is a link, and
// it finds its environment by the path it was run as; the sandbox shows
// both the link's and the target's install folders, and the digest is the
// target's content).
func serverExecutable(s ServerSpec) (string, error) {
	if len(s.Command) == 0 || strings.TrimSpace(s.Command[0]) == "" {
		return "", fmt.Errorf("server.command: %w: empty", ErrBinaryMissing)
	}
	p, err := exec.LookPath(s.Command[0])
	if err != nil {
		return "", fmt.Errorf("server.command[0]: %w: %v", ErrBinaryMissing, err)
	}
	return filepath.Abs(p)
}

// serverArgv is the command with its placeholders filled.
func serverArgv(s ServerSpec, exe string, cfg Config, port int) []string {
	r := strings.NewReplacer("{port}", strconv.Itoa(port), "{model}", cfg.Model,
		"{context_total}", strconv.Itoa(cfg.Context*cfg.slots()), "{context}", strconv.Itoa(cfg.Context),
		"{slots}", strconv.Itoa(cfg.slots()), "{threads}", strconv.Itoa(cfg.Threads))
	out := []string{exe}
	for _, a := range s.Command[1:] {
		out = append(out, r.Replace(a))
	}
	return out
}
