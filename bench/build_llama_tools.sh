#!/usr/bin/env bash
# Builds one of llama.cpp's own tools (llama-batched-bench by default, or the target
# named as the first argument, such as llama-server) from the llama.cpp that the pinned
# llama-cpp-python vendors (its source archive from PyPI), with the same AMX-off flags
# as our libllama, so the benchmarks can put our figures beside llama.cpp's.
# Prints the binary's path. Nothing of it is committed: it lives in bench/.tools.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/bench/.tools"
TARGET="${1:-llama-batched-bench}"
BIN="$TOOLS/build/bin/$TARGET"
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$TOOLS"
if [ ! -d "$TOOLS/src" ]; then
    VERSION="$("$ROOT/.venv/bin/python" "$ROOT/capi_shim/llama_cpp_pin.py")"
    "$ROOT/.venv/bin/python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$TOOLS" >&2
    mkdir -p "$TOOLS/src"
    tar -xzf "$TOOLS/llama_cpp_python-$VERSION.tar.gz" -C "$TOOLS/src" --strip-components=3 \
        "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
cmake -S "$TOOLS/src" -B "$TOOLS/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=ON -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" >&2
cmake --build "$TOOLS/build" --target "$TARGET" -j "$(nproc)" >&2
echo "$BIN"
