"""Texts that carry several labels: each label asked as a yes/no question of a codebook
(``annotate(texts, codebook={"acquisition": ["yes", "no"], "crude oil": ["yes", "no"]}, ...)``), and each label's
share of the texts estimated from the answers and the human codes (the set of labels each coded text carries)."""
from __future__ import annotations

import dataclasses
from typing import Any, Collection, List, Mapping, Optional, Sequence

from ..errors import InvalidArgumentError
from ..labels.agreement import missing
from ..labels.annotation import Annotation
from .design import CodingDesign
from .prevalence import Prevalence, Share, prevalence


def label_shares(results: Sequence[Optional[Mapping[str, Annotation]]], truth: Sequence[Optional[Collection[str]]],
                 *, yes: str = "yes", alpha: float = 0.05, design: Optional[CodingDesign] = None) -> Prevalence:
    """Each label's share of the texts, with PPI++ intervals, when a text may carry several labels.

    ``results``: annotate()'s answers to a codebook of yes/no questions, one question per label (each text a dict
    question -> Annotation); ``truth``: per text the labels a human coder gave it (a set or list, empty when it has
    none), None where the text was not coded; ``yes``: the answer that means the text has the label. Each label's
    share is prevalence()'s share of ``yes`` on its own question (``design`` and ``alpha`` as there); the shares
    need not sum to one. Returns a Prevalence whose shares are labelled by question."""
    results = list(results)
    truth = list(truth.tolist() if hasattr(truth, "tolist") else truth)
    if len(truth) != len(results):
        raise InvalidArgumentError(f"truth has {len(truth)} entries for {len(results)} texts: give one set of labels "
                                   "(or None) per text")
    first = next((r for r in results if isinstance(r, Mapping)), None)
    if first is None:
        raise InvalidArgumentError("results must be annotate()'s answers to a codebook (per text a dict question -> "
                                   "Annotation)")
    questions = list(first)
    for i, t in enumerate(truth):
        if not _uncoded(t) and (isinstance(t, (str, bytes)) or not all(label in questions for label in t)):
            raise InvalidArgumentError(f"truth[{i}] must be a set or list of the labels {questions} (empty for none), "
                                       f"got {t!r}")
    shares: List[Share] = []
    n_failed = 0
    for q in questions:
        answers = [r[q] if isinstance(r, Mapping) else Annotation(None, error="no answer") for r in results]
        options = next((list(a.probs) for a in answers if a.probs), [])
        if yes not in options or len(options) != 2:
            raise InvalidArgumentError(f"question {q!r} has the answers {options}: each label's question must have "
                                       f"two answers, {yes!r} and another")
        no = next(o for o in options if o != yes)
        codes = [None if _uncoded(t) else (yes if q in t else no) for t in truth]
        found = prevalence(answers, codes, alpha=alpha, design=design)
        shares.append(dataclasses.replace(found.share(yes), label=q))
        n_failed = max(n_failed, found.n_failed)
    return Prevalence(shares, [], alpha, "probs", n_failed)


def _uncoded(t: Any) -> bool:
    return t is None or (not isinstance(t, (str, bytes, Collection)) and missing(t))
