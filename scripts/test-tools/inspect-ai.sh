# Sourced by scripts/setup-test-tools.sh (in a subshell): installs the pinned
# inspect-ai from PyPI into its own virtual environment under
# $cache/inspect-ai/<version>, so the test of `rig export inspect` reads the
# logs with Inspect's own reader, schema and viewer. Prints INSPECT_PYTHON
# (the environment's python) and INSPECT_BIN (its `inspect` command).
# Idempotent: a stamped environment is only re-checked.

ivenv="$cache/inspect-ai/$INSPECT_AI_VERSION/venv"
if [ ! -f "$ivenv/.rig-ok" ]; then
  log "installing inspect-ai $INSPECT_AI_VERSION into a private virtual environment"
  iwhl="$dl/inspect_ai-$INSPECT_AI_VERSION-py3-none-any.whl"
  [ -f "$iwhl" ] || pip download -q --no-deps -d "$dl" "inspect-ai==$INSPECT_AI_VERSION" >&2
  verify "$iwhl" "$INSPECT_AI_WHEEL_SHA256"
  rm -rf "$ivenv"
  python3 -m venv "$ivenv" >&2
  "$ivenv/bin/pip" install -q --disable-pip-version-check "$iwhl" >"$ivenv.log" 2>&1 ||
    { tail -20 "$ivenv.log" >&2; die "inspect-ai install failed; full log: $ivenv.log"; }
  touch "$ivenv/.rig-ok"
fi
[ -x "$ivenv/bin/inspect" ] || die "$ivenv/bin/inspect missing although stamped; remove $ivenv and run scripts/setup-test-tools.sh"
# The import is the re-check: a broken environment fails here, not in a test.
# Inspect sends nothing unless INSPECT_TELEMETRY names a hook; it is emptied
# here and in every test that runs it (interop/inspectlog/inspecttest).
env INSPECT_TELEMETRY= DO_NOT_TRACK=1 "$ivenv/bin/python" -c 'import inspect_ai.log' >&2 ||
  die "inspect-ai in $ivenv does not import; remove $ivenv and run scripts/setup-test-tools.sh"
printf 'INSPECT_PYTHON=%s\n' "$ivenv/bin/python"
printf 'INSPECT_BIN=%s\n' "$ivenv/bin/inspect"
