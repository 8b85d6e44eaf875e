"""What produced a call's labels: the model's bytes, the prompt, the debias method, the determinism held and the
release, so that a calibration refuses labels made otherwise and a methods section can name them."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional, Tuple

from ..errors import InvalidArgumentError

# What must match for scores to be comparable (a calibration fitted on one applies to the other).
LABELLING = ("model_sha256", "codebook_digest", "debias", "for_calibration")


@dataclass(frozen=True)
class Provenance:
    """The model file and its SHA-256, the codebook (labels, instruction, definitions, examples and where they go)
    and its digest, the debias method, the determinism held (None when annotate() made its own context), the
    newrllama version, the rule for texts too long for a sequence, whether debias "auto" scored the labels for
    calibration (every text in two orders, order_bias.py), and the cascade the labels came from, if any."""

    model_file: str
    model_sha256: str
    labels: Tuple[str, ...]
    instruction: str
    codebook_digest: str
    debias: str
    examples_in: str
    n_examples: int
    determinism: Optional[Dict[str, Any]]
    newrllama: str
    too_long: str = "error"  # the rule for texts longer than a sequence (text_fit.py); records before it had none
    for_calibration: bool = False  # records before it had none: "auto" then scored short texts in one order
    cascade: Optional[Dict[str, Any]] = None  # both models of a cascade and its rule (cascade.py); None: one model

    def differs_from(self, other: "Provenance") -> Optional[str]:
        """How other's scores were made otherwise (model, prompt or debias method), or None if they were not."""
        for key in LABELLING:
            mine, theirs = getattr(self, key), getattr(other, key)
            if mine != theirs and key == "for_calibration":
                where = "two orders for calibration here, in one there" if mine else \
                    "one order here, in two for calibration there"
                return (f"debias 'auto' scored short texts in {where}; annotate(..., calibration='pending') scores "
                        "the coded texts for calibration")
            if mine != theirs:
                return f"{key.replace('_', ' ')} {mine!r} here, {theirs!r} there"
        return None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Provenance":
        try:
            return cls(**{**d, "labels": tuple(d["labels"])})
        except (KeyError, TypeError) as exc:
            raise InvalidArgumentError(f"not a provenance record: {exc}") from None


# 2: a text shorter than two lists comes after the list (codebook.Codebook.lists_first).
PROMPT_LAYOUT = 2


def codebook_digest(book: Any, examples_in: str) -> str:
    """A digest of everything in the prompt but the text: labels, instruction, definitions, examples, question,
    and the version of the layout that places them (a calibration fitted under another layout is refused)."""
    parts = [list(book.labels), book.instruction, list(book.definitions), list(book.examples), book.question,
             examples_in, PROMPT_LAYOUT]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()[:32]
