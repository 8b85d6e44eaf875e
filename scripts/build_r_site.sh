#!/usr/bin/env bash
# Builds the R side of the documentation site with pkgdown (r_package/_pkgdown.yml) into docs/r/ at the
# repository root (generated, not committed; scripts/build_docs.sh then builds the rest with MkDocs).
# It fails (nonzero exit) when:
#   - a topic of r_package/man/ or a vignette is missing from the index of _pkgdown.yml (check_pkgdown()),
#   - a chunk of a vignette errors: the vignette is knitted on the real model, and every chunk must run
#     (the Python side, tm, httr2, processx and ray are checked first, since the vignette skips its
#     chunks without them),
#   - an example of the reference errors (they run on the real model too; NEWRLLAMA_SITE_EXAMPLES=false
#     skips them for a quicker build, R CMD check in scripts/test.sh runs them in any case),
#   - a relative link in the built pages points to no file in docs/r/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT="$ROOT/docs/r"
EXAMPLES="${NEWRLLAMA_SITE_EXAMPLES:-true}"

say() { printf '[build_r_site] %s\n' "$*" >&2; }

# The venv, the embedded model, the R package in .Rlib, pkgdown and tm (the vignette's texts), up to date
# (seconds when they are).
bash "$ROOT/scripts/setup.sh"

export NEWRLLAMA_PYTHON="$ROOT/.venv/bin/python"
export R_LIBS="$ROOT/.Rlib"
cd "$ROOT/r_package"

# Every chunk of the vignette must run: its `eval` conditions must all hold here.
Rscript -e '
missing <- c(
  "the newrllama Python package (newrllama_available())" = !newrllama::newrllama_available(),
  "the R package tm" = !requireNamespace("tm", quietly = TRUE),
  "the R package httr2" = !requireNamespace("httr2", quietly = TRUE),
  "the R package processx" = !requireNamespace("processx", quietly = TRUE),
  "the Python module ray" = !reticulate::py_module_available("ray"))
if (any(missing)) {
  message("the vignette would skip chunks without: ", paste(names(missing)[missing], collapse = ", "))
  quit(status = 1)
}'

rm -rf "$OUT"
# The vignette's knitted pages are kept per state of the library and the vignette (tests/python/helpers/doc_runs.py):
# when neither changed since a build that succeeded, they are put back and pkgdown's lazy build leaves them be.
DOC_RUNS="$ROOT/.venv/bin/python $ROOT/tests/python/helpers/doc_runs.py"
vignette_key=$($DOC_RUNS key vignette r_package/vignettes/coding-a-corpus.Rmd r_package/_pkgdown.yml)
vignette_dir=$($DOC_RUNS dir "$vignette_key")
# pkgdown.yml goes with them: pkgdown refuses to build into a folder that holds files without it.
restored=false
if $DOC_RUNS ran "$vignette_key" && [ -f "$vignette_dir/pkgdown.yml" ]; then
    say "the vignette succeeded on this code and library before: its pages come from $vignette_dir"
    mkdir -p "$OUT"
    cp -r "$vignette_dir/articles" "$OUT/articles"
    cp "$vignette_dir/pkgdown.yml" "$OUT/pkgdown.yml"
    restored=true
fi
say "building the pkgdown site into $OUT (examples: $EXAMPLES)"
EXAMPLES="$EXAMPLES" Rscript -e '
options(pkgdown.internet = FALSE)  # no look-up of the package on CRAN: the build works offline
pkgdown::check_pkgdown(".")        # every topic and vignette in the index, or an error
pkgdown::build_site(".", examples = identical(Sys.getenv("EXAMPLES"), "true"), lazy = TRUE,
                    new_process = FALSE, install = FALSE, preview = FALSE)
'
if ! $restored; then
    rm -rf "$vignette_dir"
    mkdir -p "$vignette_dir"
    cp -r "$OUT/articles" "$vignette_dir/articles"
    cp "$OUT/pkgdown.yml" "$vignette_dir/pkgdown.yml"
    $DOC_RUNS remember "$vignette_key"
fi

if [ "$EXAMPLES" = true ]; then
    # pkgdown shows an example that errors as output; an error must fail the build instead.
    if grep -lE "class=[\"']r-err" "$OUT"/reference/*.html; then
        say "the examples of the reference pages above raised an error"
        exit 1
    fi
fi

# Every relative link and resource of the built pages must point to a file of the site; a link that leaves
# docs/r/ (the main site) is checked by MkDocs' side, which builds docs/ around it.
"$ROOT/.venv/bin/python" - "$OUT" <<'EOF'
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

site = Path(sys.argv[1]).resolve()


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        self.links += [value for name, value in attrs if name in ("href", "src") and value]


broken = []
for page in sorted(site.rglob("*.html")):
    parser = Links()
    parser.feed(page.read_text(encoding="utf-8"))
    for link in parser.links:
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or not parts.path:
            continue  # external, mailto:, data:, or an anchor on the same page
        target = (page.parent / unquote(parts.path)).resolve()
        if site not in target.parents and target != site:
            continue
        if target.is_dir():
            target = target / "index.html"
        if not target.exists():
            broken.append(f"{page.relative_to(site)}: {link}")
if broken:
    sys.exit("broken links in the R site:\n" + "\n".join(broken))
EOF
say "done: $OUT/index.html"
