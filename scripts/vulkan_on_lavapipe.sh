#!/usr/bin/env bash
# The vulkan flavour, built the way a user builds it and run on a CPU Vulkan device: Mesa's lavapipe (llvmpipe),
# Debian's mesa-vulkan-drivers. Not part of the tests: the build takes tens of minutes and lavapipe is slow.
#
#     bash scripts/vulkan_on_lavapipe.sh build   # a copy of the checkout in $VULKAN_WORK/repo, set up with
#                                                # NEWRLLAMA_GPU=vulkan bash scripts/setup.sh (build_llama_cpp.py
#                                                # --gpu vulkan), then R's install_newrllama(gpu = "vulkan")
#     bash scripts/vulkan_on_lavapipe.sh run     # on the device: system_info(), then the tests below with every,
#                                                # 9 and no layer offloaded
#     bash scripts/vulkan_on_lavapipe.sh all
#
# Results go to bench/results/vulkan/ of this checkout: the build log, vulkaninfo, system_info(), and each test
# run's JUnit XML and summary. Debian packages: glslc libvulkan-dev mesa-vulkan-drivers
# (vulkan-tools for vulkaninfo). llama.cpp passes by CPU-type Vulkan devices unless told which device to use:
# GGML_VK_VISIBLE_DEVICES names lavapipe's index (the first CPU-type device vulkaninfo lists).
#
# lavapipe is far slower than the CPU backend, so the run takes one representative test of each door
# (generation, the same bits alone and in a batch, the build's determinism record, the prefix cache, label scores
# against llama-cpp-python on the CPU, annotate(), the server through the OpenAI client), with every, 9 and no
# layer offloaded (NEWRLLAMA_TEST_GPU_LAYERS, read by tests/python/conftest.py).
#
# Environment: VULKAN_WORK (default /tmp/newrllama-vulkan), TEST_TIMEOUT (seconds per test run, default 1500),
# TESTS (the test ids).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${VULKAN_WORK:-/tmp/newrllama-vulkan}
RESULTS="$ROOT/bench/results/vulkan"
REPO="$WORK/repo"
PY="$REPO/.venv/bin/python"
mkdir -p "$RESULTS" "$WORK"
DAY=$(date +%F)
TEST_TIMEOUT=${TEST_TIMEOUT:-1500}
TESTS=${TESTS:-"tests/python/engine/test_generate.py::test_embedded_model_knows_paris
 tests/python/engine/test_determinism.py::test_each_prompt_alone_against_the_batch
 tests/python/engine/test_determinism.py::test_the_build_carries_the_patches_and_says_so
 tests/python/engine/test_prefix_cache.py::test_instruction_is_decoded_once_within_a_call
 tests/python/engine/test_choices.py::test_single_token_labels_match_the_oracle
 tests/python/labels/test_annotate.py::test_every_text_gets_a_valid_label_or_a_reason
 tests/python/doors/test_server.py::test_completion_through_the_openai_client"}

say() { printf '[vulkan %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

lavapipe_index() {
    vulkaninfo --summary 2>/dev/null | awk '/^GPU[0-9]+:/ { gpu = substr($1, 4, length($1) - 4) }
        /deviceType/ && /CPU/ { print gpu; exit }'
}

build() {
    say "copying the checkout to $REPO"
    rm -rf "$REPO" && mkdir -p "$REPO"
    (cd "$ROOT" && tar --exclude=./.venv --exclude=./.Rlib --exclude=./.git --exclude=./.device --exclude=./bench/.tools \
        --exclude='*.so' --exclude=./python_core/newrllama/_capi.c --exclude=./site -cf - .) | tar -xf - -C "$REPO"
    say "glslc: $(glslc --version | head -1); headers: $(grep -m1 '#define VK_HEADER_VERSION ' /usr/include/vulkan/vulkan_core.h)"
    local start; start=$(date +%s)
    (cd "$REPO" && NEWRLLAMA_GPU=vulkan bash scripts/setup.sh) || { say "setup failed after $(( $(date +%s) - start )) s"; return 1; }
    say "set up in $(( $(date +%s) - start )) s"
    say "R: install_newrllama(gpu = \"vulkan\") into a virtualenv of its own (the wheel the setup built)"
    start=$(date +%s)
    (cd "$REPO" && WORKON_HOME="$WORK/r-envs" NEWRLLAMA_SOURCE="$REPO" R_LIBS="$REPO/.Rlib" Rscript -e '
        newrllama::install_newrllama(envname = "r-newrllama-vulkan", gpu = "vulkan", extras = character())
        reticulate::use_virtualenv("r-newrllama-vulkan", required = TRUE)
        info <- newrllama::system_info()
        cat("R install: gpu_backends", unlist(info$gpu_backends), "gpu_offload", info$gpu_offload, "\n")') \
        || say "install_newrllama(gpu = \"vulkan\") failed"
    say "R install took $(( $(date +%s) - start )) s"
}

run() {
    [ -x "$PY" ] || { say "no build in $REPO: run the build phase first"; return 1; }
    local device; device=$(lavapipe_index)
    [ -n "$device" ] || { say "no CPU-type Vulkan device (apt install mesa-vulkan-drivers)"; return 1; }
    export GGML_VK_VISIBLE_DEVICES=$device PYTHONUNBUFFERED=1
    say "lavapipe is Vulkan device $device"
    vulkaninfo --summary 2>/dev/null | sed -n '/^Devices/,$p' > "$RESULTS/vulkaninfo-$DAY.txt"
    cd "$REPO" || return 1
    "$PY" -c 'import json, newrllama; print(json.dumps(newrllama.system_info().__dict__, default=str, indent=1))' \
        > "$RESULTS/system-info-$DAY.json"
    local layers label start
    for layers in all 9 0; do
        label="$layers-layers"
        say "tests with $layers layers offloaded: $TESTS"
        start=$(date +%s)
        if [ "$layers" = all ]; then unset NEWRLLAMA_TEST_GPU_LAYERS; else export NEWRLLAMA_TEST_GPU_LAYERS=$layers; fi
        # shellcheck disable=SC2086  # TESTS is a list of test ids
        timeout "$TEST_TIMEOUT" "$PY" -m pytest -q -p no:cacheprovider -W default::UserWarning $TESTS \
            --junitxml="$RESULTS/tests-$label-$DAY.xml" 2>&1 | tail -60 > "$RESULTS/tests-$label-$DAY.txt"
        say "$layers layers: $(tail -1 "$RESULTS/tests-$label-$DAY.txt") in $(( $(date +%s) - start )) s" \
            | tee -a "$RESULTS/tests-$label-$DAY.txt"
    done
    unset NEWRLLAMA_TEST_GPU_LAYERS
    say "done"
}

case "${1:-}" in
    build) build 2>&1 | tee "$RESULTS/build-$DAY.log" ;;
    run) run ;;
    all) build 2>&1 | tee "$RESULTS/build-$DAY.log" && run ;;
    *) echo "usage: $0 build|run|all" >&2; exit 2 ;;
esac
