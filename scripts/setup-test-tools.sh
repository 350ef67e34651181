#!/usr/bin/env bash
# Provisions the outside tools that only tests use (make test runs it after
# scripts/setup.sh; make demo never does): each scripts/test-tools/*.sh is one
# tool, pinned in internal/provision/test-tools.env, installed from a package
# registry into its own folder of the cache outside the clone, keyed by its
# pin. Each piece prints KEY=VALUE lines for the tools it provided; this
# script gathers them into $RIG_CACHE/test-tools.env, which tests read through
# internal/provision (TestTool). Idempotent: a stamped piece only re-checks.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../internal/provision/pins.env
source "$root/internal/provision/pins.env"
# shellcheck source=../internal/provision/test-tools.env
source "$root/internal/provision/test-tools.env"

# shellcheck source=setup-lib.sh
source "$root/scripts/setup-lib.sh"
[ -f "$cache/installed.env" ] || die "$cache/installed.env is missing: run scripts/setup.sh (make setup) first"
# shellcheck disable=SC1091
source "$cache/installed.env"

out="$cache/test-tools.env.tmp"
printf '# Written by scripts/setup-test-tools.sh; read by rig'"'"'s tests. Paths of tools only tests use.\n' >"$out"
for piece in "$root"/scripts/test-tools/*.sh; do
  [ -e "$piece" ] || continue
  # Each piece runs in a subshell so its variables stay its own; its
  # standard output is its KEY=VALUE lines, its log goes to standard error.
  ( source "$piece" ) >>"$out" || die "$(basename "$piece") failed"
done
mv "$out" "$cache/test-tools.env"
log "test tools provisioned into $cache (see $cache/test-tools.env)"
