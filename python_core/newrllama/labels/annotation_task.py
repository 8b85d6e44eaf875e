"""What annotate() asks of every text, as one checked object: the labels (or a codebook of questions), the
instruction, the coded examples, the debias method for the labels' listing order and the calibration. annotate(),
Cluster.annotate, a cluster's workers and R's llm_annotate() all take one, so the rules live here once."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import InvalidArgumentError
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
    to be calibrated later, scored as a calibration needs them (see for_calibration)."""

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
        object.__setattr__(self, "calibrations", _check_calibrations(self.calibration, books))

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
        if _pending(self.calibration):
            return True
        cal = self.calibrations.get(question)
        return cal is not None and (cal.fitted_on is None or cal.fitted_on.for_calibration)

    @property
    def questions(self) -> Optional[List[str]]:
        """The codebook's questions; None for one question (a text's result is then one Annotation)."""
        return None if None in self.books else list(self.books)

    def digests(self, texts: Sequence[Optional[str]]) -> List[str]:
        """What a recorded line of each text must match to be resumed: the text and everything that labels it, the
        prompt layout's version included (a file labelled under another layout is not resumed into this one)."""
        label_set = self.books[None].labels if self.questions is None else None
        settings = {"definitions": self.definitions, "examples": self.examples, "codebook": self.codebook,
                    "debias": self.debias, "calibration": _calibration_dicts(self.calibration),
                    "examples_in": self.examples_in, "labels": self.labels, "layout": PROMPT_LAYOUT}
        if self.too_long != "error":  # files recorded before the rule existed resume under its default
            settings["too_long"] = self.too_long
        return [digest(t, label_set, self.instruction, settings) for t in texts]


def _calibration_dicts(calibration: Any) -> Any:
    """A calibration (or a dict question -> calibration) as plain data, for a run's digest."""
    if isinstance(calibration, Mapping):
        return {q: c.to_dict() for q, c in calibration.items()}
    return calibration.to_dict() if isinstance(calibration, Calibration) else calibration


def _pending(calibration: Any) -> bool:
    return isinstance(calibration, str) and calibration == PENDING


def _check_calibrations(calibration: Any, books: Mapping[Optional[str], Codebook]) -> Dict[Optional[str], Calibration]:
    """The calibration of each question that has one, checked against its labels."""
    if calibration is None or _pending(calibration):
        return {}
    if None in books:
        given = {None: calibration}
    elif isinstance(calibration, Mapping):
        given = dict(calibration)
    else:
        raise InvalidArgumentError(f"with a codebook, calibration must be a dict question -> Calibration, or "
                                   f"{PENDING!r} for labels to be calibrated later")
    for q, cal in given.items():
        if q not in books:
            raise InvalidArgumentError(f"calibration names the question {q!r}, which is not in the codebook")
        if not isinstance(cal, Calibration):
            got = repr(cal) if isinstance(cal, str) else type(cal).__name__
            raise InvalidArgumentError(f"calibration must come from newrllama.calibrate(), or be {PENDING!r} for "
                                       f"labels to be calibrated later, got {got}")
        if set(cal.labels) != set(books[q].labels):
            raise InvalidArgumentError(f"the calibration was fitted on the labels {list(cal.labels)}, "
                                       f"not {list(books[q].labels)}")
    return given
