#!/usr/bin/env bash
# The prepared check for a real NVIDIA card (docs/gpu.md).
#
#   scripts/gpu-check.sh pack          here: put what the card's machine needs into
#                                      gpu-check-bundle/ (git-ignored, under 64 MiB):
#                                      rig, and the CUDA llama-server that
#                                      RIG_CUDA_ARCHS=90 make setup built, compressed
#   scripts/gpu-check.sh run [REPORT]  on the card's machine (no network, only the
#                                      repository and the bundle): every step below,
#                                      one Markdown report (default $OUT/gpu-check.md,
#                                      else ./gpu-check.md)
#
# The card's machine gets no model files (they cannot travel): the check makes
# its models there with rig's own GGUF writer at realistic shapes (random
# weights), and the report says so. It needs the machine's own CUDA 13 cuBLAS
# and cudart (a driver of R580 or newer); without them it says so and stops.
#
# Without a card, `run` is the rehearsal: every step runs and the card's
# steps report, each in its own words, that there is no card.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bundle="$root/gpu-check-bundle"
mode=${1:-run}
started=$(date +%s)
say() { printf '[gpu-check %3ss] %s\n' "$(($(date +%s) - started))" "$*" >&2; }
die() { printf 'gpu-check: %s\n' "$*" >&2; exit 1; }

