#!/usr/bin/env bash
# Builds the documentation site into site/, and fails on a page whose code does not run or a broken link:
# first every Python and R block of the README and the docs pages runs on the real model
# (tests/python/docs/test_docs_code_runs.py), then pkgdown builds the R reference and vignette into docs/r/
# (knitting the vignette, so its code runs too), then MkDocs builds the guides, the Python API (from the
# docstrings) and the benchmarks page in strict mode, where a broken link or anchor is an error.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
bash "$ROOT/scripts/setup.sh"
R_LIBS="$ROOT/.Rlib" "$ROOT/.venv/bin/python" -m pytest -q -p no:cacheprovider ${NEWRLLAMA_DOCS_JUNIT:-} "$ROOT/tests/python/docs/test_docs_code_runs.py"
bash "$ROOT/scripts/build_r_site.sh"
"$ROOT/.venv/bin/python" -m mkdocs build --strict --clean --site-dir "$ROOT/site"
# The API page must document every name that `import newrllama` exports.
"$ROOT/.venv/bin/python" - "$ROOT/site/api/index.html" <<'PY'
import re, sys
import newrllama
documented = set(re.findall(r'id="newrllama(?:\.[\w.]+)?\.(\w+)"', open(sys.argv[1]).read()))
missing = sorted(set(newrllama.__all__) - documented)
if missing:
    sys.exit(f"the Python API page lacks {', '.join(missing)}")
PY
echo "site built in $ROOT/site (open site/index.html)"
