"""Results as pandas or polars data frames: each result gives its tidy rows (``rows()``, one dict per row with the
same keys), and either library, imported only when asked for, builds the frame from them."""
from __future__ import annotations

import importlib
from typing import Any, Dict, List

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
