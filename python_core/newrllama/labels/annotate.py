"""annotate(): one label of a fixed set for every text, with its probabilities.

The prompt (codebook.py) puts the instruction and the coded examples first, then the text, then
the labels' definitions and last the list of labels: every prompt of a call starts with the same
tokens, which the prefix cache decodes once, and a text with the definitions after it is decoded
once for all the orders its labels are listed in. A short text without definitions has the list
in the system turn instead, before the text; with several questions (a codebook of questions)
the text comes before each question. The labels are scored as choices (see
SamplingParams), so every answer is valid; their listing order is taken out of the
scores (order_bias.py), and a Calibration fitted on coded texts may correct them."""
from __future__ import annotations

import dataclasses
import os
import warnings
from contextlib import contextmanager
from typing import Any, Dict, Hashable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .annotation import Annotation, check_texts, suspect_labels
from .annotation_job import AnnotationJob
from .annotations import ANNOTATION_COLUMN_PREFIX, Annotations
from .annotation_options import options_of
from .annotation_task import AnnotationTask, Labels
from .codebook import Codebook, ExamplesIn
from .cascade import Cascade, check_cascade, combined, is_cluster
from .codes_calibration import calibrated_by_codes
from ..engine.calls.context import Context
from ..engine.calls.sized_context import sized_context
from ..errors import AnnotationWarning, BaseModelWarning, InvalidArgumentError
from ..engine.llama.model import Model
from ..models.gguf_size import has_chat_template
from ..models.model_hash import ModelIdentity
from .order_bias import (CONTENT_FREE, DEFAULT_DEBIAS, Order, base_order, content_free_log_probs, order_free_scores,
                         softmax)
from ..engine.sampling.params import SamplingParams
from ..frames import frame_texts, with_columns
from ..engine.calls.parallel import Prompt, ends_in_a_word
from ..engine.step.progress import Progress, check_progress, progress_bar
from .provenance import Provenance, codebook_digest
from .prepared_call import PromptTokens, call_prompts, debias_groups, prepare_call, tokens_cut_of
from ..engine.step.results import Completion
from ..runs.recording import Recording
from ..runs.results_file import RecordedRun
from ..version import __version__

MISSING = "text is missing or empty"