pack() {
  # shellcheck source=/dev/null
  source "${RIG_CACHE:-$HOME/.cache/rig}/installed.env" 2>/dev/null || die "no installed.env: run make setup first"
  [ -n "${LLAMA_SERVER_CUDA_BIN:-}" ] && [ -x "$LLAMA_SERVER_CUDA_BIN" ] ||
    die "no CUDA llama-server in installed.env: run RIG_CUDA_ARCHS=90 make setup first (over an hour on 2 cores)"
  rm -rf "$bundle" && mkdir -p "$bundle"
  say "building a stripped rig"
  (cd "$root" && CGO_ENABLED=1 go build -trimpath -ldflags "-s -w" -o "$bundle/rig" ./cmd/rig) 2>"$bundle.go-build.log" || die "go build failed: see $bundle.go-build.log"
  local bindir name
  for name in cpu cuda; do
    if [ "$name" = cpu ]; then bindir=$(dirname "$LLAMA_SERVER_BIN"); else bindir=$(dirname "$LLAMA_SERVER_CUDA_BIN"); fi
    say "packing the $name llama-server from $bindir"
    # shellcheck disable=SC2046
    # llama-batched-bench goes too: the slots bench holds the server to it.
    tar -C "$bindir" -cJf "$bundle/llama-server-$name.tar.xz" llama-server $(cd "$bindir" && ls ./llama-batched-bench ./*.so* rig-sha256.txt rig-build-flags.txt 2>/dev/null)
  done
  xz -T0 -9 "$bundle/rig"
  {
    echo "LLAMA_SERVER_BUILD_FLAGS=\"$LLAMA_SERVER_BUILD_FLAGS\""
    echo "LLAMA_SERVER_CUDA_BUILD_FLAGS=\"$LLAMA_SERVER_CUDA_BUILD_FLAGS\""
    echo "CUDA_ARCHS=\"$CUDA_ARCHS\""
    # The builds' run paths are absolute: the card's machine unpacks them
    # where they were built.
    echo "CPU_BIN_DIR=$(dirname "$LLAMA_SERVER_BIN")"
    echo "CUDA_BIN_DIR=$(dirname "$LLAMA_SERVER_CUDA_BIN")"
    echo "CUDA_TOOLKIT=$CUDA_TOOLKIT"
  } >"$bundle/bundle.env"
  du -sh "$bundle"
  local size
  size=$(du -sm "$bundle" | cut -f1)
  [ "$size" -lt 60 ] || die "the bundle is ${size} MiB: over what a device call carries (64 MiB with the repository)"
  say "packed: carry gpu-check-bundle to the card's machine and run scripts/gpu-check.sh run there"
}

report=""
md() { printf '%s\n' "$@" >>"$report"; }
failed=0
# step TITLE COMMAND...: runs one step, keeps its output's tail in the report.
step() {
  local title=$1
  shift
  local t0 out rc
  t0=$(date +%s)
  say "$title"
  out=$("$@" 2>&1)
  rc=$?
  md "" "## $title" "" "\`$*\` → exit $rc in $(($(date +%s) - t0)) s" "" '```'
  printf '%s\n' "$out" | tail -n 60 >>"$report"
  md '```'
  [ $rc = 0 ] || [ "${STEP_INFO:-}" = 1 ] || failed=$((failed + 1))
  return $rc
}

run() {
  report=${1:-${OUT:+$OUT/gpu-check.md}}
  report=${report:-$root/gpu-check.md}
  mkdir -p "$(dirname "$report")"
  : >"$report"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  local card="no"
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    card="yes"
  fi
  md "# rig GPU check" "" "- when: $(date -u +%Y-%m-%dT%H:%M:%SZ)" "- machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/{print int($2/1024)" MiB"}' /proc/meminfo)"
  md "- card: $([ "$card" = yes ] && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader | paste -sd';' || echo 'none: nvidia-smi lists no card (this run is the rehearsal)')"
  md "- models: made here by rig's own GGUF writer (rig runtimes synth-model) at realistic shapes with random weights; no model file travels with the check"

  # rig: the bundle's, else the checkout's build, else go build.
  local rig=""
  if [ -f "$bundle/rig.xz" ]; then
    xz -dc "$bundle/rig.xz" >"$work/rig" && chmod +x "$work/rig" && rig="$work/rig"
  elif [ -x "$root/bin/rig" ]; then
    rig="$root/bin/rig"
  elif command -v go >/dev/null 2>&1; then
    (cd "$root" && go build -o "$work/rig" ./cmd/rig) && rig="$work/rig"
  fi
  [ -n "$rig" ] || { md "" "**blocked**: no rig binary (no bundle, no bin/rig, no Go toolchain)"; die "no rig binary"; }

  # The two llama-server builds: the bundle's, unpacked where they were
  # built (their run paths are absolute); the CUDA runtime libraries are
  # this machine's own, linked where the build looks for them.
  if [ -f "$bundle/llama-server-cuda.tar.xz" ]; then
    # This machine has no make setup: the bundle's two builds are its
    # provisioned runtimes (the rest reads as missing in the check).
    export RIG_CACHE="$work/cache"
    # shellcheck source=/dev/null
    source "$bundle/bundle.env"
    mkdir -p "$RIG_CACHE" "$CPU_BIN_DIR" "$CUDA_BIN_DIR"
    tar -C "$CPU_BIN_DIR" -xJf "$bundle/llama-server-cpu.tar.xz"
    tar -C "$CUDA_BIN_DIR" -xJf "$bundle/llama-server-cuda.tar.xz"
    {
      echo "RIG_CACHE=$RIG_CACHE"
      echo "LLAMA_SERVER_BIN=$CPU_BIN_DIR/llama-server"
      echo "LLAMA_BATCHED_BENCH_BIN=$CPU_BIN_DIR/llama-batched-bench"
      echo "LLAMA_SERVER_BUILD_FLAGS=\"$LLAMA_SERVER_BUILD_FLAGS\""
      echo "LLAMA_SERVER_CUDA_BIN=$CUDA_BIN_DIR/llama-server"
      echo "LLAMA_SERVER_CUDA_BUILD_FLAGS=\"$LLAMA_SERVER_CUDA_BUILD_FLAGS\""
      echo "CUDA_TOOLKIT=$CUDA_TOOLKIT"
      echo "CUDA_ARCHS=\"$CUDA_ARCHS\""
    } >"$RIG_CACHE/installed.env"
    CUDA_TOOLKIT_RPATH="$CUDA_TOOLKIT/lib"
    # The build looks for libcudart/libcublas in the toolkit folder setup
    # made (its rpath); on this machine they are the machine's own.
    if [ ! -e "$CUDA_TOOLKIT_RPATH/libcublas.so.13" ]; then
      local found=""
      for d in $(ldconfig -p 2>/dev/null | awk '/libcublas\.so\.13/{print $NF}' | xargs -r dirname) /usr/local/cuda*/lib64 /usr/local/cuda*/targets/x86_64-linux/lib \
        $(python3 -c 'import site;print(" ".join(p+"/nvidia/cu13/lib" for p in site.getsitepackages()))' 2>/dev/null); do
        if [ -e "$d/libcublas.so.13" ] && [ -e "$d/libcudart.so.13" ]; then found=$d; break; fi
      done
      if [ -n "$found" ]; then
        mkdir -p "$CUDA_TOOLKIT_RPATH"
        for so in "$found"/libcublas.so.13* "$found"/libcublasLt.so.13* "$found"/libcudart.so.13*; do ln -sf "$so" "$CUDA_TOOLKIT_RPATH/"; done
        md "- CUDA runtime libraries: this machine's, from $found"
      else
        md "- CUDA runtime libraries: **none found** (no libcublas.so.13 and libcudart.so.13 on this machine): the CUDA steps below fail at the runtime's start"
      fi
    fi
  fi

  # Informational: a card's machine has only the two llama-server builds, so
  # the check lists Ollama, Aider and the models as missing there.
  STEP_INFO=1 step "Runtimes and the cards they see" "$rig" runtimes check
  step "Models made here" "$rig" runtimes synth-model --shape "${RIG_GPU_CHECK_SHAPE:-1b}" --out "$work/synth.gguf"
  step "Smoke on the card, log-probabilities against the CPU build, energy per token" \
    "$rig" runtimes smoke --model "$work/synth.gguf" --compare-backends --max-tokens 32
  step "Preflight against measured card memory (three contexts, two KV types)" \
    "$rig" bench preflight --device cuda --model "$work/synth.gguf"
  step "A card-memory preemption by the governor" "$rig" governor card-check --model "$work/synth.gguf" --budget 64MiB
  # Slots: a study's batch at 1 to 32 requests in flight on the card,
  # against the CUDA build's own llama-batched-bench (docs/runtimes.md, the
  # slots section; its figures go in docs/gpu.md).
  step "Slots on the card: a study's batch against llama-batched-bench" \
    "$rig" bench slots --device cuda --model-file "$work/synth.gguf" --slots "${RIG_GPU_CHECK_SLOTS:-1,2,4,8,16,32}" --reps 2
  if [ "$card" = yes ]; then
    step "NVML as the driver reports it" nvidia-smi --query-gpu=name,memory.used,memory.total,temperature.gpu,power.draw,clocks_event_reasons.active --format=csv
  else
    md "" "## NVML" "" "no card: NVML has nothing to read here (rehearsal)"
  fi
  md "" "---" "" "total: $(($(date +%s) - started)) s; $failed step(s) failed"
  say "report: $report ($failed step(s) failed)"
  # The rehearsal's card steps fail by design (no card), saying so; on a
  # card every step must pass.
  [ "$card" = no ] || [ "$failed" = 0 ]
}

case "$mode" in
pack) pack ;;
run) shift; run "$@" ;;
*) die "usage: scripts/gpu-check.sh pack | run [REPORT]" ;;
esac
