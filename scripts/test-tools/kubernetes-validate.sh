# Sourced by scripts/setup-test-tools.sh (in a subshell): installs the pinned
# kubernetes-validate from PyPI into its own virtual environment under
# $cache/kubernetes-validate/<version>. Its wheel bundles the Kubernetes API's
# JSON schemas, so the manifest test validates deploy/kubernetes/ offline,
# against a schema fixed by this pin. Prints KUBERNETES_VALIDATE_BIN.
# Idempotent: a stamped environment is only re-checked.

kvenv="$cache/kubernetes-validate/$KUBERNETES_VALIDATE_VERSION/venv"
if [ ! -f "$kvenv/.rig-ok" ]; then
  log "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION into a private virtual environment"
  kwhl="$dl/kubernetes_validate-$KUBERNETES_VALIDATE_VERSION-py3-none-any.whl"
  [ -f "$kwhl" ] || pip download -q --no-deps -d "$dl" "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" >&2
  verify "$kwhl" "$KUBERNETES_VALIDATE_WHEEL_SHA256"
  rm -rf "$kvenv"
  python3 -m venv "$kvenv" >&2
  "$kvenv/bin/pip" install -q --disable-pip-version-check "$kwhl" >"$kvenv.log" 2>&1 ||
    { tail -20 "$kvenv.log" >&2; die "kubernetes-validate install failed; full log: $kvenv.log"; }
  touch "$kvenv/.rig-ok"
fi
[ -x "$kvenv/bin/kubernetes-validate" ] || die "$kvenv/bin/kubernetes-validate missing although stamped; remove $kvenv and run scripts/setup-test-tools.sh"
"$kvenv/bin/kubernetes-validate" --version >/dev/null 2>&1 ||
  die "kubernetes-validate in $kvenv does not run; remove $kvenv and run scripts/setup-test-tools.sh"
printf 'KUBERNETES_VALIDATE_BIN=%s\n' "$kvenv/bin/kubernetes-validate"
