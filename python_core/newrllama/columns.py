"""A column of the caller's data as a Python list: a list or tuple, or a pandas or polars Series, or a
one-dimensional NumPy array, without importing any of those libraries. A missing value (pandas' NaN, None or NA;
polars' null) becomes None, which every function here reads as missing."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, List

from .errors import InvalidArgumentError


def column_values(values: object, name: str, what: str) -> List[Any]:
    """``values`` as a list; ``name`` and ``what`` ("str", "labels" ...) word the error for anything else."""
    if isinstance(values, (str, bytes)):
        raise InvalidArgumentError(f"{name} must be a list of {what}, not a single string")
    if isinstance(values, Sequence):
        return list(values)
    if hasattr(values, "columns"):
        raise InvalidArgumentError(f"{name} is a data frame: pass one of its columns (df[\"text\"]), not the whole "
                                   "frame")
    if getattr(values, "ndim", 1) != 1:
        raise InvalidArgumentError(f"{name} must be one-dimensional, got an array of shape {values.shape}")
    notna = getattr(values, "notna", None)
    if callable(notna):  # pandas: NaN and NA to None, numpy scalars to Python's
        return [None if not present else v for v, present in zip(values.astype(object).tolist(), notna().tolist())]
    for method in ("to_list", "tolist"):  # polars (nulls already None), numpy
        convert = getattr(values, method, None)
        if callable(convert):
            out = convert()
            if isinstance(out, list):
                return out
    raise InvalidArgumentError(f"{name} must be a list of {what} (or a pandas or polars Series), "
                               f"got {type(values).__name__}")
