# Sourced by scripts/setup-test-tools.sh (in a subshell): takes promtool, the
# Prometheus server's own checker and rule-test runner, out of the pinned
# Debian package prometheus into $cache/promtool/<version>. The .deb is
# fetched with `apt-get download` (nothing is installed, no service starts)
# and unpacked with `dpkg-deb -x`; only usr/bin/promtool is kept. Prints
# PROMTOOL_BIN. Idempotent: a stamped folder is only re-checked.

pdir="$cache/promtool/$PROMTOOL_DEB_VERSION"
if [ ! -f "$pdir/.rig-ok" ]; then
  log "taking promtool out of the Debian package prometheus $PROMTOOL_DEB_VERSION"
  need apt-get apt
  need dpkg-deb dpkg
  pdeb="$dl/prometheus_${PROMTOOL_DEB_VERSION}_amd64.deb"
  if [ ! -f "$pdeb" ]; then
    # apt-get download writes into the working directory, under the name
    # the archive gives it (the version's ':' escaped), so it runs in a
    # folder of its own and the one .deb there is taken.
    ptmp=$(mktemp -d "$dl/promtool.XXXXXX")
    (cd "$ptmp" && apt-get download -q "prometheus=$PROMTOOL_DEB_VERSION") >&2 ||
      { rm -rf "$ptmp"; die "apt-get download prometheus=$PROMTOOL_DEB_VERSION failed (apt-get update first, or is the pin older than the archive's?)"; }
    mv "$ptmp"/prometheus_*.deb "$pdeb"
    rm -rf "$ptmp"
  fi
  verify "$pdeb" "$PROMTOOL_DEB_SHA256"
  rm -rf "$pdir"
  mkdir -p "$pdir"
  ptree=$(mktemp -d "$dl/promtool-x.XXXXXX")
  dpkg-deb -x "$pdeb" "$ptree" || { rm -rf "$ptree"; die "dpkg-deb -x $pdeb failed"; }
  mv "$ptree/usr/bin/promtool" "$pdir/promtool"
  rm -rf "$ptree"
  touch "$pdir/.rig-ok"
fi
[ -x "$pdir/promtool" ] || die "$pdir/promtool missing although stamped; remove $pdir and run scripts/setup-test-tools.sh"
# Running it is the re-check: a broken binary fails here, not in a test.
"$pdir/promtool" --version >/dev/null 2>&1 ||
  die "$pdir/promtool does not run; remove $pdir and run scripts/setup-test-tools.sh"
printf 'PROMTOOL_BIN=%s\n' "$pdir/promtool"
