# Sourced by scripts/setup-test-tools.sh (in a subshell): installs the pinned
# lm-eval (lm-evaluation-harness) from PyPI with its "api" extra into its own
# virtual environment under $cache/lm-eval/<version>. The core and that extra
# need no PyTorch (only the "hf" extra does), so the environment stays a few
# hundred megabytes. Prints LM_EVAL_BIN (its `lm_eval` command).
# Idempotent: a stamped environment is only re-checked.

lvenv="$cache/lm-eval/$LM_EVAL_VERSION/venv"
if [ ! -f "$lvenv/.rig-ok" ]; then
  log "installing lm-eval $LM_EVAL_VERSION (api extra, no PyTorch) into a private virtual environment"
  lwhl="$dl/lm_eval-$LM_EVAL_VERSION-py3-none-any.whl"
  [ -f "$lwhl" ] || pip download -q --no-deps -d "$dl" "lm-eval==$LM_EVAL_VERSION" >&2
  verify "$lwhl" "$LM_EVAL_WHEEL_SHA256"
  rm -rf "$lvenv"
  python3 -m venv "$lvenv" >&2
  "$lvenv/bin/pip" install -q --disable-pip-version-check "${lwhl}[api]" >"$lvenv.log" 2>&1 ||
    { tail -20 "$lvenv.log" >&2; die "lm-eval install failed; full log: $lvenv.log"; }
  if "$lvenv/bin/python" -c 'import torch' 2>/dev/null; then
    die "lm-eval's environment $lvenv pulled in PyTorch; the api extra should need none"
  fi
  touch "$lvenv/.rig-ok"
fi
[ -x "$lvenv/bin/lm_eval" ] || die "$lvenv/bin/lm_eval missing although stamped; remove $lvenv and run scripts/setup-test-tools.sh"
# Hub clients are told they are offline here as in the test
# (cmd/rig/compare_lmeval_e2e_test.go): nothing is fetched or reported.
env HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1 "$lvenv/bin/python" -c 'import lm_eval' >&2 ||
  die "lm-eval in $lvenv does not import; remove $lvenv and run scripts/setup-test-tools.sh"
printf 'LM_EVAL_BIN=%s\n' "$lvenv/bin/lm_eval"
