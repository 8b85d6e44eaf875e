"""What annotate() asks of every text, as one checked object: the labels (or a codebook of questions), the
instruction, the coded examples, the debias method for the labels' listing order and the calibration. annotate(),
Cluster.annotate, a cluster's workers and R's llm_annotate() all take one, so the rules live here once."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..columns import column_values
from ..errors import InvalidArgumentError
from .agreement import missing
from .calibration import Calibration
from .codebook import Codebook, ExamplesIn, check_codebook, check_questions
from .order_bias import DEFAULT_DEBIAS, check_debias
from .provenance import PROMPT_LAYOUT
from .text_fit import check_too_long
from ..runs.jobs import digest

Labels = Union[Sequence[str], Mapping[str, str]]
PENDING = "pending"  # calibration= for labels to be calibrated later


@dataclass(frozen=True, eq=False)
class AnnotationTask:
    """One question (``labels``: a list, or a dict label -> definition) or several (``codebook``: a dict
    question -> labels), with the arguments annotate() documents. Checked when made: a task that exists is
    one annotate() can run. ``books`` holds each question's Codebook (the key None for one question),
    ``calibrations`` each calibrated question's Calibration. ``calibration`` may also be PENDING ("pending"): labels
    to be calibrated later, scored as a calibration needs them (see for_calibration); or the human codes of the texts
    (one per text, None where not coded): labels scored as for PENDING, then calibrated on the coded texts
    (``codes``, by question; codes_calibration.py), with a codebook by question in a dict, beside Calibrations and
    PENDING."""

    labels: Optional[Labels] = None
    instruction: str = ""
    definitions: Optional[Mapping[str, str]] = None
    examples: Optional[Sequence[Tuple[str, str]]] = None
    codebook: Optional[Mapping[str, Any]] = None
    debias: str = DEFAULT_DEBIAS
    calibration: Any = None
    examples_in: ExamplesIn = "system"
    too_long: str = "error"
    books: Dict[Optional[str], Codebook] = field(init=False, repr=False)
    calibrations: Dict[Optional[str], Calibration] = field(init=False, repr=False)
    codes: Dict[Optional[str], List[Any]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if (self.labels is None) == (self.codebook is None):
            raise InvalidArgumentError("give labels (one question) or codebook (several), not both or neither")
        if self.codebook is not None:
            if self.definitions is not None or self.examples is not None:
                raise InvalidArgumentError("with a codebook, each question's definitions go in it (a dict label -> "
                                           "definition); examples are for one question (labels=)")
            books: Dict[Optional[str], Codebook] = dict(check_questions(self.codebook, self.instruction))
        else:
            books = {None: check_codebook(self.labels, self.instruction, self.definitions, self.examples)}
        check_debias(self.debias)
        check_too_long(self.too_long)
        if self.examples_in not in ("turns", "system"):
            raise InvalidArgumentError(f"examples_in must be 'turns' or 'system', got {self.examples_in!r}")
        object.__setattr__(self, "books", books)
        given = _calibrations_given(self.calibration, books)
        object.__setattr__(self, "calibrations", {q: c for q, c in given.items() if isinstance(c, Calibration)})
        object.__setattr__(self, "codes", {q: c for q, c in given.items() if isinstance(c, list)})

    @classmethod
    def of(cls, labels: Union["AnnotationTask", Labels, None], instruction: str = "", **options: Any
           ) -> "AnnotationTask":
        """The task of a call that gave either a task (in the place of ``labels``) or the task's arguments."""
        if not isinstance(labels, AnnotationTask):
            return cls(labels, instruction, **options)
        given = [name for name, value in options.items() if value != getattr(cls, name)]
        if instruction != "" or given:
            raise InvalidArgumentError(f"an AnnotationTask holds the call's {', '.join(['instruction'] + given)}: "
                                       "give them to the task, not beside it")
        return labels

    def for_calibration(self, question: Optional[str]) -> bool:
        """Whether debias "auto" scores the question's texts for calibration (every text in two orders,
        order_bias.py): when they are to be calibrated ("pending"), or when a calibration fitted on texts so scored
        (or on annotations that do not say) is applied; a calibration fitted on texts "auto" scored in one order
        gets its texts scored as those were."""
        if self.debias != "auto":
            return False
        if _pending(self.calibration) or question in self.codes or (
                isinstance(self.calibration, Mapping) and _pending(self.calibration.get(question))):
            return True
        cal = self.calibrations.get(question)
        return cal is not None and (cal.fitted_on is None or cal.fitted_on.for_calibration)

    def scoring(self) -> "AnnotationTask":
        """This task as the texts are scored: human codes stand as PENDING, to be fitted on once every text is
        labelled (what a cluster's workers and each recorded group run)."""
        if not self.codes:
            return self
        if None in self.codes:
            return replace(self, calibration=PENDING)
        return replace(self, calibration={q: PENDING if q in self.codes else c for q, c in self.calibration.items()})

    def check_codes(self, n_texts: int) -> None:
        """Before any text is labelled: one human code per text."""
        for q, codes in self.codes.items():
            if len(codes) != n_texts:
                where = "" if q is None else f" of question {q!r}"
                raise InvalidArgumentError(f"calibration{where} holds {len(codes)} codes for {n_texts} texts: give one "
                                           "human code per text, None where a text is not coded")

    @property
    def questions(self) -> Optional[List[str]]:
        """The codebook's questions; None for one question (a text's result is then one Annotation)."""
        return None if None in self.books else list(self.books)

    def digests(self, texts: Sequence[Optional[str]]) -> List[str]:
        """What a recorded line of each text must match to be resumed: the text and everything that labels it, the
        prompt layout's version included (a file labelled under another layout is not resumed into this one)."""
        label_set, settings = self._labelling()
        return [digest(t, label_set, self.instruction, settings) for t in texts]

    def settings_digest(self) -> str:
        """Everything that labels a text but the text: what every line of one run's file shares."""
        label_set, settings = self._labelling()
        return digest(label_set, self.instruction, settings)

    def _labelling(self) -> Tuple[Optional[Tuple[str, ...]], Dict[str, Any]]:
        label_set = self.books[None].labels if self.questions is None else None
        settings = {"definitions": self.definitions, "examples": self.examples, "codebook": self.codebook,
                    "debias": self.debias, "calibration": _calibration_dicts(self.calibration),
                    "examples_in": self.examples_in, "labels": self.labels, "layout": PROMPT_LAYOUT}
        if self.too_long != "error":  # files recorded before the rule existed resume under its default
            settings["too_long"] = self.too_long
        return label_set, settings


