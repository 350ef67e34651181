package runtimes

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// inheritedEnv is the whole list of variables a runtime may inherit from rig's
// own environment. Everything else (API keys, tokens, proxies, LLAMA_ARG_*,
// OLLAMA_*) is dropped, because a runtime that reads a stray variable is no
// longer running at its pins, and one that reads a credential could reach a
// paid account.
var inheritedEnv = []string{"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// credentialLike reports whether a variable name looks like a secret, a proxy,
// or a runtime setting that would change behaviour behind the pins.
func credentialLike(name string) bool {
	up := strings.ToUpper(name)
	for _, suffix := range []string{"_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD", "_KEY"} {
		if strings.HasSuffix(up, suffix) {
			return true
		}
	}
	return strings.Contains(up, "PROXY") || strings.HasPrefix(up, "LLAMA_ARG_") ||
		strings.HasPrefix(up, "AWS_") || strings.HasPrefix(up, "OPENAI_") ||
		strings.HasPrefix(up, "ANTHROPIC_") || strings.HasPrefix(up, "HF_")
}

// BuildEnv returns the environment for a sandboxed process: the allowlist from
// rig's own environment, a private HOME and config directories under home, and
// the driver's explicit settings. A driver setting that looks like a credential
// is refused: drivers never need one, and a loopback endpoint takes no key
// except a placeholder, which the driver passes by flag.
func BuildEnv(home string, explicit map[string]string) ([]string, error) {
	env := map[string]string{}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	if env["PATH"] == "" {
		env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
	}
	env["HOME"] = home
	env["XDG_CONFIG_HOME"] = home + "/.config"
	env["XDG_CACHE_HOME"] = home + "/.cache"
	env["XDG_DATA_HOME"] = home + "/.local/share"
	env["TMPDIR"] = home + "/tmp"
	for k, v := range explicit {
		if credentialLike(k) {
			return nil, fmt.Errorf("sandbox environment: %s looks like a credential or proxy setting; runtimes get none (pass placeholders by flag)", k)
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// envNames lists the variable names of an environment, for receipts: names are
// evidence of what reached the runtime; values may be private paths.
func envNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
