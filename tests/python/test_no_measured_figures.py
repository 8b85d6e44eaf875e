"""No measured figure (a speed-up, a share of time, a rate, a timing, an agreement score) in the code's docstrings
and comments: figures live on the generated benchmarks page (docs/benchmarks.md, from bench/results/), and code
docs say why with a pointer to it. Parameters and constants (a 95% interval, 32 tokens, 64 x n_batch, 0x1f,
a default) are not measured figures and pass."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A ratio: "5x", "1.02x", "3×" (not hex such as 0x1f, nor "64 x n_batch" or "4x4", where a word follows).
RATIO = r"(?<![\w.])\d+(?:\.\d+)?[x×](?!\w)"
# "2 times faster", "1.5 times as fast".
TIMES_FASTER = r"\b\d+(?:\.\d+)?\s+times\s+(?:faster|slower|quicker|as\s+fast|as\s+slow)\b"
# A percentage, unless it is an interval's or a test's level ("95% interval", "90% confidence", "99% CI").
PERCENT = (r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|per\s?cent\b)"
           r"(?!\s+(?:[\w'-]+\s+){0,2}(?:intervals?|confidence|CIs?|credible|level|coverage)\b)")
# A range of percentages: "2-5%".
PERCENT_RANGE = r"(?<![\w.])\d+(?:\.\d+)?\s?[-–]\s?\d+(?:\.\d+)?\s?%"
# A rate: "100 tokens/s", "236.5 tok/s", "12 t/s", "40 tokens per second", "8.6 documents/s" (the unit alone, as
# in "generated tokens/s" naming a field, is no figure).
RATE = (r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s*(?:tok(?:en)?s?|t|docs?|documents?|prompts?|requests?|steps?)"
        r"\s?(?:/\s?s(?:ec)?\b|per\s+second\b)")
# A timing with decimals ("14.3 s", "0.6 s", "2.5 ms"), or in milli/microseconds ("3 ms").
SECONDS = (r"(?<![\w.])\d+\.\d+\s?(?:s|sec|secs|seconds?|min|minutes?|ms|µs|us|ns)\b"
           r"|(?<![\w.])\d+\s?(?:ms|µs|us|ns|milliseconds?|microseconds?)\b")
# An agreement or accuracy score: "kappa 0.89", "kappa of 0.59", "accuracy 0.95", "macro-F1 = 0.8".
SCORE = (r"\b(?:kappa|accuracy|macro-?F1|F1|AUC|Brier|ECE)\s*(?:(?:of|at|=|:|was|is|reached|gave|went\s+to)\s*)?"
         r"~?-?(?:[01]?\.\d+|[01]\b)")

PATTERNS = {name: re.compile(rx, re.IGNORECASE) for name, rx in [
    ("ratio", RATIO), ("times faster", TIMES_FASTER), ("percentage", PERCENT), ("percentage range", PERCENT_RANGE),
    ("rate", RATE), ("timing", SECONDS), ("score", SCORE)]}

Lines = Iterator[Tuple[int, str]]


def python_docs(text: str) -> Lines:
    """Comments (tokenize) and docstrings (ast: module, class, function), never other string literals."""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                # The docstring's lines as written (a line it shares with code is read whole).
                for number in range(first.value.lineno, first.value.end_lineno + 1):
                    yield number, lines[number - 1]


C_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.DOTALL)


def c_docs(text: str) -> Lines:
    """/* */ and // comments; string and character literals (format strings) are skipped."""
    for match in C_TOKENS.finditer(text):
        if match.group().startswith("/"):
            first = text.count("\n", 0, match.start()) + 1
            for offset, line in enumerate(match.group().splitlines()):
                yield first + offset, line


def hash_comment_lines(text: str) -> Lines:
    """R (roxygen #' included) and shell: the lines whose trimmed text starts with #."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            yield number, line


def rmd_prose(text: str) -> Lines:
    """An R Markdown file's prose: outside the YAML header and the code chunks (comments in chunks included)."""
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
    in_chunk = False
    for number, line in enumerate(lines[start:], start + 1):
        if line.lstrip().startswith("```"):
            in_chunk = not in_chunk
        elif not in_chunk or line.lstrip().startswith("#"):
            yield number, line


SOURCES: List[Tuple[str, Callable[[str], Lines]]] = [
    ("python_core/newrllama/**/*.py", python_docs),
    ("capi_shim/*.c", c_docs),
    ("capi_shim/*.h", c_docs),
    ("capi_shim/*.py", python_docs),
    ("r_package/R/*.R", hash_comment_lines),
    ("r_package/vignettes/*.Rmd", rmd_prose),
    ("scripts/*.py", python_docs),
    ("scripts/*.sh", hash_comment_lines),
    ("scripts/*.R", hash_comment_lines),
]


def figures_in(text: str, docs: Callable[[str], Lines]) -> List[Tuple[int, str, str]]:
    return [(number, name, line.strip()) for number, line in docs(text)
            for name, pattern in PATTERNS.items() if pattern.search(line)]


def test_no_measured_figure_in_docstrings_or_comments():
    found = []
    for glob, docs in SOURCES:
        for path in sorted(ROOT.glob(glob)):
            for number, name, line in figures_in(path.read_text(encoding="utf-8"), docs):
                found.append(f"{path.relative_to(ROOT)}:{number}: {name}: {line}")
    assert not found, ("measured figures in code docs; say why and point to the benchmarks page "
                       "(docs/benchmarks.md, bench/results/) instead:\n" + "\n".join(found))


@pytest.mark.parametrize("line", [
    "# this made it 7% faster", "# 5x faster than on lists", "# took ~7% of all CPU time", "# runs ~25% slower",
    "# 2-5% slower", "# 1.02x the speed", "# gave kappa 0.89", "# kappa of 0.59", "# accuracy 0.95",
    "# took 14.3 s", "# 100 tokens/s", "# about 3 ms per row", "# 2 times faster", "# 1.5× faster",
])
def test_figures_are_caught(line):
    assert figures_in(line, hash_comment_lines), line


@pytest.mark.parametrize("line", [
    "# a 95% interval", "# Wilson's 95% score interval", "# 90% confidence", "# 99% CI", "# 32 tokens",
    "# n_batch 512", "# 8 tokens or more", "# between n_batch / 8 and 64 x n_batch", "# mask 0x1f",
    "# texts x labels", "# at most 1.5 times the work", "# version 1.28", "# a 4x4 grid", "# SHA-256",
])
def test_parameters_pass(line):
    assert not figures_in(line, hash_comment_lines), line


def test_docs_are_read_from_comments_and_docstrings_only():
    python = 'x = "%d%% done, 5x faster"  # a plain comment\ndef f():\n    """runs 1.5x faster"""\n'
    assert [(n, name) for n, name, _ in figures_in(python, python_docs)] == [(3, "ratio")]
    c = 'printf("%.1f%% 5x\\n", x); /* 2.5 ms\n * per row */ // 10% here\n'
    assert sorted((n, name) for n, name, _ in figures_in(c, c_docs)) == [(1, "timing"), (2, "percentage")]
    rmd = "---\ntitle: 7% faster\n---\nProse 3x faster.\n```{r}\nsprintf('%.0f%%', 50)\n# 4.2 s\n```\n"
    assert sorted((n, name) for n, name, _ in figures_in(rmd, rmd_prose)) == [(4, "ratio"), (7, "timing")]
