"""What a labelling call will score, worked out before any prompt runs: each text's layout and debias method, the
(question, text, order) scorings and "contextual" probes, each text as its prompts will hold it (cut to fit by the
task's ``too_long``) and the prompts. annotate() runs it; plan_annotation() measures it."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .annotation_task import AnnotationTask
from .codebook import Codebook
from ..engine.calls.context import Context
from ..engine.calls.sized_context import sequence_budget
from ..engine.llama.model import Model
from ..engine.calls.parallel import tokens_or_error
from ..engine.llama.vocab import Vocab
from .order_bias import CONTENT_FREE, Order, base_order, resolved_debias, scoring_jobs
from .text_fit import FittedText, fit_text

Job = Tuple[Optional[str], int, Order]


class PromptTokens(dict):
    """Each prompt's tokens, or why it cannot run, tokenized once per call: fitting the texts, the plan and the run
    read them here."""

    def __init__(self, vocab: Vocab) -> None:
        super().__init__()
        self.vocab = vocab

    def __missing__(self, prompt: str) -> Union[List[int], str]:
        self[prompt] = tokens = tokens_or_error(self.vocab, prompt, 0)
        return tokens

    def length(self, prompt: str) -> int:
        """The prompt's length in tokens (0 for a prompt that cannot run: the run gives it its error)."""
        tokens = self[prompt]
        return 0 if isinstance(tokens, str) else len(tokens)


@dataclasses.dataclass(frozen=True)
class PreparedCall:
    """What a labelling call will score, before any prompt runs: the texts it scores (``runnable``), each
    (question, text)'s layout and debias method, the (question, text, order) jobs and "contextual" probes, each text
    as its prompts hold it (``fits``) and the texts that fail before any prompt (``failed``: why)."""

    runnable: List[int]
    layout: Dict[Tuple[Optional[str], int], bool]
    methods: Dict[Tuple[Optional[str], int], str]
    jobs: List[Job]
    probes: List[Tuple[Optional[str], bool]]
    fits: Dict[int, Union[FittedText, str]]
    failed: Dict[int, str]
    tokens: PromptTokens


def prepare_call(use: Model, texts: Sequence[Optional[str]], task: AnnotationTask, context: Optional[Context],
                 context_kwargs: Mapping[str, Any]) -> PreparedCall:
    books, debias = task.books, task.debias
    runnable = [i for i, t in enumerate(texts) if isinstance(t, str) and t.strip()]
    # The layout rule reads each text's and list's length: measured once per call, not per prompt.
    list_lengths = {q: book.list_length(use) for q, book in books.items() if not book.definitions}
    text_lengths = {i: len(use.tokenize(texts[i])) for i in runnable} if list_lengths else {}
    layout = {(q, i): q in list_lengths and books[q].lists_first(text_lengths[i], list_lengths[q])
              for q in books for i in runnable}
    for_calibration = {q: task.for_calibration(q) for q in books}  # a question's rule, not a text's
    methods = {(q, i): resolved_debias(debias, first, for_calibration[q]) for (q, i), first in layout.items()}
    jobs, probes = _jobs(books, debias, runnable, methods, layout)
    tokens = PromptTokens(use.vocab)
    fits = _fit_texts(use, context, texts, jobs, probes, task, layout, context_kwargs, tokens)
    failed = {i: fit for i, fit in fits.items() if isinstance(fit, str)}
    if failed:
        runnable = [i for i in runnable if i not in failed]
        methods = {qi: m for qi, m in methods.items() if qi[1] not in failed}
        jobs, probes = _jobs(books, debias, runnable, methods, layout)
    return PreparedCall(runnable, layout, methods, jobs, probes, fits, failed, tokens)


