#!/usr/bin/env bash
# Builds the cuda flavour of llama-cpp-python the way a user does (scripts/build_llama_cpp.py --gpu cuda), on a
# machine with no CUDA toolkit and no GPU: CUDA's compiler, headers and libraries come from PyPI (CUDA 13's
# nvidia-cuda-nvcc, -runtime, -cublas, -cccl, -crt and nvidia-nvvm wheels). Not part of the tests: it compiles
# llama.cpp's CUDA backend, about an hour on two cores.
#
#     bash scripts/build_cuda_from_pypi.sh            # log added to bench/results/gpu/cuda-build-pypi-<date>-<cpu>.log
#     bash scripts/build_cuda_from_pypi.sh check      # only the loading check of the wheel installed last
#
# The wheels hold a toolkit's files but not its shape, which CMake's FindCUDAToolkit and nvcc.profile expect:
# the unversioned library names (libcudart.so, libcublas.so), targets/<arch>-linux/{include,lib}, and the driver
# library's link stub (lib/stubs/libcuda.so), which only a toolkit installer or a GPU driver brings. The stub is
# made here from cuda.h: every driver function, each returning CUDA_ERROR_STUB_LIBRARY, with the driver's soname,
# so that the built library asks for the real libcuda.so.1 where a driver is installed.
#
# The wheel is installed into a scratch virtualenv, never into .venv (which keeps the CPU flavour). With no GPU
# here, what can be checked ends at loading it: llama.cpp's CUDA backend registered, no device found. What only a
# GPU can check is scripts/device_check_cuda.sh's job.
#
# Environment: NEWRLLAMA_CUDA_ARCH (default: build_llama_cpp.py's), CUDA_SERIES (default 13.0), CUDA_PYPI_DIR
# (default ~/.cache/newrllama/cuda-pypi-$CUDA_SERIES).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY="$ROOT/.venv/bin/python"
SERIES=${CUDA_SERIES:-13.0}
DIR=${CUDA_PYPI_DIR:-$HOME/.cache/newrllama/cuda-pypi-$SERIES}
TOP="$DIR/site/nvidia/cu${SERIES%%.*}"
VENV="$DIR/venv"
CPU=$("$PY" -c 'import platform, re; n = open("/proc/cpuinfo").read(); m = re.search(r"model name\s*:\s*(.*)", n); print(re.sub(r"[^A-Za-z0-9]+", "-", m.group(1) if m else platform.machine()).strip("-"))')
LOG="$ROOT/bench/results/gpu/cuda-build-pypi-$(date +%F)-$CPU.log"
mkdir -p "$(dirname "$LOG")"
exec > >(tee -a "$LOG") 2>&1  # a rerun (the wheel cached) adds to the first run's log

say() { printf '[cuda-pypi %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

say "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-); $(gcc --version | head -1)"
say "CUDA $SERIES from PyPI into $DIR/site"
"$PY" -m pip install -q --disable-pip-version-check --upgrade --target "$DIR/site" \
    "nvidia-cuda-nvcc==$SERIES.*" "nvidia-cuda-runtime==$SERIES.*" "nvidia-cublas==$SERIES.*" \
    "nvidia-cuda-cccl==$SERIES.*" "nvidia-cuda-crt==$SERIES.*" "nvidia-nvvm==$SERIES.*" 2>&1 | grep -v '^WARNING' || true
"$PY" -m pip list --path "$DIR/site" 2>/dev/null | grep -i nvidia

say "the toolkit's shape"
TARGET="targets/$(uname -m)-linux"
mkdir -p "$TOP/$TARGET"
ln -sfn ../../include "$TOP/$TARGET/include"
ln -sfn ../../lib "$TOP/$TARGET/lib"
for lib in "$TOP"/lib/lib*.so.[0-9]*; do
    ln -sf "$(basename "$lib")" "${lib%%.so.*}.so"
done
mkdir -p "$TOP/lib/stubs"
# The preprocessed header names each function as the library exports it (cuMemGetInfo is cuMemGetInfo_v2).
gcc -E -P -I"$TOP/include" -x c "$TOP/include/cuda.h" \
    | grep -o '\bCUresult[[:space:]]\+\(CUDAAPI[[:space:]]\+\)\?cu[A-Za-z0-9_]*[[:space:]]*(' \
    | grep -o 'cu[A-Za-z0-9_]*[[:space:]]*($' | tr -d '( ' | sort -u \
    | awk 'BEGIN { print "/* Link stub of the CUDA driver library, made by build_cuda_from_pypi.sh. */" }
           { printf "int %s(void) { return 34; }\n", $1 }' > "$TOP/lib/stubs/libcuda_stub.c"
gcc -shared -fPIC -o "$TOP/lib/stubs/libcuda.so" -Wl,-soname,libcuda.so.1 "$TOP/lib/stubs/libcuda_stub.c"
ln -sf libcuda.so "$TOP/lib/stubs/libcuda.so.1"  # for loading it here only, where no driver is
say "driver stub: $(grep -c return "$TOP/lib/stubs/libcuda_stub.c") functions"
"$TOP/bin/nvcc" --version | tail -2

say "scratch virtualenv $VENV"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING' || true

if [ "${1:-}" != check ]; then
    say "build_llama_cpp.py --gpu cuda, CMake arguments: $("$PY" "$ROOT/scripts/build_llama_cpp.py" --gpu cuda --print-cmake-args)"
    start=$(date +%s)
    status=0
    CUDA_PATH="$TOP" CUDAToolkit_ROOT="$TOP" CUDACXX="$TOP/bin/nvcc" PATH="$TOP/bin:$PATH" \
        CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$PY" "$ROOT/scripts/build_llama_cpp.py" --python "$VENV/bin/python" --gpu cuda \
        || status=$?
    say "build_llama_cpp.py exited $status after $(( $(date +%s) - start )) s (its check after the install cannot load the CUDA runtime without a library path: expected here)"

fi
WHEEL=$(ls -t "$HOME"/.cache/newrllama/wheels/cuda-*/llama_cpp_python-*.whl 2>/dev/null | head -1)
[ -n "$WHEEL" ] || { say "no wheel was built"; exit 1; }
say "built wheel: $WHEEL ($(du -h "$WHEEL" | cut -f1))"
unzip -l "$WHEEL" | grep -E 'lib/lib(ggml|llama)' | awk '{print $1, $4}'

say "loading it with the PyPI runtime and the stub on the library path (no GPU, no driver here)"
LIBDIR=$("$VENV/bin/python" -c 'import importlib.util, os; print(os.path.join(os.path.dirname(importlib.util.find_spec("llama_cpp").origin), "lib"))')
readelf -d "$LIBDIR/libggml-cuda.so" | grep NEEDED
LD_LIBRARY_PATH="$TOP/lib:$TOP/lib/stubs" "$VENV/bin/python" - <<'EOF'
import llama_cpp
llama_cpp.llama_backend_init()
print("gpu_offload:", bool(llama_cpp.llama_supports_gpu_offload()))
print("system info:", llama_cpp.llama_print_system_info().decode())
EOF
say "done"
