"""Every call written in the README's and the pages' inline code names arguments the function has: a Python
public function or class (``newrllama.annotate(texts, labels, too_long="error")``) or an R export
(``llm_annotate(.data, col, too_long = NULL)``), so a renamed or removed argument fails here, not on a reader."""
from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

import newrllama
from helpers.doc_pages import ROOT, doc_pages

SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
CALL = re.compile(r"^(?:newrllama\.)?([A-Za-z_][A-Za-z0-9_.]*)\((.*)\)$", re.S)
KEYWORD = re.compile(r"^\s*([A-Za-z_.][A-Za-z0-9_.]*)\s*=(?!=)")


class Signature:
    """The argument names a function takes, and whether it takes any other (``**kwargs``, R's ``...``)."""

    def __init__(self, names: List[str], open_ended: bool, positional: Optional[int]) -> None:
        self.names, self.open_ended, self.positional = names, open_ended, positional

    def problems(self, args: List[str]) -> List[str]:
        out = []
        given = [a.strip() for a in args if a.strip() and a.strip() not in ("...", "*", "**kwargs", "*args")]
        keywords = [m.group(1) for m in (KEYWORD.match(a) for a in given) if m]
        for name in keywords:
            if name not in self.names and not self.open_ended:
                out.append(f"no argument {name!r}")
        n_positional = sum(1 for a in given if not KEYWORD.match(a) and not a.startswith("*"))
        if self.positional is not None and n_positional > self.positional:
            out.append(f"{n_positional} positional arguments, at most {self.positional}")
        return out


def split_arguments(text: str) -> List[str]:
    """The top-level comma-separated arguments of a call's text (brackets and quotes respected)."""
    out, depth, quote, current = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(current)
            current = ""
            continue
        current += ch
    return out + [current] if current.strip() else out


def calls(page: Path) -> List[Tuple[str, List[str], str]]:
    """(function, arguments, the span) of each inline span of the page that is one call."""
    out = []
    for span in SPAN.findall(page.read_text()):
        span = " ".join(span.split())
        m = CALL.match(span)
        if m and _balanced(m.group(2)):
            out.append((m.group(1), split_arguments(m.group(2)), span))
    return out


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def python_signatures() -> Dict[str, Signature]:
    out = {}
    for name in newrllama.__all__:
        obj = getattr(newrllama, name)
        if not callable(obj):
            continue
        try:
            params = list(inspect.signature(obj).parameters.values())
        except (TypeError, ValueError):
            continue
        positional = None if any(p.kind is p.VAR_POSITIONAL for p in params) else sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        out[name] = Signature([p.name for p in params], any(p.kind is p.VAR_KEYWORD for p in params), positional)
    return out


R_LIB = ROOT / ".Rlib"
R_DUMP = """
ns <- asNamespace("newrllama")
for (f in getNamespaceExports("newrllama")) {
  fn <- get(f, envir = ns)
  if (is.function(fn)) cat(f, "\\t", paste(names(formals(fn)), collapse = ","), "\\n", sep = "")
}
"""


def r_signatures() -> Dict[str, Signature]:
    env = dict(os.environ, R_LIBS=str(R_LIB), NEWRLLAMA_PYTHON=sys.executable)
    done = subprocess.run(["Rscript", "-e", "suppressPackageStartupMessages(library(newrllama))", "-e", R_DUMP],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = {}
    for line in done.stdout.splitlines():
        name, _, args = line.partition("\t")
        names = [a for a in args.split(",") if a]
        # R matches any argument by name or position, so the count bounds the positional ones, unless `...`.
        out[name] = Signature(names, "..." in names, None if "..." in names else len(names))
    return out


def wrong_calls(signatures: Dict[str, Signature], other: Dict[str, Signature]) -> List[str]:
    """What is wrong with each call of a function in ``signatures``; a call that ``other`` (the other language's
    signatures) takes as written passes, since a name both languages export may be written for either."""
    wrong = []
    for page in doc_pages():
        for name, args, span in calls(page):
            problems = signatures[name].problems(args) if name in signatures else []
            if problems and (name not in other or other[name].problems(args)):
                wrong.append(f"{page.relative_to(ROOT)}: `{span}`: {'; '.join(problems)}")
    return wrong


def test_the_call_reader_reads_calls_and_the_check_catches_a_wrong_argument():
    assert split_arguments('texts, labels, instruction="a, b", *, context=None') == [
        "texts", " labels", ' instruction="a, b"', " *", " context=None"]
    sig = Signature(["texts", "labels", "too_long"], False, 3)
    assert sig.problems(["texts", "labels", "too_long='error'"]) == []
    assert sig.problems(["texts", "labels", "too_lng='error'"]) == ["no argument 'too_lng'"]
    assert sig.problems(["a", "b", "c", "d"]) == ["4 positional arguments, at most 3"]


def test_python_calls_in_the_docs_name_real_arguments():
    python = python_signatures()
    r_exports = set(re.findall(r"^export\(([^)]+)\)$", (ROOT / "r_package" / "NAMESPACE").read_text(), re.M))
    # A name R exports too is checked with R's signature beside (below), where R runs.
    assert not (wrong := wrong_calls({n: s for n, s in python.items() if n not in r_exports}, {})), "\n".join(wrong)
    assert any(name == "annotate" for page in doc_pages() for name, _, _ in calls(page))


@pytest.mark.skipif(shutil.which("Rscript") is None or not R_LIB.joinpath("newrllama").is_dir(),
                    reason="R and the R package in .Rlib (scripts/setup.sh installs both)")
def test_r_calls_in_the_docs_name_real_arguments():
    r, python = r_signatures(), python_signatures()
    assert not (wrong := wrong_calls(r, python)), "\n".join(wrong)
    assert any(name == "llm_annotate" for page in doc_pages() for name, _, _ in calls(page))
