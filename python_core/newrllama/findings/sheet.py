"""Coding sheets: the texts to code by hand as CSV (id, text, an empty code column; with several coders a coder
column too; the design they were drawn by beside them, sheet_design.py), and the codes read back: one coder's as
one code per text, several coders' as Codings."""
from __future__ import annotations

import csv
import os
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..errors import InvalidArgumentError, NewrllamaDeprecationWarning
from .coders import Codings
from .design import CodingDesign
from .sheet_design import design_path, read_coding_design, write_coding_design

COLUMNS = ("id", "text", "code")
CODER_COLUMNS = ("id", "coder", "text", "code")


class SheetCodes(list):
    """The codes of a sheet, one per text (None where not coded), with ``design``: the design written beside
    the sheet, or None. The estimates take it when they are given no design of their own."""

    def __init__(self, codes: Sequence[Optional[str]], design: Optional[CodingDesign]) -> None:
        super().__init__(codes)
        self.design = design


def write_coding_sheet(texts: Sequence[str], positions: Sequence[int], path: Union[str, os.PathLike],
                       ids: Optional[Sequence[Any]] = None, coders: Optional[Sequence[str]] = None,
                       design: Optional[CodingDesign] = None) -> Path:
    """Writes the texts at ``positions`` (e.g. ``CodingPlan.texts``) to the CSV sheet ``path`` with an empty ``code``
    column (the arguments in R's order; the earlier order, path first, still works with a
    NewrllamaDeprecationWarning),
    each under its id (``ids``, one per text; else its position). With ``coders`` (their names), every text goes
    to each coder, coder by coder, in a ``coder`` column (one call per coder, ``coders=[name]``, gives each coder
    a sheet of their own, so that none sees another's codes); read_codings() reads them back. ``design`` (how the
    positions were drawn, e.g. ``CodingPlan.design``) is written beside the sheet (``<sheet>.design.json``), and
    read_coding_sheet() passes it on to the estimates with the codes; positions from least_confident() are
    recorded as picked without it."""
    if isinstance(texts, (str, os.PathLike)):  # the earlier order: (path, texts, positions)
        warnings.warn("write_coding_sheet() takes (texts, positions, path), as R's does: the path goes last",
                      NewrllamaDeprecationWarning, stacklevel=2)
        texts, positions, path = positions, path, texts  # type: ignore[assignment]
    if ids is not None and len(ids) != len(texts):
        raise InvalidArgumentError(f"ids has {len(ids)} entries for {len(texts)} texts")
    bad = [p for p in positions if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < len(texts)]
    if bad:
        raise InvalidArgumentError(f"positions {bad[:5]} are not positions of the {len(texts)} texts")
    names = None
    if coders is not None:
        names = None if isinstance(coders, str) else list(coders)
        if not names or any(not isinstance(c, str) or not c.strip() for c in names) or len(set(names)) != len(names):
            raise InvalidArgumentError("coders must be a list of distinct non-blank names")
    how = getattr(positions, "how", None)  # least_confident()'s positions say how they were picked
    if design is None and how is not None:
        design = CodingDesign.picked(how)
    if design is not None:
        write_coding_design(path, design, ids if ids is not None else range(len(texts)))
    rows = [[p if ids is None else ids[p], texts[p], ""] for p in positions]
    if names is None:
        return _write(Path(path), COLUMNS, rows)
    return _write(Path(path), CODER_COLUMNS, [[r[0], c, r[1], r[2]] for c in names for r in rows])