def annotate(texts: Sequence[Optional[str]], labels: Union[AnnotationTask, Labels, None] = None,
             instruction: str = "", *, context: Optional[Context] = None,
             model: Union[Model, str, os.PathLike, None] = None, progress: Progress = None,
             column: Optional[str] = None, cascade: Optional[Cascade] = None,
             # <annotation options>
             definitions: Optional[Mapping[str, str]] = None,
             examples: Optional[Sequence[Tuple[str, str]]] = None,
             codebook: Optional[Mapping[str, Any]] = None,
             debias: str = "auto",
             calibration: Any = None,
             examples_in: ExamplesIn = "system",
             too_long: str = "error",
             output: Union[str, os.PathLike, None] = None,
             resume: bool = False,
             retry_errors: bool = False,
             ids: Optional[Sequence[Hashable]] = None,
             # </annotation options>
             **context_kwargs: Any) -> Any:
    """Labels every text with one of ``labels``, in input order (an Annotations list: ``to_pandas()`` and
    ``to_polars()`` give it as a table). ``texts`` is a list, or a pandas or polars Series; with
    ``column="text"`` it is a pandas or polars DataFrame, and the result is that frame (a new one) with the
    table's columns added, each named with a leading dot (``.label``, ``.prob_<label>``, ``.order_flip``,
    ``.tokens_cut``, ``.error``, as in R).

    ``instruction`` is the task, said to the model before each text (in the system turn of a chat model).
    ``labels`` is a list, or a dict label -> definition; an AnnotationTask made once (``AnnotationTask(labels,
    instruction, ...)``, with the options below) may stand in its place: ``annotate(texts, task)``. Several
    questions about each text: ``codebook`` instead of ``labels``.

    With no ``context``, one is made on ``model`` (a Model, a GGUF path, or None for the embedded model), sized for
    the texts; ``context_kwargs`` (``n_seq_max``, ``n_threads``, ``n_ctx`` ...) override its settings. A text that
    is None or empty gets an Annotation with ``error`` set; the others are labelled.

    ``cascade``: a Cascade(model, share= or threshold=): the texts this call's model is least sure of (by its margin
    between its two most probable labels) are labelled again by a second, larger model, whose annotations replace
    the first's; each text's provenance names its model and the cascade (cascade.py). One question, uncalibrated,
    without ``output``.

    Options (the table in labels/annotation_options.py):
    - ``definitions`` (default None): A dict label -> definition, added to (or overriding) those given in ``labels``,
      put after the text, before the list of labels: on the Reuters stories the instruct model told the topics apart
      with them there, and gave every story one label with them before the text, in the system turn
      (bench/bench_validity.py, its results in docs/benchmarks.md, "Labels on real text").
    - ``examples`` (default None): A list of (text, label) coded examples, shown to the model before each text (see
      ``examples_in``).
    - ``codebook`` (default None): Several questions about each text instead of ``labels``: a dict question -> its
      labels (a list, or a dict label -> definition; the instruction is shared). Each text's result is then a dict
      question -> Annotation; the text comes before the question, so its tokens are decoded once and shared by its
      questions.
    - ``debias`` (default "auto"): How the labels' listing order is taken out of the scores (see order_bias.py). "auto",
      the default, is "contextual" for a text short enough to follow the list of labels and "reverse" for the others
      (and for every text whose labels are calibrated or pending, see ``calibration``); "reverse" scores the list and
      its reverse, twice the work; "rotations" every cyclic rotation, K times; "prior" a sample of the texts under every
      rotation, taking what each place adds off the other texts' scores, at most 1.5 times; "batch" divides each label's
      probability by its mean over the texts, nothing extra; "contextual" divides it by its mean for content-free texts
      under the same prompt, one scoring per text and three per call and layout; "none". "prior" and "batch" estimate
      over the texts of one call: with ``output`` (and on a cluster) over each group of texts written, so a text's label
      depends on which texts share it (a warning says so).
    - ``calibration`` (default None): A Calibration from ``calibrate()``, which corrects the scores; the texts' human
      codes (one per text, None where a text is not coded), on which a calibration is fitted and applied in the same
      call; or "pending" for labels to be calibrated later (the coded texts a calibration will be fitted on, or every
      text before one is). With a ``codebook``, a dict question -> any of these, for any of the questions. With debias
      "auto", labels calibrated, coded or pending are scored in two orders for every text, as "reverse" scores them:
      calibrated, one order labelled held-back one-liners worse than two (bench/bench_calibration.py); the codes give
      what "pending", ``calibrate()`` on the coded texts and ``apply()`` would, and a file written with codes resumes
      with more texts coded. A calibration fitted on texts "auto" scored in one order gets its texts scored in one order
      too (``calibrate()`` warns of the loss).
    - ``examples_in`` (default "system"): Where the ``examples`` go: "system" (the default) writes them into the system
      turn, "turns" makes each an earlier user turn answered by its label (on the Reuters stories turns made the
      instruct model give every story one label, the system turn did not; same benchmark as ``definitions``).
    - ``too_long`` (default "error"): What happens to a text whose prompt and longest label do not fit a sequence
      (``n_ctx / n_seq_max`` of the context; without one, the model's training context within the budget of a context
      made for the call): "error" (the default) fails it with its length; "truncate_end" keeps its start,
      "truncate_start" its end, "truncate_middle" both halves joined by " [...] ", cut by tokens until it fits.
      ``Annotation.tokens_cut`` counts the tokens cut from each text, the provenance records the rule and methods_text()
      says how many texts were cut. Without a context and with "error", the context made for the call grows to fit the
      longest text.
    - ``output`` (default None): A JSON Lines file to which the labels are appended as groups of texts finish, so that a
      run killed half-way loses nothing (the format and rules of ``Cluster.annotate``). Every option above, and the
      model file, is part of what a resume must match.
    - ``resume`` (default False): With ``output``: label only the texts not yet in it.
    - ``retry_errors`` (default False): With ``resume=True``: also label again the texts whose line in ``output`` holds
      an error.
    - ``ids`` (default None): One str or int per text, naming it in ``output`` (else its position).
    """
    frame, texts = frame_texts(texts, column, ANNOTATION_COLUMN_PREFIX)
    options = locals()
    task = AnnotationTask.of(labels, instruction, **options_of("task", options))
    recording = Recording(**options_of("recording", options))
    if check_cascade(cascade, task, recording.writes) is None:
        out = label_texts(texts, task, recording, context=context, model=model, progress=progress, **context_kwargs)
    else:
        out = label_in_cascade(texts, task, cascade, context=context, model=model, progress=progress,
                               **context_kwargs)
    return out if frame is None else with_columns(frame, out, ANNOTATION_COLUMN_PREFIX)


