"""The R package's naming scheme is written down for every export (docs/from-r.md, "Names"), and the vignette that
R CMD INSTALL installs (r_package/inst/doc, built by scripts/build_vignette.sh) is built from the vignette's source."""
from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess

import pytest

import newrllama

from helpers.doc_pages import DOCS, ROOT

R_PACKAGE = ROOT / "r_package"


def exports() -> set:
    return set(re.findall(r"^export\(([^)]+)\)$", (R_PACKAGE / "NAMESPACE").read_text(), re.M))


def named_in_scheme() -> dict:
    page = (DOCS / "from-r.md").read_text()
    section = page.split("\n## Names\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| kind")]
    return {name: row.split("|")[1].strip() for row in rows for name in re.findall(r"`([a-z_0-9]+)`", row.split("|")[3])}


def test_every_r_export_has_its_place_in_the_written_naming_scheme():
    placed = named_in_scheme()
    assert exports() - set(placed) == set(), "exports missing from docs/from-r.md's Names table"
    assert set(placed) - exports() == set(), "names in docs/from-r.md's Names table that are not exported"


# What R calls a Python argument of the same function: R's data (x) stands for Python's texts or ids.
R_NAME = {"texts": "x", "ids": "x", "positions": "which", "paths": "path", "sheet": "path"}
SAME_ORDER = ("write_coding_sheet", "read_coding_sheet", "read_codings", "read_coding_design")


def r_formals(name: str) -> list:
    source = "\n".join(p.read_text() for p in sorted((R_PACKAGE / "R").glob("*.R")))
    head = re.search(rf"^{name} <- function\(([^)]*)\)", source, re.M).group(1)
    return [a.split("=")[0].strip() for a in head.split(",") if a.strip()]


@pytest.mark.parametrize("name", SAME_ORDER)
def test_a_function_of_both_languages_takes_its_arguments_in_one_order(name):
    python = [R_NAME.get(p, p) for p in inspect.signature(getattr(newrllama, name)).parameters]
    r = r_formals(name)
    assert python[:len(r)][:3] == r[:3], f"{name}: Python {python}, R {r}"


def test_the_llm_verbs_and_the_resource_verbs_follow_their_forms():
    placed = named_in_scheme()
    for name, kind in placed.items():
        if kind == "run the model over data":
            assert name.startswith("llm_"), name
        if kind.startswith("make, use or stop"):
            assert name.startswith(("model_", "context_", "cluster_", "newrllama_")) or name.endswith("_newrllama"), name


def test_the_installed_vignette_is_built_from_the_vignettes_source():
    built = R_PACKAGE / "inst" / "doc"
    source = (R_PACKAGE / "vignettes" / "coding-a-corpus.Rmd").read_text()
    assert (built / "coding-a-corpus.Rmd").read_text() == source, "run scripts/build_vignette.sh"
    html = (built / "coding-a-corpus.html").read_text()
    assert "Coding a corpus" in html and "llm_annotate" in html
    # every chunk ran when it was built: knitr writes no error output, and the outputs are there
    assert "## Error" not in html and "#&gt; Error" not in html
    assert (built / "coding-a-corpus.R").read_text().count("llm_annotate(") >= 1


@pytest.mark.skipif(shutil.which("Rscript") is None or not (ROOT / ".Rlib" / "newrllama").is_dir(),
                    reason="R and the R package in .Rlib (scripts/setup.sh installs both with R CMD INSTALL)")
def test_r_cmd_install_installs_the_vignette():
    done = subprocess.run(["Rscript", "-e", 'v <- vignette(package = "newrllama")$results; '
                           'cat(v[, "Item"], file.exists(file.path(v[, "LibPath"], "newrllama", "doc", '
                           'paste0(v[, "Item"], ".html"))))'],
                          env=dict(os.environ, R_LIBS=str(ROOT / ".Rlib")), capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["coding-a-corpus", "TRUE"], done.stderr
