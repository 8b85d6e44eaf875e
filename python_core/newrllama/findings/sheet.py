"""Coding sheets: the texts to code by hand as CSV (id, text, an empty code column), and the codes read back."""
from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any, List, Optional, Sequence, Union

from ..errors import InvalidArgumentError

COLUMNS = ("id", "text", "code")


def write_coding_sheet(path: Union[str, os.PathLike], texts: Sequence[str], positions: Sequence[int],
                       ids: Optional[Sequence[Any]] = None) -> Path:
    """Writes the texts at ``positions`` (e.g. ``CodingPlan.texts``) to a CSV sheet with an empty ``code`` column,
    each under its id (``ids``, one per text; else its position)."""
    if ids is not None and len(ids) != len(texts):
        raise InvalidArgumentError(f"ids has {len(ids)} entries for {len(texts)} texts")
    bad = [p for p in positions if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < len(texts)]
    if bad:
        raise InvalidArgumentError(f"positions {bad[:5]} are not positions of the {len(texts)} texts")
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(COLUMNS)
        for p in positions:
            writer.writerow([p if ids is None else ids[p], texts[p], ""])
    return path


def read_coding_sheet(path: Union[str, os.PathLike], labels: Sequence[str],
                      ids: Sequence[Any]) -> List[Optional[str]]:
    """The codes of a filled-in sheet, one per text of ``ids`` (the ids of every text, as the sheet names them;
    None where the sheet has no code). Refuses codes that are not labels, ids it does not know and ids twice."""
    known = {str(i): k for k, i in enumerate(ids)}
    if len(known) != len(ids):
        raise InvalidArgumentError("ids must name each text once")
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
            header = rows and list(rows[0]) or []
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the coding sheet {path}: {exc.strerror}") from None
    if rows and not {"id", "code"} <= set(header):
        raise InvalidArgumentError(f"the coding sheet {path} needs the columns id and code, it has {header}")
    codes: List[Optional[str]] = [None] * len(ids)
    seen = set()
    problems = []
    for line, row in enumerate(rows, start=2):
        key, code = (row.get("id") or "").strip(), (row.get("code") or "").strip()
        if key not in known:
            problems.append(f"line {line}: id {key!r} is not one of the texts")
        elif key in seen:
            problems.append(f"line {line}: id {key!r} a second time")
        elif code and code not in labels:
            problems.append(f"line {line}: code {code!r} is not one of the labels {list(labels)}")
        else:
            seen.add(key)
            codes[known[key]] = code or None
    if problems:
        raise InvalidArgumentError(f"the coding sheet {path} has {len(problems)} problem(s): " + "; ".join(problems[:10]))
    return codes
