"""Writes the annotation options' arguments and documentation, from their one table
(python_core/newrllama/labels/annotation_options.py), into the marked regions of the functions that take them, in
Python and R, and writes R's documentation topic of them (r_package/R/annotation_options.R).

    .venv/bin/python scripts/write_annotation_options.py          # write every region
    .venv/bin/python scripts/write_annotation_options.py --check  # exit 1 and name the regions out of date

A region is the lines between a start marker (``# <annotation options>``, or ``# <annotation task options>`` for
the task's alone) and its end marker (``# </annotation options>``), indented as the start marker; Python docstrings hold theirs from the line
``Options (the table in labels/annotation_options.py):`` to the closing quotes. Run it after a change to the table,
then ``roxygen2::roxygenise()`` in r_package/.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python_core"))

from newrllama.labels.annotation_options import ANNOTATION_OPTIONS, AnnotationOption  # noqa: E402

# Each region's marker name, and whose options it holds: "task" alone, or "task" and "recording".
REGIONS = {"annotation options": ("task", "recording"), "annotation task options": ("task",)}
DOC_START = "Options (the table in labels/annotation_options.py):"
WIDTH = 120
R_TOPIC = ROOT / "r_package" / "R" / "annotation_options.R"

# The files with regions (R's hold only the options R takes).
PYTHON_SIGNATURES = ("python_core/newrllama/labels/annotate.py", "python_core/newrllama/cluster/cluster.py")
PYTHON_DOCSTRINGS = ("python_core/newrllama/labels/annotate.py",)
R_FORMALS = ("r_package/R/annotate.R", "r_package/R/annotation_plan.R")


def python_literal(value) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def chosen(owners, r: bool = False) -> List[AnnotationOption]:
    return [o for o in ANNOTATION_OPTIONS if o.owner in owners and (o.in_r or not r)]


def python_signature(owners, indent: str) -> List[str]:
    return [f"{indent}{o.name}: {o.py_type} = {python_literal(o.default)}," for o in chosen(owners)]


def python_doc(indent: str) -> List[str]:
    lines = [indent + DOC_START]
    for o in ANNOTATION_OPTIONS:
        lines += textwrap.wrap(f"``{o.name}`` (default {python_literal(o.default)}): {o.doc}", WIDTH, initial_indent=indent + "- ",
                               subsequent_indent=indent + "  ")
    return lines


def r_formals(owners, indent: str) -> List[str]:
    text = ", ".join(f"{o.name} = {o.r_default}" for o in chosen(owners, r=True))
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent, break_long_words=False)


def r_topic() -> str:
    r_options = chosen(("task", "recording"), r=True)
    lines = ["# Written by scripts/write_annotation_options.py from python_core/newrllama/labels/annotation_options.py:",
             "# do not edit.", "",
             "#' Options of an annotation",
             "#'",
             "#' The options [llm_annotate()], [llm_vec_annotate()], [annotation_task()] and [plan_annotation()] take",
             "#' (the last two, those of the task alone), written once for R and Python.",
             "#'"]
    for o in r_options:
        lines += textwrap.wrap(f"@param {o.name} {o.r_doc}", WIDTH - 3, initial_indent="#' ",
                               subsequent_indent="#'   ", break_long_words=False, break_on_hyphens=False)
    lines += ["#' @name annotation_options", "#' @keywords internal", "NULL", "",
              "# The options of the task, which task_of_call() hands to Python, and how it converts each.",
              "annotation_task_options <- c(" + ", ".join(f'"{o.name}"' for o in r_options if o.owner == "task") + ")",
              "annotation_option_converters <- c("]
    task = [o for o in r_options if o.owner == "task"]
    lines += [f'  {o.name} = "{o.r_convert}"' + ("," if k < len(task) - 1 else "") for k, o in enumerate(task)]
    return "\n".join(lines + [")", ""])


def replace_regions(text: str, render, path: str) -> str:
    """text with each marked region rendered again (render: the start marker's indentation and the region's owners
    -> the region's lines)."""
    lines, out, k = text.split("\n"), [], 0
    while k < len(lines):
        out.append(lines[k])
        marker = lines[k].strip()
        name = marker[3:-1] if marker.startswith("# <") and marker.endswith(">") else None
        if name in REGIONS:
            indent = lines[k][:len(lines[k]) - len(lines[k].lstrip())]
            end = next((j for j in range(k + 1, len(lines)) if lines[j].strip() == f"# </{name}>"), None)
            if end is None:
                raise SystemExit(f"{path}: the region {name!r} opened at line {k + 1} is not closed")
            out += render(indent, REGIONS[name])
            k = end
            continue
        k += 1
    return "\n".join(out)


def replace_docstring(text: str) -> str:
    pattern = re.compile(r"^( *)" + re.escape(DOC_START) + r"\n.*?(?=^ *\"\"\")", re.MULTILINE | re.DOTALL)
    return pattern.sub(lambda m: "\n".join(python_doc(m.group(1))) + "\n", text)


def written() -> Dict[Path, str]:
    """Every file with regions, as the table writes it."""
    files: Dict[Path, str] = {}
    for path in PYTHON_SIGNATURES:
        files[ROOT / path] = replace_regions((ROOT / path).read_text(), lambda i, o: python_signature(o, i), path)
    for path in PYTHON_DOCSTRINGS:
        files[ROOT / path] = replace_docstring(files[ROOT / path])
    for path in R_FORMALS:
        files[ROOT / path] = replace_regions((ROOT / path).read_text(), lambda i, o: r_formals(o, i), path)
    files[R_TOPIC] = r_topic()
    return files


def out_of_date() -> List[str]:
    return [str(p.relative_to(ROOT)) for p, text in written().items() if not p.exists() or p.read_text() != text]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only name the files whose regions are out of date")
    if parser.parse_args().check:
        stale = out_of_date()
        print("\n".join(stale) or "every region is current")
        return 1 if stale else 0
    for path, text in written().items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
