"""What annotate() returns: a list of annotations (one per text, or per text a dict question -> Annotation) that
also gives them as a table, one row per text, for pandas or polars."""
from __future__ import annotations

import json
from typing import Any, Dict, List

from ..frames import Tabular

# The table's columns, added to a caller's data frame, start with this (as R's do): they cannot clash with the
# caller's own "label" column of human codes.
ANNOTATION_COLUMN_PREFIX = "."


class Annotations(list, Tabular):
    """A list, in input order, of Annotation (or, with a codebook, of dicts question -> Annotation);
    ``to_pandas()`` / ``to_polars()`` give one row per text: ``label``, ``prob_<label>`` for each label,
    ``order_flip``, ``calibrated`` (the probabilities a calibration's, not the model's own), ``provenance`` (JSON, as
    ``Provenance.to_dict()``), ``tokens_cut`` and ``error`` (with a codebook ``<question>_label``,
    ``<question>_prob_<label>``, ``<question>_order_flip``, ``<question>_calibrated`` and ``<question>_provenance`` for
    each question, and one ``tokens_cut`` and ``error``). Every estimator takes the table back as it takes the list."""

    def rows(self) -> List[Dict[str, Any]]:
        out = []
        for result in self:
            per_question = result if isinstance(result, dict) else {None: result}
            row: Dict[str, Any] = {}
            for question, a in per_question.items():
                prefix = "" if question is None else f"{question}_"
                row[f"{prefix}label"] = a.label
                row.update({f"{prefix}prob_{label}": p for label, p in (a.probs or {}).items()})
                row[f"{prefix}order_flip"] = a.order_flip
                row[f"{prefix}calibrated"] = a.order_free_probs is not None and a.probs != a.order_free_probs
                row[f"{prefix}provenance"] = json.dumps(a.provenance.to_dict()) if a.provenance else None
            row["tokens_cut"] = next(iter(per_question.values())).tokens_cut  # a text is cut once for all questions
            row["error"] = next((a.error for a in per_question.values() if a.error is not None), None)
            out.append(row)
        return out
