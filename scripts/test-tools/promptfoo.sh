# Sourced by scripts/setup-test-tools.sh (in a subshell): installs the pinned
# promptfoo from npm into $cache/promptfoo/<version>, so the test of `rig
# tasks import --from promptfoo` runs promptfoo's own renderer and graders
# on the config it imports, and `rig compare --from promptfoo` reads output
# promptfoo itself wrote. The package tarball is fetched with `npm pack` and
# checked against its pin before npm installs it; its dependencies are
# resolved by npm. Optional dependencies (cloud SDKs, browsers, a gigabyte)
# and install scripts are left out; the one native module promptfoo's store
# needs (libsql's linux-x64 build) is named at its pinned version.
# Prints PROMPTFOO_BIN. Idempotent: a stamped folder is only re-checked.
#
# promptfoo phones home by default (telemetry, update checks, sharing,
# remote generation): every use, this script's check included, sets the
# variables in PROMPTFOO_QUIET_ENV, which turn each of those off; the tests
# also run it with no network but loopback.

PROMPTFOO_QUIET_ENV="PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1 PROMPTFOO_DISABLE_SHARING=1 PROMPTFOO_DISABLE_SHARE_EMAIL_REQUEST=1 PROMPTFOO_DISABLE_REMOTE_GENERATION=1 PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION=1 PROMPTFOO_DISABLE_RUNTIME_WARNINGS=1"
pf_dir="$cache/promptfoo/$PROMPTFOO_VERSION"
pf_bin="$pf_dir/node_modules/.bin/promptfoo"
if [ ! -f "$pf_dir/.rig-ok" ]; then
  need npm npm
  log "installing promptfoo $PROMPTFOO_VERSION from npm into $pf_dir (a few minutes)"
  pf_tgz="$dl/promptfoo-$PROMPTFOO_VERSION.tgz"
  [ -f "$pf_tgz" ] || (cd "$dl" && npm pack --silent "promptfoo@$PROMPTFOO_VERSION" >/dev/null) ||
    die "npm pack promptfoo@$PROMPTFOO_VERSION failed"
  verify "$pf_tgz" "$PROMPTFOO_TGZ_SHA256"
  rm -rf "$pf_dir"
  mkdir -p "$pf_dir"
  # shellcheck disable=SC2086 # the quiet variables are words on purpose
  env $PROMPTFOO_QUIET_ENV npm install --prefix "$pf_dir" --no-audit --no-fund --omit=optional --ignore-scripts \
    "$pf_tgz" "@libsql/linux-x64-gnu@$PROMPTFOO_LIBSQL_VERSION" >"$pf_dir.log" 2>&1 ||
    { tail -20 "$pf_dir.log" >&2; die "promptfoo install failed; full log: $pf_dir.log"; }
  touch "$pf_dir/.rig-ok"
fi
[ -x "$pf_bin" ] || die "$pf_bin missing although stamped; remove $pf_dir and run scripts/setup-test-tools.sh"
# Running it is the re-check: a broken install fails here, not in a test.
# shellcheck disable=SC2086
pf_got=$(env $PROMPTFOO_QUIET_ENV PROMPTFOO_CONFIG_DIR="$pf_dir/.config" "$pf_bin" --version 2>/dev/null | tail -1) ||
  die "promptfoo in $pf_dir does not run; remove $pf_dir and run scripts/setup-test-tools.sh"
[ "$pf_got" = "$PROMPTFOO_VERSION" ] || die "promptfoo in $pf_dir says version $pf_got, pinned $PROMPTFOO_VERSION; remove $pf_dir and run scripts/setup-test-tools.sh"
printf 'PROMPTFOO_BIN=%s\n' "$pf_bin"