def _write(path: Path, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> Path:
    try:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(header)
            writer.writerows(rows)
    except OSError as exc:
        raise InvalidArgumentError(f"cannot write the coding sheet {path}: {exc.strerror}") from None
    return path


def read_coding_sheet(path: Union[str, os.PathLike], ids: Sequence[Any], labels: Sequence[str]) -> SheetCodes:
    """The codes of a filled-in sheet, one per text of ``ids`` (the ids of every text, as the sheet names them;
    None where the sheet has no code), with the design written beside the sheet (``.design``; None where there
    is none), which prevalence(), regression() and methods_text() take when given no design. Refuses codes that
    are not labels, ids it does not know and ids twice; a sheet of several coders (a ``coder`` column) is read by
    read_codings(). The arguments come in R's order; the earlier (path, labels, ids) still works, told apart by
    the sheet's ids, with a NewrllamaDeprecationWarning."""
    header, rows = _read(path)
    ids, labels = _ids_then_labels([rows], ids, labels, "read_coding_sheet")
    if "coder" in header:
        raise InvalidArgumentError(f"the coding sheet {path} has a coder column: read several coders' codes with "
                                   "read_codings()")
    codes = _codes(path, rows, labels, _known(ids))
    return SheetCodes(codes, read_coding_design(path, ids) if design_path(path).exists() else None)


def read_codings(paths: Union[str, os.PathLike, Sequence[Union[str, os.PathLike]]], ids: Sequence[Any],
                 labels: Sequence[str]) -> Codings:
    """Several coders' codes of the texts of ``ids``: sheets with a ``coder`` column, or one sheet per coder
    without it (the coder then named by the file's name). Each coder's codes are checked as read_coding_sheet()
    checks them (and its arguments' order, R's, is told apart from the earlier one as there); a coder found in two
    sheets, or an id twice for one coder, is refused."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not paths:
        raise InvalidArgumentError("read_codings() needs at least one sheet")
    ids, labels = _ids_then_labels([_read(p)[1] for p in paths], ids, labels, "read_codings")
    known = _known(ids)
    by_coder: Dict[str, List[Optional[str]]] = {}
    for path in paths:
        header, rows = _read(path)
        groups: Dict[str, List[Tuple[int, dict]]] = {}
        for line, row in enumerate(rows, start=2):
            coder = (row.get("coder") or "").strip() if "coder" in header else Path(path).stem
            if not coder:
                raise InvalidArgumentError(f"the coding sheet {path} line {line} names no coder")
            groups.setdefault(coder, []).append((line, row))
        for coder, lines in groups.items():
            if coder in by_coder:
                raise InvalidArgumentError(f"coder {coder!r} appears in two sheets ({path} is the second)")
            by_coder[coder] = _codes(path, [row for _, row in lines], labels, known, [line for line, _ in lines])
    names = sorted(by_coder)
    return Codings(tuple(labels), tuple(names), tuple(tuple(by_coder[c]) for c in names))


def _ids_then_labels(sheets: Sequence[Sequence[dict]], ids: Sequence[Any], labels: Sequence[str], name: str
                     ) -> Tuple[Sequence[Any], Sequence[str]]:
    """(ids, labels) as given, or swapped with a NewrllamaDeprecationWarning where the call used the earlier order
    (labels before ids): told by which of the two holds every id the sheets name (with no id in them, by which holds
    a text's id that is not a string)."""
    named = {str(row.get("id", "")).strip() for rows in sheets for row in rows}
    if named:
        earlier = not named <= {str(i) for i in ids} and named <= {str(i) for i in labels}
    else:
        earlier = all(isinstance(x, str) for x in ids) and any(not isinstance(x, str) for x in labels)
    if not earlier:
        return ids, labels
    warnings.warn(f"{name}() takes (path, ids, labels), as R's does: the ids before the labels",
                  NewrllamaDeprecationWarning, stacklevel=3)
    return labels, ids


def _known(ids: Sequence[Any]) -> Dict[str, int]:
    known = {str(i): k for k, i in enumerate(ids)}
    if len(known) != len(ids):
        raise InvalidArgumentError("ids must name each text once")
    return known


def _read(path: Union[str, os.PathLike]) -> Tuple[List[str], List[dict]]:
    try:
        with Path(path).open(newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            header = list(reader.fieldnames or [])
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read the coding sheet {path}: {exc.strerror}") from None
    if rows and not {"id", "code"} <= set(header):
        raise InvalidArgumentError(f"the coding sheet {path} needs the columns id and code, it has {header}")
    return header, rows


def _codes(path: Union[str, os.PathLike], rows: Sequence[dict], labels: Sequence[str], known: Dict[str, int],
           lines: Optional[Sequence[int]] = None) -> List[Optional[str]]:
    """One code per text from rows of one coder, every problem listed at once."""
    codes: List[Optional[str]] = [None] * len(known)
    seen = set()
    problems = []
    for n, row in enumerate(rows):
        line = lines[n] if lines is not None else n + 2
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