def label_in_cascade(texts: Sequence[Optional[str]], task: AnnotationTask, cascade: Cascade, *,
                     context: Optional[Context] = None, model: Union[Model, str, os.PathLike, None] = None,
                     progress: Progress = None, on: Any = None, **context_kwargs: Any) -> Annotations:
    """Every text labelled on ``context`` (or ``model``, or the cluster ``on``), then the ones the cascade's rule
    picks from those labels labelled again on its model (cascade.py); warnings judge the combined labels."""
    texts = check_texts(texts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AnnotationWarning)
        first = (on.label_texts(texts, task, progress=progress) if on is not None else
                 label_texts(texts, task, context=context, model=model, progress=progress, **context_kwargs))
        chosen = cascade.chosen(first)
        subset = [texts[i] for i in chosen]
        if not chosen:
            second: List[Any] = []
        elif isinstance(cascade.model, Context):
            second = label_texts(subset, task, context=cascade.model, progress=progress)
        elif is_cluster(cascade.model):
            second = cascade.model.label_texts(subset, task, progress=progress)
        else:
            second = label_texts(subset, task, model=cascade.model, progress=progress, **context_kwargs)
    out = combined(first, second, chosen, cascade)
    warn_about_results(out, [None], stacklevel=4)
    return Annotations(out)


def label_texts(texts: Sequence[Optional[str]], task: AnnotationTask, recording: Recording = Recording(), *,
                context: Optional[Context] = None, model: Union[Model, str, os.PathLike, None] = None,
                progress: Progress = None, **context_kwargs: Any) -> Annotations:
    """annotate() with its task and recording as objects (R's llm_annotate() calls this)."""
    texts = check_texts(texts)
    check_progress(progress)
    task.check_codes(len(texts))
    with model_of(context, model) as use:
        warn_if_base_model(use.path, stacklevel=4)
        if recording.writes:
            out = _label_recorded(texts, task, recording, progress, context, use, context_kwargs)
        else:
            with warnings.catch_warnings():  # suspect labels are judged here, on the whole call
                warnings.simplefilter("ignore", AnnotationWarning)
                out = _label(texts, task, progress, context, use, context_kwargs)
    out = calibrated_by_codes(out, task, stacklevel=4)
    warn_about_results(out, list(task.books), stacklevel=4)
    return Annotations(out)


def _label(texts: List[Optional[str]], task: AnnotationTask, progress: Progress, context: Optional[Context],
           model: Any, context_kwargs: Dict[str, Any]) -> List[Any]:
    books, debias, calibrations = task.books, task.debias, task.calibrations
    with model_of(context, model) as use:
        call = prepare_call(use, texts, task, context, context_kwargs)
        runnable, layout, methods, jobs, probes, fits, failed = (call.runnable, call.layout, call.methods, call.jobs,
                                                               call.probes, call.fits, call.failed)
        groups = debias_groups(books, runnable, methods)
        prompts = call_prompts(use, task, call)
        params = {q: SamplingParams(choices=base_order(debias, book.labels)) for q, book in books.items()}
        questions_of = [q for q, _, _ in jobs] + [q for q, _ in probes for _ in CONTENT_FREE]
        completions = (_run(use, context, prompts, call.tokens, [params[q] for q in questions_of], progress,
                            context_kwargs) if prompts else [])
        content_free = _content_free(probes, completions[len(jobs):], {q: book.labels for q, book in books.items()})
        per_question = {}
        identity = use.identity()  # once per call: the questions share the model and the context
        determinism = dataclasses.asdict(context.engine_stats().determinism) if context is not None else None
        for q, book in books.items():
            results = [Annotation(None, error=MISSING)] * len(texts)
            for i, why in failed.items():
                results[i] = Annotation(None, error=why)
            for (gq, method), members in groups.items():
                if gq != q:
                    continue
                mine = [(k, (i, order)) for k, (jq, i, order) in enumerate(jobs) if jq == q and methods[q, i] == method]
                scored = annotations(len(texts), book.labels, method, [job for _, job in mine],
                                     [completions[k] for k, _ in mine], base_order(debias, book.labels),
                                     {i: content_free[q, layout[q, i]] for i in members}
                                     if method == "contextual" else None)
                for i in members:
                    results[i] = scored[i]
            source = _provenance(identity, determinism, book, debias, task.examples_in, task.too_long,
                                 task.for_calibration(q))
            results = [dataclasses.replace(a, provenance=source, tokens_cut=tokens_cut_of(fits.get(i)))
                       for i, a in enumerate(results)]
            per_question[q] = calibrations[q].apply(results) if q in calibrations else results
    if task.questions is None:
        return per_question[None]
    return [{q: per_question[q][i] for q in books} for i in range(len(texts))]


