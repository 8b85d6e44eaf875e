#!/usr/bin/env bash
# Knits the R vignette on the real model into r_package/inst/doc/ (its source, its HTML and its R code), the way
# R CMD build would, so that `R CMD INSTALL r_package` installs it and vignette("coding-a-corpus") opens it.
# Run after changing the vignette and commit the three files; tests/cross_language checks that the copy of the
# source in inst/doc is the vignette's source. Takes a few minutes (the vignette starts a cluster and a server).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup.sh"
export NEWRLLAMA_PYTHON="$ROOT/.venv/bin/python"
export R_LIBS="$ROOT/.Rlib"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$ROOT/r_package/vignettes/coding-a-corpus.Rmd" "$work/"
cd "$work"
Rscript -e 'out <- tools::buildVignette("coding-a-corpus.Rmd", tangle = TRUE, quiet = TRUE)
stopifnot(file.exists("coding-a-corpus.html"), file.exists("coding-a-corpus.R"))'
mkdir -p "$ROOT/r_package/inst/doc"
cp coding-a-corpus.Rmd coding-a-corpus.html coding-a-corpus.R "$ROOT/r_package/inst/doc/"
echo "r_package/inst/doc: $(ls "$ROOT/r_package/inst/doc" | tr '\n' ' ')"
