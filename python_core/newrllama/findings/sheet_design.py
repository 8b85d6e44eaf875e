"""The design a coding sheet's texts were drawn by, kept in a JSON file beside the sheet (``<sheet>.design.json``),
so that the codes read back go into the estimates with the design they were drawn under, not an assumed simple
random sample. Per-text values (strata, inclusion probabilities) are stored by the texts' ids, so that reading
them for the texts in another order gives each text its own."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Sequence, Union

from ..errors import InvalidArgumentError
from .design import CodingDesign

FORMAT = 1
_SCALARS = (str, int, float, bool)


def design_path(sheet: Union[str, os.PathLike]) -> Path:
    """Where the design of the sheet at ``sheet`` (CSV or xlsx) is kept."""
    return Path(sheet).with_suffix(".design.json")


def write_coding_design(sheet: Union[str, os.PathLike], design: CodingDesign, ids: Sequence[Any]) -> Path:
    """Writes ``design`` beside the sheet; ``ids`` name every text the design covers, in its order (the ids the
    sheet uses)."""
    if not isinstance(design, CodingDesign):
        raise InvalidArgumentError(f"design must be a CodingDesign, got {type(design).__name__}")
    keys = [str(i) for i in ids]
    if len(set(keys)) != len(keys):
        raise InvalidArgumentError("ids must name each text once")
    for name in ("strata", "inclusion_probs"):
        values = getattr(design, name)
        if values is not None and len(values) != len(keys):
            raise InvalidArgumentError(f"the design has {len(values)} {name} for {len(keys)} texts")
    if design.strata is not None and not all(isinstance(s, _SCALARS) for s in design.strata):
        raise InvalidArgumentError("a design written beside a sheet needs strata that are strings or numbers")
    record = {"newrllama_coding_design": FORMAT, "kind": design.kind, "finite": design.finite, "how": design.how,
              "ids": keys,
              "strata": list(design.strata) if design.strata is not None else None,
              "inclusion_probs": list(design.inclusion_probs) if design.inclusion_probs is not None else None}
    path = design_path(sheet)
    try:
        path.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
    except OSError as exc:
        raise InvalidArgumentError(f"cannot write the coding design {path}: {exc.strerror}") from None
    return path


def read_coding_design(sheet: Union[str, os.PathLike], ids: Sequence[Any]) -> CodingDesign:
    """The design kept beside the sheet, for the texts of ``ids`` (every text the design covers, in any order)."""
    path = design_path(sheet)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgumentError(f"no coding design beside the sheet {sheet} (expected {path}): write the sheet "
                                   "with its design (write_coding_sheet(..., design=)) or give the design") from None
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError(f"cannot read the coding design {path}: {exc}") from None
    if not isinstance(record, dict) or record.get("newrllama_coding_design") != FORMAT:
        raise InvalidArgumentError(f"{path} is not a coding design newrllama wrote")
    stored: List[str] = record["ids"]
    keys = [str(i) for i in ids]
    if sorted(keys) != sorted(stored):
        missing, extra = set(stored) - set(keys), set(keys) - set(stored)
        raise InvalidArgumentError(f"the coding design {path} covers other texts than ids: "
                                   f"{len(missing)} of its ids are not given, {len(extra)} given ids are not in it")
    at: Dict[str, int] = {k: n for n, k in enumerate(stored)}
    order = [at[k] for k in keys]
    kind = record["kind"]
    if kind == "stratified":
        return CodingDesign.stratified([record["strata"][n] for n in order], finite=record["finite"])
    if kind == "probabilities":
        return CodingDesign.probabilities([record["inclusion_probs"][n] for n in order])
    if kind == "picked":
        return CodingDesign.picked(record["how"])
    return CodingDesign(kind, finite=record["finite"])