def warn_if_base_model(path: str, stacklevel: int = 3) -> None:
    """Warns (BaseModelWarning) before any work when the model file at ``path`` has no chat template of its own: a
    base model, such as the embedded one, that continues text rather than follows the instruction."""
    if not has_chat_template(path):
        warnings.warn(f"{os.path.basename(path)} has no chat template: it is a base model, which continues text "
                      "rather than follows an instruction, and its labels are rarely better than chance. Label with an "
                      "instruct model: Model(\"qwen2.5-coder-1.5b-instruct\") (recommended_models() lists them)",
                      BaseModelWarning, stacklevel=stacklevel)


def warn_about_results(results: Sequence[Any], questions: Sequence[Optional[str]], stacklevel: int = 3) -> None:
    """Warns (AnnotationWarning) of texts that failed, and of a question whose labels collapsed or moved with the
    listing order."""
    first = [r if questions[0] is None else r[questions[0]] for r in results]  # a text fails for every question
    failed = [i for i, a in enumerate(first) if a.label is None]
    if failed:
        warnings.warn(f"{len(failed)} of {len(first)} texts failed (first: text {failed[0]}, "
                      f"{first[failed[0]].error}); their label is None and their Annotation.error says why",
                      AnnotationWarning, stacklevel=stacklevel)
    for q in questions:
        for message in suspect_labels([r if q is None else r[q] for r in results]):
            warnings.warn(message if q is None else f"question {q!r}: {message}", AnnotationWarning,
                          stacklevel=stacklevel)


def split_message(debias: str, where: str) -> Optional[str]:
    """What a debias method that estimates over the texts of one call ("prior", "batch") means when a call is split into
    ``where``: a text's label depends on which texts share it. None for the methods that score each text alone."""
    if debias not in ("prior", "batch"):
        return None
    return (f"debias={debias!r} estimates its correction over the texts of {where}: a text's label and "
            "probabilities depend on which texts share it. 'reverse' or 'rotations' score each text on its own")


def warn_if_split(debias: str, n_texts: int, group: int, where: str, stacklevel: int = 3) -> None:
    message = split_message(debias, f"{where} (at most {group} texts)")
    if message and n_texts > group:
        warnings.warn(message, AnnotationWarning, stacklevel=stacklevel)


RECORDED_GROUP = 64  # texts labelled between two writes of the output file


def _label_recorded(texts: List[Optional[str]], task: AnnotationTask, recording: Recording, progress: Progress,
                    context: Optional[Context], model: Any, context_kwargs: Dict[str, Any]) -> List[Any]:
    job = AnnotationJob(texts, task)
    with model_of(context, model) as use, RecordedRun(
            job, recording, use.identity, context.engine_stats().determinism if context is not None else None) as run:
        todo = run.todo
        warn_if_split(task.debias, len(todo), RECORDED_GROUP, "each group written to the output file", stacklevel=5)
        bar = progress_bar(len(todo), progress, "text", "newrllama annotate")
        done: List[Any] = []
        try:
            with warnings.catch_warnings():  # suspect labels are judged on the whole call, by label_texts()
                warnings.simplefilter("ignore", AnnotationWarning)
                for a in range(0, len(todo), RECORDED_GROUP):
                    group = todo[a:a + RECORDED_GROUP]
                    # Without a context, each group gets one sized for it (as a call without output would).
                    results = _label([texts[i] for i in group], task, False, context, use, context_kwargs)
                    run.record(group, results)
                    done.extend(results)
                    bar.update(len(group))
        finally:
            bar.close()
        return run.results(done)


@contextmanager
def model_of(context: Optional[Context], model: Any) -> Iterator[Model]:
    """The model a call labels with: its context's, the Model given, or one loaded for the call and closed after it."""
    if context is not None and not isinstance(context, Context):
        raise InvalidArgumentError(f"context must be a newrllama.Context, got {type(context).__name__}")
    if context is not None:
        yield context.model
    elif isinstance(model, Model):
        yield model
    else:
        with Model(model) as own:
            yield own


