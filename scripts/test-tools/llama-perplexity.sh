# llama-perplexity (sourced by scripts/setup-test-tools.sh): llama.cpp's own
# KL-divergence tool, the reference rig's fidelity measure is checked against
# (fidelity/perplexity_test.go). It is built from the pinned llama.cpp that
# scripts/setup.sh already unpacked and verified, as one more target of the
# very build folder the server and rig-prefill-score come from, so it runs
# on the same libllama files; no download, so no sha256 of its own (the
# bundle's is pinned in pins.env). Its stamp lives in the cache keyed by the
# commit and the build folder, as every test tool's does.
[ -n "${LLAMA_SERVER_BIN:-}" ] || die "installed.env names no LLAMA_SERVER_BIN: run scripts/setup.sh first"
lp_build=$(dirname "$(dirname "$LLAMA_SERVER_BIN")")
lp_bin="$lp_build/bin/llama-perplexity"
lp_stamp="$cache/llama-perplexity/$LLAMA_CPP_COMMIT-$(basename "$lp_build")"
if [ ! -f "$lp_stamp/.rig-ok" ] || [ ! -x "$lp_bin" ]; then
  log "building llama-perplexity into $lp_build (for the fidelity check; a minute or two)"
  mkdir -p "$lp_stamp"
  cmake --build "$lp_build" --target "$LLAMA_PERPLEXITY_TARGET" -j "$jobs" >"$lp_stamp/build.log" 2>&1 ||
    { tail -20 "$lp_stamp/build.log" >&2; die "llama-perplexity build failed; full log: $lp_stamp/build.log"; }
  touch "$lp_stamp/.rig-ok"
fi
[ -x "$lp_bin" ] || die "$lp_bin missing although stamped; remove $lp_stamp and run scripts/setup-test-tools.sh"
echo "LLAMA_PERPLEXITY_BIN=$lp_bin"
