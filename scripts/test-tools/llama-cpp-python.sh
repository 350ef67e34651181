# Sourced by scripts/setup-test-tools.sh (in a subshell): builds the pinned
# llama-cpp-python from its PyPI source archive (sha256 pinned) with its
# "server" extra into its own virtual environment under
# $cache/llama-cpp-python/<version>. pip compiles its vendored llama.cpp with
# cmake, CPU only, for AVX2-class processors (not -march=native, so the same
# build runs on every machine rig's llama-server runs on). Its OpenAI-
# compatible server is the second outside server the generic
# "openai-server" runtime is tested on (docs/runtimes.md). Prints
# LLAMA_CPP_PYTHON_VENV (the environment, pinned by its distributions) and
# LLAMA_CPP_PYTHON_BIN (its python). Idempotent: a stamped environment is
# only re-checked.

lcpv="$cache/llama-cpp-python/$LLAMA_CPP_PYTHON_VERSION/venv"
if [ ! -f "$lcpv/.rig-ok" ]; then
  log "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (server extra, CPU) into a private virtual environment; pip compiles llama.cpp, which takes minutes"
  lcps="$dl/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
  [ -f "$lcps" ] || pip download -q --no-deps --no-binary :all: -d "$dl" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2
  verify "$lcps" "$LLAMA_CPP_PYTHON_SDIST_SHA256"
  rm -rf "$lcpv"
  python3 -m venv "$lcpv" >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="$jobs" \
    "$lcpv/bin/pip" install -q --disable-pip-version-check --no-binary llama-cpp-python "${lcps}[server]" >"$lcpv.log" 2>&1 ||
    { tail -20 "$lcpv.log" >&2; die "llama-cpp-python build failed; full log: $lcpv.log"; }
  touch "$lcpv/.rig-ok"
fi
"$lcpv/bin/python" -c 'import llama_cpp, llama_cpp.server.app' >&2 ||
  die "llama-cpp-python in $lcpv does not import; remove $lcpv and run scripts/setup-test-tools.sh"
printf 'LLAMA_CPP_PYTHON_VENV=%s\n' "$lcpv"
printf 'LLAMA_CPP_PYTHON_BIN=%s\n' "$lcpv/bin/python"
