"""Several coders' codes of the same texts: their agreement (Krippendorff's alpha, overall and per label) and the
adjudication that makes one truth of them, which the estimates then use."""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import InvalidArgumentError
from ..labels.agreement import agreement, missing

RULES = ("majority", "unanimous")


@dataclass(frozen=True)
class CoderAgreement:
    """Krippendorff's alpha (nominal) among the coders over the texts two or more of them coded, and per label the
    alpha of the yes/no question "is it this label?" (NaN where no coder used the label). ``n_units``: texts
    coded by two or more."""

    alpha: float
    per_label: Dict[str, float]
    percent_agreement: float
    n_units: int
    n_coders: int


@dataclass(frozen=True)
class Adjudication:
    """One truth from several coders (None where no coder coded a text, or where the rule left a disagreement
    unresolved): ``rule``, how many texts were coded, coded by two or more, disagreed on, settled by the
    tiebreak codes, and left unresolved (left out of the coded sample), and the coders' agreement."""

    truth: List[Optional[str]]
    rule: str
    coders: Tuple[str, ...]
    agreement: CoderAgreement
    n_coded: int
    n_multiple: int
    n_disagreed: int
    n_tiebroken: int
    n_unresolved: int
    tiebreak: bool

    def sentence(self) -> str:
        """What the coders did and how their codes became one, for a methods section."""
        a = self.agreement
        per_label = ", ".join(f"{label} {value:.2f}" for label, value in a.per_label.items() if not math.isnan(value))
        out = (f"The texts were coded by {len(self.coders)} coders ({', '.join(self.coders)}); {self.n_multiple} of the "
               f"{self.n_coded} coded texts were coded by two or more, with Krippendorff's alpha {a.alpha:.2f} "
               f"(nominal; per label: {per_label}) and {100 * a.percent_agreement:.0f}% agreeing pairs.")
        settle = {"majority": "by the majority of coders", "unanimous": "only where the coders agreed"}[self.rule]
        out += f" Codes were taken {settle}"
        if self.tiebreak:
            out += f", the other {self.n_tiebroken} disagreements by a further coder's codes"
        out += "."
        if self.n_unresolved:
            out += (f" {self.n_unresolved} texts whose coders disagreed were left out of the coded sample, which then "
                    "under-represents the texts that are hard to code.")
        return out


@dataclass(frozen=True)
class Codings:
    """Each coder's codes of the texts (``codes[c][i]``: coder c's code of text i, None where c did not code it),
    from ``read_codings()`` or made directly."""

    labels: Tuple[str, ...]
    coders: Tuple[str, ...]
    codes: Tuple[Tuple[Optional[str], ...], ...]

    def __post_init__(self) -> None:
        if len(self.coders) < 1 or len(set(self.coders)) != len(self.coders):
            raise InvalidArgumentError("codings need at least one coder, each named once")
        if len(self.codes) != len(self.coders) or len({len(c) for c in self.codes}) > 1:
            raise InvalidArgumentError("codings need one list of codes per coder, all of the same length (one per text)")
        for coder, codes in zip(self.coders, self.codes):
            wrong = sorted({str(c) for c in codes if not missing(c) and c not in self.labels})
            if wrong:
                raise InvalidArgumentError(f"coder {coder!r} gave {', '.join(map(repr, wrong))}, not among the labels "
                                           f"{list(self.labels)}")

    @property
    def n_texts(self) -> int:
        return len(self.codes[0])

    def agreement(self) -> CoderAgreement:
        """Agreement among the coders, over the texts two or more of them coded."""
        both = [i for i in range(self.n_texts) if sum(not missing(c[i]) for c in self.codes) >= 2]
        if not both:
            raise InvalidArgumentError("no text was coded by two or more coders: their agreement is undefined (have "
                                       "a share of the texts coded twice)")
        rows = [[c[i] for i in both] for c in self.codes]
        overall = agreement(rows)
        per_label = {}
        for label in self.labels:
            binary = [[None if missing(v) else v == label for v in row] for row in rows]
            per_label[label] = agreement(binary).alpha
        return CoderAgreement(overall.alpha, per_label, overall.percent_agreement, overall.n_units, len(self.coders))

    def adjudicate(self, rule: str = "majority", tiebreak: Optional[Sequence[Optional[str]]] = None) -> Adjudication:
        """One code per text: a text one coder coded takes that code; one several coded takes, by ``rule``, the code
        most of them gave ("majority", a tie being a disagreement) or the code all of them gave ("unanimous"); a
        disagreement takes the ``tiebreak`` code (a further coder's, one per text, None where not coded) when
        there is one, and is otherwise left unresolved (None)."""
        if rule not in RULES:
            raise InvalidArgumentError(f"rule must be one of {', '.join(map(repr, RULES))}, got {rule!r}")
        if tiebreak is not None:
            tiebreak = list(tiebreak)
            if len(tiebreak) != self.n_texts:
                raise InvalidArgumentError(f"tiebreak has {len(tiebreak)} codes for {self.n_texts} texts: give one "
                                           "per text (None where not coded)")
            wrong = sorted({str(c) for c in tiebreak if not missing(c) and c not in self.labels})
            if wrong:
                raise InvalidArgumentError(f"tiebreak holds {', '.join(map(repr, wrong))}, not among the labels")
        truth: List[Optional[str]] = []
        n_coded = n_multiple = n_disagreed = n_tiebroken = n_unresolved = 0
        for i in range(self.n_texts):
            given = [c[i] for c in self.codes if not missing(c[i])]
            if not given:
                truth.append(None)
                continue
            n_coded += 1
            n_multiple += len(given) > 1
            counts = Counter(given).most_common()
            if len(counts) == 1:
                truth.append(given[0])
                continue
            n_disagreed += 1
            if rule == "majority" and counts[0][1] > counts[1][1]:
                truth.append(counts[0][0])
            elif tiebreak is not None and not missing(tiebreak[i]):
                truth.append(tiebreak[i])
                n_tiebroken += 1
            else:
                truth.append(None)
                n_unresolved += 1
        return Adjudication(truth, rule, self.coders, self.agreement(), n_coded, n_multiple, n_disagreed,
                            n_tiebroken, n_unresolved, tiebreak is not None)