def call_prompts(use: Model, task: AnnotationTask, call: PreparedCall) -> List[str]:
    """The call's prompts: its jobs', then its content-free probes'."""
    books, debias, examples_in = task.books, task.debias, task.examples_in
    prompts = [books[q].in_order(order).prompt(use, call.fits[i].text, examples_in, call.layout[q, i])
               for q, i, order in call.jobs]
    return prompts + [books[q].in_order(base_order(debias, books[q].labels)).prompt(use, blank, examples_in, first)
                      for q, first in call.probes for blank in CONTENT_FREE]


def _jobs(books: Mapping[Optional[str], Codebook], debias: str, runnable: Sequence[int],
          methods: Mapping[Tuple[Optional[str], int], str], layout: Mapping[Tuple[Optional[str], int], bool]
          ) -> Tuple[List[Job], List[Tuple[Optional[str], bool]]]:
    """The (question, text, order) scorings of a call, a text's in a row so that they share its prefix while it is
    cached; and the (question, layout)s whose "contextual" content-free texts go after them."""
    groups = debias_groups(books, runnable, methods)
    jobs = sorted(((q, i, order) for (q, method), members in groups.items()
                   for i, order in scoring_jobs(method, members, base_order(debias, books[q].labels))),
                  key=lambda job: job[1])
    probes = sorted({(q, layout[q, i]) for (q, i), method in methods.items() if method == "contextual"})
    return jobs, probes


def _fit_texts(model: Model, context: Optional[Context], texts: Sequence[Optional[str]], jobs: Sequence[Job],
               probes: Sequence[Any], task: AnnotationTask, layout: Mapping[Tuple[Optional[str], int], bool],
               context_kwargs: Mapping[str, Any], tokens: PromptTokens) -> Dict[int, Union[FittedText, str]]:
    """Each scored text as its prompts will hold it (cut by ``task.too_long`` where it does not fit a sequence with
    the longest label), or why it fails. A context made for the call (too_long="error") grows to fit every text."""
    books, examples_in = task.books, task.examples_in
    orders: Dict[int, List[Tuple[Optional[str], Order]]] = {}
    for q, i, order in jobs:
        orders.setdefault(i, []).append((q, order))
    if context is not None:
        cells: Optional[int] = context.n_ctx_seq
    elif task.too_long == "error":
        cells = None
    else:
        cells = sequence_budget(model, len(jobs) + len(probes) * len(CONTENT_FREE), context_kwargs.get("n_seq_max"),
                                context_kwargs.get("n_ctx"))
    if cells is None:
        return {i: FittedText(texts[i]) for i in orders}
    room = cells - answer_room(model, books) - 1

    def fits(i: int) -> Union[FittedText, str]:
        def longest_prompt(text: str) -> int:
            return max(tokens.length(books[q].in_order(order).prompt(model, text, examples_in, layout[q, i]))
                       for q, order in orders[i])
        return fit_text(model, texts[i], longest_prompt, room, task.too_long)
    return {i: fits(i) for i in orders}


def answer_room(model: Model, books: Mapping[Optional[str], Codebook]) -> int:
    """The most tokens a label and the end of the answer take, whether or not the label follows a space."""
    return max(len(t) for book in books.values() for spaced in (True, False)
               for t in model.vocab.label_tokens(tuple(book.labels), spaced)) + 1


def tokens_cut_of(fit: Union[FittedText, str, None]) -> int:
    return fit.tokens_cut if isinstance(fit, FittedText) else 0


def debias_groups(books: Mapping[Optional[str], Codebook], runnable: Sequence[int],
                  methods: Mapping[Tuple[Optional[str], int], str]) -> Dict[Tuple[Optional[str], str], List[int]]:
    """The texts of each question scored with each debias method ("auto" gives a call two), in input order: a method
    that estimates over texts ("prior", "batch") estimates over all of a question's texts, as one group."""
    groups: Dict[Tuple[Optional[str], str], List[int]] = {}
    for q in books:
        for i in runnable:
            groups.setdefault((q, methods[q, i]), []).append(i)
    return groups