def _provenance(identity: ModelIdentity, determinism: Optional[Dict[str, Any]], book: Codebook, debias: str,
                examples_in: str, too_long: str, for_calibration: bool) -> Provenance:
    return Provenance(os.path.basename(identity.path), identity.sha256, book.labels, book.instruction,
                      codebook_digest(book, examples_in), debias, examples_in, len(book.examples), determinism,
                      __version__, too_long, for_calibration)


def _content_free(probes: Sequence[Tuple[Optional[str], bool]], completions: Sequence[Completion],
                  labels: Mapping[Optional[str], Sequence[str]]) -> Dict[Tuple[Optional[str], bool], Any]:
    """Each (question, layout)'s "contextual" correction (in the order of the question's labels) from the
    completions of its content-free texts, or the reason they failed (its texts then fail with it)."""
    out: Dict[Tuple[Optional[str], bool], Any] = {}
    for k, (q, first) in enumerate(probes):
        done = completions[k * len(CONTENT_FREE):(k + 1) * len(CONTENT_FREE)]
        failed = next((c for c in done if c.finish_reason != "stop"), None)
        if failed is not None:
            out[q, first] = f"the content-free texts of debias='contextual' failed: {failed.error or failed.finish_reason}"
        else:
            out[q, first] = content_free_log_probs([[c.choice_probs[label] for label in labels[q]] for c in done])
    return out


def annotations(n_texts: int, labels: Sequence[str], debias: str, jobs: Sequence[Tuple[int, Order]],
                completions: Sequence[Completion], base: Sequence[str],
                content_free: Optional[Mapping[int, Any]] = None) -> List[Annotation]:
    """One Annotation per text from the completions of its (text, listing order) jobs, scored from the
    ``base`` order (see order_bias.py); ``content_free[text]``: its "contextual" correction, in the order of
    ``labels``, or why it could not be had."""
    labels, base = tuple(labels), tuple(base)
    results = [Annotation(None, error=MISSING)] * n_texts
    scores: Dict[int, Dict[Order, List[float]]] = {}
    for (i, order), c in zip(jobs, completions):
        if c.finish_reason != "stop":  # a text with any failed job fails as a whole
            results[i] = Annotation(None, error=c.error or c.finish_reason)
        elif content_free is not None and isinstance(content_free[i], str):
            results[i] = Annotation(None, error=content_free[i])
        else:
            scores.setdefault(i, {})[order] = [c.choice_logprobs[label] for label in labels]
    scores = {i: s for i, s in scores.items() if results[i].error == MISSING}
    if not scores:
        return results
    for i, logp in order_free_scores(debias, scores, labels, base, content_free).items():
        probs = dict(zip(labels, softmax(logp)))
        raw = dict(zip(labels, softmax(scores[i][base])))
        by_order = scores[i].values()
        flip = len({max(range(len(labels)), key=s.__getitem__) for s in by_order}) > 1 if len(by_order) > 1 else None
        results[i] = Annotation(max(probs, key=probs.get), probs, None, raw, probs, flip)
    return results


def _run(model: Model, context: Optional[Context], prompts: List[str], prompt_tokens: PromptTokens,
         params: List[SamplingParams], progress: Progress, context_kwargs: Dict[str, Any]):
    # Each prompt is tokenized once per call (prompt_tokens): the context's sizing and the call take its tokens. A
    # prompt that cannot be tokenized goes as text, and the call gives it its error.
    vocab = model.vocab
    runnable: List[Prompt] = []
    spacings = set()  # whether labels follow the prompts with a space: the label tokens the call will score
    for prompt in prompts:
        tokens = prompt_tokens[prompt]
        runnable.append(prompt if isinstance(tokens, str) else tokens)
        if not isinstance(tokens, str):
            spacings.add(ends_in_a_word(vocab, prompt, tokens))
    if context is not None:
        return context.generate_parallel(runnable, params, progress=progress)
    longest_label = max((len(t) for p in {id(p): p for p in params}.values() for spaced in spacings
                         for t in vocab.label_tokens(p.choices, spaced)), default=0) + 1  # and its end
    with sized_context(model, runnable, longest_label, **context_kwargs) as ctx:
        return ctx.generate_parallel(runnable, params, progress=progress)