def _calibration_dicts(calibration: Any) -> Any:
    """A calibration (or a dict question -> calibration) as plain data, for a run's digest: human codes as PENDING,
    since the texts are scored as for it, so that a file resumes with more texts coded."""
    if isinstance(calibration, Mapping):
        return {q: _calibration_dicts(c) for q, c in calibration.items()}
    if isinstance(calibration, Calibration):
        return calibration.to_dict()
    return calibration if calibration is None or isinstance(calibration, str) else PENDING


def _pending(calibration: Any) -> bool:
    return isinstance(calibration, str) and calibration == PENDING


def _calibrations_given(calibration: Any, books: Mapping[Optional[str], Codebook]) -> Dict[Optional[str], Any]:
    """Each question's calibration, checked against its labels: a Calibration, PENDING, or its human codes (a list)."""
    if calibration is None or _pending(calibration):
        return {}
    if None in books:
        given = {None: calibration}
    elif isinstance(calibration, Mapping):
        given = dict(calibration)
    else:
        raise InvalidArgumentError(f"with a codebook, calibration must be a dict question -> Calibration (or human "
                                   f"codes, or {PENDING!r}), or {PENDING!r} for labels to be calibrated later")
    out = {}
    for q, cal in given.items():
        if q not in books:
            raise InvalidArgumentError(f"calibration names the question {q!r}, which is not in the codebook")
        labels = books[q].labels
        if _pending(cal):
            out[q] = cal
        elif isinstance(cal, Calibration):
            if set(cal.labels) != set(labels):
                raise InvalidArgumentError(f"the calibration was fitted on the labels {list(cal.labels)}, "
                                           f"not {list(labels)}")
            out[q] = cal
        elif isinstance(cal, (str, bytes, Mapping)) or not (isinstance(cal, Sequence) or hasattr(cal, "__array__")):
            got = repr(cal) if isinstance(cal, str) else type(cal).__name__
            raise InvalidArgumentError(f"calibration must come from newrllama.calibrate(), be the texts' human codes "
                                       f"(one per text, None where not coded), or be {PENDING!r} for labels to be "
                                       f"calibrated later, got {got}")
        else:
            out[q] = _check_codes(column_values(cal, "calibration", "human codes"), labels, q)
    return out


def _check_codes(codes: List[Any], labels: Sequence[str], question: Optional[str]) -> List[Any]:
    codes = [None if missing(c) else c for c in codes]
    unknown = sorted({repr(c) for c in codes if c is not None and c not in labels})
    where = "" if question is None else f" of question {question!r}"
    if unknown:
        raise InvalidArgumentError(f"the codes{where} hold {', '.join(unknown)}, not among the labels {list(labels)}")
    if all(c is None for c in codes):
        raise InvalidArgumentError(f"the codes{where} hold no coded text: give the human code of at least one text")
    return codes
