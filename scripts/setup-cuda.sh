# Sourced by scripts/setup.sh after the CPU llama-server is built: the CUDA
# variant of llama-server, beside the CPU one. Uses setup.sh's log, die,
# verify, $cache, $dl, $jobs, $lsrc and the pins. Sets cuda_server,
# cuda_toolkit, cuda_archs and cuda_flags ("" when this machine gets no CUDA build), and
# cuda_note, one line saying why.
#
# Which capabilities: RIG_CUDA_ARCHS if set (RIG_CUDA_ARCHS=90 compiles for an
# H100/H200 on a machine with no card), else those of the cards nvidia-smi
# lists, else none: a machine with no NVIDIA driver gets the CPU path only.

cuda_server="" cuda_toolkit="" cuda_archs="" cuda_note="" cuda_flags=""

cuda_detect_archs() {
  if [ -n "${RIG_CUDA_ARCHS:-}" ]; then
    # "90", "80,90", "sm_90", "9.0" -> CMake's "80;90".
    printf '%s' "$RIG_CUDA_ARCHS" | sed 's/sm_//g; s/\.//g' | tr -c '0-9\n' ';' | tr -s ';' | sed 's/^;//; s/;$//'
    return 0
  fi
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  # "9.0" per card -> "90", duplicates folded, joined by ';' as CMake wants.
  # A driver that lists no card (or fails) gives nothing, never a failed set-up.
  { nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null || true; } |
    tr -d ' .' | { grep -E '^[0-9]+$' || true; } | sort -u | paste -sd';'
}

cuda_archs=$(cuda_detect_archs)
if [ -z "$cuda_archs" ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    cuda_note="nvidia-smi lists no card: CPU builds only"
  else
    cuda_note="no NVIDIA driver (nvidia-smi not found): CPU builds only; RIG_CUDA_ARCHS=90 make setup compiles the CUDA variant anyway"
  fi
  log "$cuda_note"
  return 0
fi

# --- the CUDA toolkit, from PyPI wheels ---------------------------------------------
cuda_toolkit="$cache/cuda/$CUDA_TOOLKIT_VERSION"
if [ ! -f "$cuda_toolkit/.rig-ok" ]; then
  log "assembling the CUDA $CUDA_TOOLKIT_VERSION toolkit from PyPI wheels (about 700 MB)"
  rm -rf "$cuda_toolkit" && mkdir -p "$cuda_toolkit" "$dl/cuda"
  tmp=$(mktemp -d)
  for spec in "$CUDA_NVCC_WHEEL" "$CUDA_CRT_WHEEL" "$CUDA_NVVM_WHEEL" "$CUDA_RUNTIME_WHEEL" "$CUDA_CCCL_WHEEL" "$CUDA_CUBLAS_WHEEL"; do
    read -r name version sum <<<"$spec"
    whl=$(ls "$dl/cuda/${name//-/_}-$version-"*.whl 2>/dev/null | head -1 || true)
    if [ -z "$whl" ]; then
      pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux1_x86_64 \
        -d "$dl/cuda" "$name==$version" || die "pip could not fetch $name==$version (pinned in internal/provision/pins.env)"
      whl=$(ls "$dl/cuda/${name//-/_}-$version-"*.whl | head -1)
    fi
    verify "$whl" "$sum"
    unzip -q -o "$whl" 'nvidia/cu13/*' -d "$tmp"
  done
  cp -a "$tmp/nvidia/cu13/." "$cuda_toolkit/"
  rm -rf "$tmp"
  # The wheels carry versioned sonames only; the linker looks for the plain names.
  (cd "$cuda_toolkit/lib" && for so in libcudart libcublas libcublasLt; do
    ln -sf "$(ls $so.so.* | head -1)" "$so.so"; done)
  ln -sfn lib "$cuda_toolkit/lib64"
  "$cuda_toolkit/bin/nvcc" --version >/dev/null || die "$cuda_toolkit/bin/nvcc does not run"
  touch "$cuda_toolkit/.rig-ok"
fi

# --- llama-server with the CUDA backend ---------------------------------------------
cuda_flags="$LLAMA_CPP_CMAKE_FLAGS $LLAMA_CPP_CUDA_CMAKE_FLAGS -DCMAKE_CUDA_ARCHITECTURES=$cuda_archs"
cuda_key=$(printf '%s|%s' "$cuda_flags" "$CUDA_TOOLKIT_VERSION" | sha256sum | cut -c1-12)
cbuild="$cache/llama.cpp/$LLAMA_CPP_COMMIT/build-cuda${cuda_archs//;/-}-$cuda_key"
cuda_server="$cbuild/bin/llama-server"
if [ ! -f "$cbuild/.rig-ok" ]; then
  log "building llama-server with CUDA for capability $cuda_archs ($jobs jobs; over an hour on 2 cores, log: $cbuild.log)"
  # shellcheck disable=SC2086
  PATH="$cuda_toolkit/bin:$PATH" cmake -S "$lsrc" -B "$cbuild" -G Ninja $cuda_flags \
    -DCUDAToolkit_ROOT="$cuda_toolkit" -DCMAKE_CUDA_COMPILER="$cuda_toolkit/bin/nvcc" \
    -DCMAKE_BUILD_RPATH="$cuda_toolkit/lib" >"$cbuild.log" 2>&1 ||
    { tail -20 "$cbuild.log"; die "cmake configure (CUDA) failed; full log: $cbuild.log"; }
  PATH="$cuda_toolkit/bin:$PATH" cmake --build "$cbuild" --target llama-server -j "$jobs" >>"$cbuild.log" 2>&1 ||
    { tail -20 "$cbuild.log"; die "llama-server CUDA build failed; full log: $cbuild.log"; }
  printf '%s\n' "$cuda_flags" >"$cbuild/rig-build-flags.txt"
  (cd "$cbuild/bin" && sha256sum llama-server ./*.so* >rig-sha256.txt)
  touch "$cbuild/.rig-ok"
fi
[ -x "$cuda_server" ] || die "$cuda_server missing although stamped; remove $cbuild and run make setup"
cuda_note="CUDA llama-server for capability $cuda_archs: $cuda_server"
