#!/usr/bin/env bash
# Sets everything up, then runs parallel generation from R on the embedded model.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
NEWRLLAMA_PYTHON="$ROOT/.venv/bin/python" R_LIBS="$ROOT/.Rlib" Rscript "$ROOT/scripts/demo.R"
