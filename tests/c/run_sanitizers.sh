#!/usr/bin/env bash
# Builds the shim with AddressSanitizer (LeakSanitizer included) into a test
# harness and runs it over load, tokenizer, generation, error paths and free.
# Exit status 0 means: every expectation held, no invalid access, no leak.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PY="${PYTHON:-$ROOT/.venv/bin/python}"
read -r INCLUDE LIBDIR < <("$PY" - "$ROOT/capi_shim" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
from build import llama_cpp_location
inc, lib = llama_cpp_location()
print(inc, lib)
PY
)
MODEL=$("$PY" -c 'import newrllama; print(newrllama.default_model_path())')
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
gcc -std=c11 -D_POSIX_C_SOURCE=200809L -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined \
    -Wall -Wextra -Wno-unused-parameter -I "$ROOT/capi_shim" -I "$INCLUDE" \
    "$ROOT"/capi_shim/newrllama_*.c "$ROOT/tests/c/leak_check.c" \
    -L "$LIBDIR" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$LIBDIR" -o "$WORK/leak_check"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$WORK/leak_check" "$MODEL" "$WORK"
