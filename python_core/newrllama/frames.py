"""Results as pandas or polars data frames: each result gives its tidy rows (``rows()``, one dict per row with the
same keys), and either library, imported only when asked for, builds the frame from them."""
from __future__ import annotations

import importlib
from typing import Any, Dict, List, Optional, Tuple

from .errors import InvalidArgumentError


class Tabular:
    """What a result with ``rows()`` gains: ``to_pandas()`` and ``to_polars()``."""

    def rows(self) -> List[Dict[str, Any]]:
        raise NotImplementedError

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame."""
        return _library("pandas").DataFrame(self.rows())

    def to_polars(self) -> Any:
        """The rows as a polars DataFrame (every row read to infer the columns' types)."""
        return _library("polars").DataFrame(self.rows(), infer_schema_length=None)


def _library(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise InvalidArgumentError(f"to_{name}() needs the {name} package: pip install {name}") from None


def is_data_frame(value: object) -> bool:
    """A pandas or polars DataFrame (anything with columns that is not a Series)."""
    return hasattr(value, "columns") and getattr(value, "ndim", 2) == 2


def frame_texts(texts: object, column: Optional[str], prefix: str) -> Tuple[Any, object]:
    """(the data frame or None, the texts): with ``column``, ``texts`` must be a data frame and the texts are that
    column; a data frame without ``column``, or with columns named like the ones the results will add (starting
    with ``prefix``), is refused with the remedy, before any work."""
    if column is None:
        if is_data_frame(texts):
            raise InvalidArgumentError("texts is a data frame: name its column of texts (column=\"text\") to get the "
                                       "frame back with the labels added, or pass the column itself (df[\"text\"])")
        return None, texts
    if not isinstance(column, str):
        raise InvalidArgumentError(f"column must be the name of a column, got {type(column).__name__}")
    if not is_data_frame(texts):
        raise InvalidArgumentError(f"column={column!r} names a column of a data frame, but texts is a "
                                   f"{type(texts).__name__}")
    names = [str(c) for c in texts.columns]
    if column not in names:
        raise InvalidArgumentError(f"the data frame has no column {column!r}; its columns: {', '.join(names)}")
    taken = [n for n in names if n.startswith(prefix)]
    if taken:
        raise InvalidArgumentError(f"the data frame already has the column(s) {', '.join(taken)}, and the results go "
                                   f"into columns whose names start with {prefix!r}: rename or drop them first")
    return texts, texts[column]


def with_columns(frame: Any, result: Tabular, prefix: str) -> Any:
    """``frame`` (pandas or polars) with the result's table beside it, row for row, its columns named ``prefix +``
    their name; the caller's frame itself is left as it was."""
    if hasattr(frame, "assign"):  # pandas: on the frame's own index, so that the new columns line up with its rows
        table = result.to_pandas().set_axis(frame.index)
        return frame.assign(**{prefix + str(name): table[name] for name in table.columns})
    table = result.to_polars()
    return _library("polars").concat([frame, table.rename({c: prefix + c for c in table.columns})], how="horizontal")
