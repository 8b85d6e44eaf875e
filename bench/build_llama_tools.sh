#!/usr/bin/env bash
# Builds one of llama.cpp's own tools (llama-batched-bench by default, or the target
# named as the first argument, such as llama-server or llama-bench) from the llama.cpp
# that the pinned llama-cpp-python vendors (its source archive from PyPI), with the same
# AMX-off flags as our libllama, so the benchmarks can put our figures beside llama.cpp's.
# With NEWRLLAMA_PATCHED=1 it builds the tool from that source with newrllama's kernel
# patches applied (capi_shim/llama_cpp_patch), in a build of its own: llama.cpp's harness
# around our kernels, to set a kernel beside llama.cpp's own in the same tool (llama-bench
# --repack 0 runs our K-quant kernels; --repack 1 llama.cpp's repacked ones).
# Prints the binary's path. Nothing of it is committed: it lives in bench/.tools.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS="$ROOT/bench/.tools"
TARGET="${1:-llama-batched-bench}"
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
if [ "${NEWRLLAMA_PATCHED:-0}" = 1 ]; then
    SRC="$TOOLS/patched-src"; BUILD="$TOOLS/patched-build"
else
    SRC="$TOOLS/src"; BUILD="$TOOLS/build"
fi
BIN="$BUILD/bin/$TARGET"
if [ -x "$BIN" ]; then echo "$BIN"; exit 0; fi
mkdir -p "$TOOLS"
if [ ! -d "$SRC" ]; then
    VERSION="$("$ROOT/.venv/bin/python" "$ROOT/capi_shim/llama_cpp_pin.py")"
    ARCHIVE="$TOOLS/llama_cpp_python-$VERSION.tar.gz"
    if [ ! -f "$ARCHIVE" ]; then
        "$ROOT/.venv/bin/python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$TOOLS" >&2
    fi
    mkdir -p "$SRC.part"
    tar -xzf "$ARCHIVE" -C "$SRC.part" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
    if [ "${NEWRLLAMA_PATCHED:-0}" = 1 ]; then
        "$ROOT/.venv/bin/python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import apply; from pathlib import Path; apply.apply(Path(sys.argv[2]))' \
            "$ROOT/capi_shim/llama_cpp_patch" "$SRC.part"
    fi
    mv "$SRC.part" "$SRC"
fi
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_SERVER=ON -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX" >&2
cmake --build "$BUILD" --target "$TARGET" -j "$(nproc)" >&2
echo "$BIN"
