#!/usr/bin/env bash
# Line coverage of the whole test command's tests: python_core by coverage.py over pytest (the tests of
# scripts/test.sh's pytest lane), and the R package by covr over its testthat suite with the whole command's
# settings. Prints both totals; coverage.py's data stays in .coverage (`.venv/bin/python -m coverage report` lists
# every file). Needs scripts/setup.sh to have run and the instruct models fetched (scripts/test.sh does both);
# installs Debian's r-cran-covr when it is missing. Takes about as long as the two lanes one after the other.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export NEWRLLAMA_PYTHON="$ROOT/.venv/bin/python" R_LIBS="$ROOT/.Rlib" NEWRLLAMA_TEST_INSTRUCT=true

"$ROOT/.venv/bin/python" -m coverage run --data-file="$ROOT/.coverage" --source="$ROOT/python_core/newrllama" \
    -m pytest -q -p no:cacheprovider tests/python tests/cross_language \
    --deselect tests/python/docs/test_docs_code_runs.py
python_total=$("$ROOT/.venv/bin/python" -m coverage report --data-file="$ROOT/.coverage" | tail -1)

if ! Rscript -e 'quit(status = !requireNamespace("covr", quietly = TRUE))'; then
    apt-get install -y r-cran-covr >/dev/null
fi
r_total=$(NEWRLLAMA_TEST_INSTALL=true NEWRLLAMA_SOURCE="$ROOT" Rscript -e '
cov <- covr::package_coverage("r_package", type = "tests", quiet = TRUE)
cat(sprintf("%.1f%% of %d lines", covr::percent_coverage(cov), nrow(covr::tally_coverage(cov))))')

echo "python_core (coverage.py, pytest): $python_total"
echo "r_package (covr, testthat): $r_total"
