package studies

import (
	"context"
	"fmt"
	"strings"

	"rig/internal/serverspec"
)

// OpenAIServer says the arm's model runs on a generic OpenAI-compatible
// server (arms[].server): "openai-server", or "aider+openai-server" with
// Aider over it.
func (r Runtime) OpenAIServer() bool { return r.Engine() == serverspec.Kind }

// server checks an arm's server block against its runtime: an
// "openai-server" arm (with Aider over it or not) needs one, every other
// arm has none.
func (v *validator) server(p string, a Arm) {
	if !a.Runtime.OpenAIServer() {
		if a.Server != nil {
			v.add(KindInvalid, p+".server", "only an \"openai-server\" or \"aider+openai-server\" arm describes its server; remove it, or set \"runtime\": \"openai-server\"")
		}
		return
	}
	if a.Server == nil {
		v.add(KindMissing, p+".server", `missing: an "openai-server" arm describes the server rig starts, e.g. {"command": ["${LLAMA_SERVER_BIN}", "--port", "{port}", "-m", "{model}", "-c", "{context}", "--jinja"], "ready": "/health"} (docs/runtimes.md)`)
		return
	}
	if err := a.Server.Check(); err != nil {
		field, msg, _ := strings.Cut(err.Error(), ": ")
		field, _, _ = strings.Cut(field, "[")
		v.add(KindInvalid, p+".server."+field, "%s", nameList(msg))
	} else if a.Runtime.Aider() && !a.Server.Speaks(serverspec.APIChat) {
		// Aider sends chat requests, and rig's proxy answers each through
		// the server's /v1/chat/completions.
		v.add(KindInvalid, p+".server.api", "names only \"completions\", and Aider's calls are answered through the server's chat endpoint: add \"chat\" to api (or leave api out), or run the arm as \"openai-server\" without Aider")
	}
	if err := a.Server.CheckSlots(a.Pins.SlotCount()); err != nil {
		// Named at the slots pin: the command is right for one slot.
		v.add(KindInvalid, p+".pins.slots", "%s", err.Error())
	}
	if a.Pins.Offload.OnCard() {
		v.add(KindInvalid, p+".pins.offload", "an openai-server arm places the model as its own command line says; rig cannot hold an offload pin on it, so leave offload out")
	}
}

// ServerSpec is the arm's server as runtimes starts it: the executable and
// the Python environment with their references expanded (lookup, as model
// files are), nil for an arm of another runtime.
func (a Arm) ServerSpec(opts ResolveOptions) (*serverspec.Spec, error) {
	if a.Server == nil {
		return nil, nil
	}
	s := *a.Server
	s.Command = append([]string(nil), s.Command...)
	var err error
	if len(s.Command) > 0 {
		if s.Command[0], err = ModelPath(s.Command[0], opts.Lookup, opts.BaseDir); err != nil {
			return nil, err
		}
	}
	if s.PythonEnv != "" {
		if s.PythonEnv, err = ModelPath(s.PythonEnv, opts.Lookup, opts.BaseDir); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// serverBinary resolves an openai-server arm's executable and Python
// environment to their digests: the executable is hashed through assets,
// as a model file is (with the caller's rights in the daemon).
func serverBinary(ctx context.Context, a Arm, assets Assets, opts ResolveOptions) (Binary, error) {
	s, err := a.ServerSpec(opts)
	if err != nil {
		return Binary{}, err
	}
	b := Binary{Component: serverspec.Kind, Path: s.Command[0], PythonEnv: s.PythonEnv}
	if b.SHA256, err = assets.FileSHA256(ctx, b.Path); err != nil {
		return Binary{}, fmt.Errorf("command[0]: hash %s: %w", b.Path, err)
	}
	if s.PythonEnv != "" {
		if b.EnvSHA256, _, err = serverspec.PythonEnvDigest(s.PythonEnv); err != nil {
			return Binary{}, err
		}
	}
	return b, nil
}

// addServerAssets records an openai-server arm's executable and environment
// digests: a change of either at freeze or before a run is a stale asset.
func addServerAssets(set AssetSet, arm string, b Binary) {
	set["server:"+arm] = b.SHA256
	if b.EnvSHA256 != "" {
		set["server-env:"+arm] = b.EnvSHA256
	}
}

// Server is an openai-server arm's frozen server (its executable and
// Python environment with their digests), among its binaries: an
// aider+openai-server arm's are Aider's and the server's.
func (fa FrozenArm) Server() (Binary, bool) {
	for _, b := range fa.Binaries {
		if b.Component == serverspec.Kind {
			return b, true
		}
	}
	return Binary{}, false
}

// serverAssetSHA256 reads an openai-server arm's executable ("server") or
// environment ("server-env") digest as it is now, from where the freeze
// found them.
func (s *Snapshot) serverAssetSHA256(ctx context.Context, kind, arm string, assets Assets) (string, error) {
	fa, ok := s.Arm(arm)
	b, frozen := fa.Server()
	if !ok || !frozen {
		return "", fmt.Errorf("arm %s: no frozen server", arm)
	}
	if kind == "server" {
		return assets.FileSHA256(ctx, b.Path)
	}
	sum, _, err := serverspec.PythonEnvDigest(b.PythonEnv)
	return sum, err
}
