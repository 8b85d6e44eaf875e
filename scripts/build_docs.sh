#!/usr/bin/env bash
# Builds the documentation site into site/: the R reference and vignette with pkgdown (into docs/r/, which
# MkDocs then copies), then the guides, the Python API (from the docstrings) and the benchmarks page with
# MkDocs in strict mode, so that a broken link or anchor fails the build. The vignette's code runs on the
# real model as pkgdown knits it; the pages' Python and R blocks run in tests/python/docs/test_docs_code_runs.py.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash "$ROOT/scripts/build_r_site.sh"
"$ROOT/.venv/bin/python" -m mkdocs build --strict --clean --site-dir "$ROOT/site"
echo "site built in $ROOT/site (open site/index.html)"
