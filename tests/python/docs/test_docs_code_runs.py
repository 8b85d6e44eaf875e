"""The code in the README and the documentation pages runs: each page's Python blocks in one fresh interpreter,
its R blocks in one Rscript, in an empty folder, on the real model (the R vignette runs when pkgdown builds it).
A page's code that succeeded is not run again until it or the library changes (helpers/doc_runs.py): it is then
reported as skipped, saying so."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import doc_runs
from helpers.doc_pages import ROOT, doc_pages

FENCE = re.compile(r"^```(python|r)\n(.*?)^```$", re.S | re.M)


def blocks(page: Path, language: str) -> str:
    return "\n".join(code for lang, code in FENCE.findall(page.read_text()) if lang == language)


def runs(language: str):
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in doc_pages() if blocks(p, language)]


def _run(command, page: Path, language: str, cwd: Path, env: dict) -> None:
    run_key = doc_runs.key(f"page code {language}", blocks(page, language))
    if doc_runs.ran(run_key):
        pytest.skip(f"succeeded on this code and library before ({doc_runs.folder(run_key)})")
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"the code of {page.relative_to(ROOT)} failed:\n{done.stderr[-3000:]}"
    doc_runs.remember(run_key)


def test_the_fence_reader_finds_the_readme_quick_starts():
    assert "newrllama.annotate(" in blocks(ROOT / "README.md", "python")
    assert "llm_annotate(" in blocks(ROOT / "README.md", "r")


@pytest.mark.slow
@pytest.mark.parametrize("page", runs("python"))
def test_python_code_of_the_page_runs(page: Path, tmp_path: Path):
    script = tmp_path / "page.py"
    script.write_text(blocks(page, "python"))
    _run([sys.executable, str(script)], page, "python", tmp_path, dict(os.environ))


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("Rscript") is None or not (ROOT / ".Rlib" / "newrllama").is_dir(),
                    reason="R and the R package in .Rlib (scripts/setup.sh installs both)")
@pytest.mark.parametrize("page", runs("r"))
def test_r_code_of_the_page_runs(page: Path, tmp_path: Path):
    script = tmp_path / "page.R"
    script.write_text("options(warn = 1)\n" + blocks(page, "r"))
    env = dict(os.environ, R_LIBS=str(ROOT / ".Rlib"), NEWRLLAMA_PYTHON=sys.executable)
    _run(["Rscript", str(script)], page, "r", tmp_path, env)
