"""The Python side of the R package, and its one door: R reaches the library through this module alone. Each
function does one R call's work and returns plain lists, so that reticulate converts the results once instead of
field by field; annotations come from R as one named list (annotations_of()). The library's own names that R calls
as they are come in through the import below."""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import urllib.error
import urllib.request
import warnings

import newrllama
from newrllama import (Calibration, Model, Recording, SamplingParams, agreement, read_coding_design,  # noqa: F401
                       read_codings, recommended_models, validate, weighted_kappa)
from newrllama.models import catalog
from newrllama.findings.ppi import Interval
from newrllama.findings.regression import Coefficient, Regression
from newrllama.findings.robustness import DEFAULT_DEBIAS, Robustness, VariantEstimate, judge, variants
from newrllama.labels.annotate import label_in_cascade, label_texts, split_message
from newrllama.labels.cascade import check_cascade
from newrllama.labels.annotation import PickedPositions, suspect_labels
from newrllama.labels.annotation_options import ANNOTATION_OPTIONS
from newrllama.labels.provenance import Provenance
from newrllama.engine.sampling.sampling_table import SAMPLING_FIELDS
from newrllama.findings.sheet_design import write_coding_design as write_design_beside


def sampling_fields():
    """The SamplingParams fields a caller sets, by name."""
    return [f.name for f in dataclasses.fields(newrllama.SamplingParams) if f.init]


def per_prompt_params(base, columns=None, rows=None):
    """One SamplingParams per prompt: the call's settings (base) under each prompt's own (None: the call's).

    The prompts' settings come as columns (from a data frame) or as rows (from a list of lists);
    equal rows share one SamplingParams, so a grammar is checked once, not once per prompt."""
    if columns is not None:
        rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
    fields = set(sampling_fields())
    made = {}
    out = []
    for i, row in enumerate(rows, start=1):
        if row is None:
            row = {}
        if not isinstance(row, dict):
            raise newrllama.InvalidArgumentError(f"params[[{i}]] must be a named list of settings")
        own = {name: value for name, value in row.items() if value is not None}
        unknown = sorted(set(own) - fields)
        if unknown:
            raise newrllama.InvalidArgumentError(
                f"params sets {unknown[0]!r}, which is not a sampling setting (those are: {', '.join(sorted(fields))})")
        key = repr(sorted(own.items()))
        if key not in made:
            try:
                made[key] = newrllama.SamplingParams(**{**base, **own})
            except newrllama.InvalidArgumentError as exc:
                raise newrllama.InvalidArgumentError(f"params, prompt {i}: {exc}") from None
        out.append(made[key])
    return out


def is_fetched(spec):
    return catalog.is_fetched(spec)


def chat_prompts(target, conversations):
    """Each conversation as a prompt in the chat template of the model (of a Context or a Cluster's workers)."""
    if isinstance(target, newrllama.Cluster):
        return target.apply_chat_template(conversations)
    return [target.model.apply_chat_template(messages) for messages in conversations]


def engine_stats(ctx):
    stats = ctx.engine_stats()
    return {**dataclasses.asdict(stats), "python_us_per_step": stats.python_us_per_step}


def last_stats(target):
    """The figures of the last call on a Context or a Cluster, by name (None before the first)."""
    return dataclasses.asdict(target.last_stats) if target.last_stats is not None else None


def run(target, prompts, params, progress, recording=None):
    """generate_parallel on a Context or a Cluster (same arguments; a Recording or None), its answers unpacked."""
    recording = recording or newrllama.Recording()
    completions = target.generate_parallel(prompts, params, ids=recording.ids, output=recording.output,
                                           resume=recording.resume, retry_errors=recording.retry_errors,
                                           progress=progress)
    return unpack(completions)


def unpack(completions):
    """The completions as columns, by name."""
    return {"text": [c.text for c in completions],
            "finish_reason": [c.finish_reason for c in completions],
            "error": [(c.error or "unknown error") if c.finish_reason == "error" else "" for c in completions],
            "n_prompt_tokens": [c.n_prompt_tokens for c in completions],
            "n_gen_tokens": [c.n_gen_tokens for c in completions],
            "n_cached_tokens": [c.n_cached_tokens for c in completions],
            "probs": [list(c.choice_probs.values()) if c.choice_probs else None for c in completions]}


def annotation_options():
    """The options' table (labels/annotation_options.py) as R reads it: name, owner and R's default, of the options
    R takes."""
    rows = [o for o in ANNOTATION_OPTIONS if o.in_r]
    return {"name": [o.name for o in rows], "owner": [o.owner for o in rows], "r_default": [o.r_default for o in rows]}


def annotation_task(labels, instruction, **options):
    """The AnnotationTask of an R call; an option R leaves NULL takes the library's default."""
    return newrllama.AnnotationTask(labels, instruction, **{k: v for k, v in options.items() if v is not None})


def annotate(texts, task, recording, context, model, progress, cascade=None, **settings):
    """One question: its annotations as named columns; a codebook: those of each question, by question. On a
    context (or a model, without one) or a cluster alike, with or without a cascade. R warns, from each question's
    columns, and of a base model (``base_model``: the warning's message, if any)."""
    def work():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", newrllama.AnnotationWarning)
            if check_cascade(cascade, task, recording.writes) is not None:
                on_cluster = not (context is None or isinstance(context, newrllama.Context))
                return label_in_cascade(texts, task, cascade, context=None if on_cluster else context, model=model,
                                        progress=progress, on=context if on_cluster else None, **settings)
            if context is None or isinstance(context, newrllama.Context):
                return label_texts(texts, task, recording, context=context, model=model, progress=progress,
                                   **settings)
            return context.label_texts(texts, task, recording, progress=progress)
    done, base_model = _saying(newrllama.BaseModelWarning, work)
    if task.questions is None:
        return {**unpack_annotations(done), "base_model": base_model}
    return {q: {**unpack_annotations([r[q] for r in done]), "base_model": base_model} for q in task.questions}


def cascade(model, share, threshold):
    return newrllama.Cascade(model, share=share, threshold=threshold)


def choose_cascade_share(parts, truth, second_parts, shares, tolerance):
    """The choice's table as R's columns."""
    rows = newrllama.choose_cascade_share(annotations_of(parts), truth, annotations_of(second_parts), shares=shares,
                                          tolerance=tolerance).rows()
    return {key: [row[key] for row in rows] for key in ("share", "kappa", "chosen")}


def plan_annotation(texts, task, context, model, sample, **settings):
    """plan_annotation()'s plan as plain values (positions from 0), with its summary and the base-model warning's
    message, which R raises as its own."""
    plan, base_model = _saying(newrllama.BaseModelWarning, lambda: newrllama.plan_annotation(
        texts, task, context=context, model=model, sample=int(sample), **settings))
    return {**dataclasses.asdict(plan), "too_long_texts": plan.too_long_texts, "summary": str(plan),
            "base_model": base_model}


def _saying(category, work):
    """work()'s result and the messages of the warnings of ``category`` it gave, which R raises as its own; other
    warnings go on as they were."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", category)
        result = work()
    said = [str(w.message) for w in caught if issubclass(w.category, category)]
    for w in caught:
        if not issubclass(w.category, category):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return result, said


def context(model, **settings):
    """A context and the message of the DeterminismWarning it gave (None without one), which R raises as its own."""
    made, said = _saying(newrllama.DeterminismWarning, lambda: newrllama.Context(model, **settings))
    return made, (said[0] if said else None)


def sampling_defaults():
    """Each sampling parameter's default, by name (R's signatures are tested against them)."""
    return {f.name: f.default for f in SAMPLING_FIELDS}


def group_warning(task):
    """The warning for a grouped R call (each group labelled as a call of its own), or None."""
    return split_message(task.debias, "each group of a grouped call")


def _values(probs):
    return list(probs.values()) if probs else None


def unpack_annotations(done):
    """Annotations as named columns (R builds its vector and probability matrices from them), and what looks
    wrong with them as a whole (R warns)."""
    return {"label": [a.label for a in done], "probs": [_values(a.probs) for a in done],
            "raw_probs": [_values(a.raw_probs) for a in done],
            "order_free_probs": [_values(a.order_free_probs) for a in done], "error": [a.error for a in done],
            "order_flip": [a.order_flip for a in done], "tokens_cut": [a.tokens_cut for a in done],
            "suspect": suspect_labels(done),
            "provenance": [json.dumps(a.provenance.to_dict()) if a.provenance else None for a in done]}


def annotations_of(parts):
    """R's annotation columns (annotation_parts(): one named list, the one shape in which annotations cross from R)
    as Annotations again."""
    names = parts["names"]
    n = len(parts["labels"])

    def column(key, default=None):
        values = parts.get(key)
        return values if values is not None else [default] * n

    def as_dict(row):
        return dict(zip(names, row)) if row is not None else None
    sources = {}  # each row's JSON, read once: a call's rows share one (a cascade's, one per model)

    def source(text):
        if text and text not in sources:
            sources[text] = Provenance.from_dict(json.loads(text))
        return sources.get(text) if text else None
    return [newrllama.Annotation(label, as_dict(p), error, as_dict(r), as_dict(f), order_flip=flip,
                                 tokens_cut=int(cut), provenance=source(made))
            for label, p, r, f, error, flip, cut, made in zip(
                parts["labels"], parts["probs"], column("raw_probs"), column("order_free_probs"), parts["errors"],
                column("flips"), column("tokens_cut", 0), column("provenance"))]


def calibrate(parts, truth, **options):
    """The calibration, and the AnnotationWarnings it gave (coded texts scored in one order), which R raises."""
    return _saying(newrllama.AnnotationWarning,
                   lambda: newrllama.calibrate(annotations_of(parts), truth, **options))


def calibration_apply(cal, parts):
    return unpack_annotations(cal.apply(annotations_of(parts)))


def cross_fit(parts, truth, **options):
    return unpack_annotations(newrllama.cross_fit(annotations_of(parts), truth, **options))


def calibration_json(cal):
    return json.dumps(cal.to_dict())


def calibration_from_json(text):
    return newrllama.Calibration.from_dict(json.loads(text))


def least_confident(parts, n):
    return list(newrllama.least_confident(annotations_of(parts), n))


# Python's field names -> the R data frames' column names (broom's where broom has one).
_R_COLUMNS = {"estimand": "estimand", "term": "term", "label": "label", "group": "group", "reference": "reference",
              "estimate": "estimate", "se": "std.error", "lower": "conf.low", "upper": "conf.high", "lam": "lambda",
              "naive": "naive", "naive_lower": "naive.low", "naive_upper": "naive.high", "classical": "classical",
              "classical_se": "classical.std.error", "classical_lower": "classical.conf.low",
              "classical_upper": "classical.conf.high", "family": "family", "n_coded": "n_coded",
              "n_unclear": "n_unclear", "n_texts": "n"}


def _r_columns(rows):
    keys = [k for k in _R_COLUMNS if k in rows[0]]
    return {_R_COLUMNS[k]: [row[k] for row in rows] for k in keys}


def write_coding_design(path, design, ids):
    """The design beside R's sheet at ``path`` (CSV or xlsx: R writes workbooks itself)."""
    return str(write_design_beside(path, design, ids))


def coding_design(kind, strata, inclusion_probs, how, finite):
    """The CodingDesign of R's coding_design(): its constructor's checks speak."""
    if kind == "stratified":
        return newrllama.CodingDesign.stratified(strata or [], finite=finite)
    if kind == "probabilities":
        return newrllama.CodingDesign.probabilities(inclusion_probs or [])
    if kind == "picked":
        return newrllama.CodingDesign.picked(how or "")
    if strata is not None or inclusion_probs is not None:
        raise newrllama.InvalidArgumentError("strata and inclusion_probs belong to the stratified and probabilities "
                                             "designs")
    return newrllama.CodingDesign.random(finite=finite)


def prevalence(parts, truth, **options):
    """The estimates as R's columns, the CodingSampleWarnings and the FailedTextsWarnings they gave, which R raises as
    its own."""
    (result, said), failed = _saying(newrllama.FailedTextsWarning, lambda: _saying(
        newrllama.CodingSampleWarning, lambda: newrllama.prevalence(annotations_of(parts), truth, **options)))
    return _r_columns(result.rows()), said, failed


def label_shares(parts_by_question, truth, **options):
    """R's per-question columns as codebook results, then label_shares()."""
    results = None
    for question, parts in parts_by_question.items():
        answers = annotations_of(parts)
        results = results or [{} for _ in answers]
        for row, answer in zip(results, answers):
            row[question] = answer
    return _r_columns(newrllama.label_shares(results, truth, **options).rows())


def mean_score(parts, truth, scores, **options):
    """The estimate as R's columns, and the FailedTextsWarnings it gave, which R raises as its own."""
    result, failed = _saying(newrllama.FailedTextsWarning,
                             lambda: newrllama.mean_score(annotations_of(parts), truth, scores, **options))
    return _r_columns(result.rows()), failed


def regression(x, names, truth, predicted, predicted_regressors, family, alpha, design):
    result = newrllama.regression(x, truth, predicted, predicted_regressors=predicted_regressors, names=names,
                                  intercept=False, family=family, alpha=alpha, design=design)
    rows = [{**row, "lam": result.lam, "family": result.family, "n_coded": result.n_coded, "n_texts": result.n_texts}
            for row in result.rows()]
    return _r_columns(rows)


def plan_coding(parts, truth, target_width, **options):
    """The plan's fields, its design kept as the Python object R's coding design holds."""
    plan = newrllama.plan_coding(annotations_of(parts), truth, target_width, **options)
    return {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)}


def methods_text(parts, truth, robustness_rows=None, regression_rows=None, **options):
    """The paragraph, and the CodingSampleWarnings it gave, which R raises as its own."""
    checked = None if robustness_rows is None else _robustness_of_rows(robustness_rows)
    fit = None if regression_rows is None else _regression_of_rows(regression_rows, options.get("alpha", 0.05))
    return _saying(newrllama.CodingSampleWarning,
                   lambda: newrllama.methods_text(annotations_of(parts), truth, robustness=checked, regression=fit,
                                                  **options))


def _regression_of_rows(rows, alpha):
    """R's regression tibble (its columns) back as a Regression."""
    names = {f.name: _R_COLUMNS[f.name] for f in dataclasses.fields(Coefficient)}
    coefficients = [Coefficient(*(rows[names[f.name]][i] for f in dataclasses.fields(Coefficient)))
                    for i in range(len(rows["term"]))]
    return Regression(coefficients, rows["lambda"][0], rows["family"][0], alpha, int(rows["n_coded"][0]),
                      int(rows["n"][0]))


def read_coding_sheet(path, ids, labels):
    """The codes as a plain list (R reads the design beside the sheet with read_coding_design())."""
    return list(newrllama.read_coding_sheet(path, ids, labels))


def write_coding_sheet(texts, positions, path, ids=None, coders=None, picked=False):
    """The sheet of R's positions; ``picked``: they came from least_confident(), and the sheet records so."""
    return newrllama.write_coding_sheet(texts, PickedPositions(positions) if picked else positions, path, ids=ids,
                                        coders=coders)


def robustness_variants(instruction, debias, models, debias_variants):
    """The variants R labels under, as dicts (robustness.variants() decides them)."""
    return [dataclasses.asdict(v) for v in variants(instruction, debias or DEFAULT_DEBIAS, models, debias_variants)]


def judge_robustness(finding, instruction, debias, models, debias_variants, estimates, null):
    """The verdict on the estimates R made under robustness_variants(...)'s variants, as R's columns."""
    runs = variants(instruction, debias or DEFAULT_DEBIAS, models, debias_variants)
    intervals = [Interval(e["estimate"], float("nan"), e["lower"], e["upper"]) for e in estimates]
    result = judge(finding, runs, intervals, null)
    rows = result.rows()
    return {"finding": [finding] * len(rows), "null": [null] * len(rows),
            **{key: [row[key] for row in rows] for key in rows[0]}, "sentence": result.sentence()}


def _robustness_of_rows(rows):
    """R's robustness tibble (its columns) back as a Robustness."""
    keys = [f.name for f in dataclasses.fields(VariantEstimate)]
    estimates = [VariantEstimate(*(rows[k][i] for k in keys)) for i in range(len(rows["name"]))]
    null = rows["null"][0]
    return Robustness(rows["finding"][0], estimates, None if null is None else float(null))


def cluster_create(model, num_workers, threads_per_worker, n_seq_max, n_ctx, address):
    # R puts its own library directories first in LD_LIBRARY_PATH; the Ray processes started here
    # (and the Python workers they start) must not load Debian"s libpython into this Python.
    saved = os.environ.pop("LD_LIBRARY_PATH", None)
    try:
        return newrllama.Cluster(model, num_workers=num_workers, threads_per_worker=threads_per_worker,
                                 n_seq_max=n_seq_max, n_ctx=n_ctx, address=address)
    finally:
        if saved is not None:
            os.environ["LD_LIBRARY_PATH"] = saved


def http_get(url, api_key):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy
    request = urllib.request.Request(url, headers={"Authorization": "Bearer " + api_key} if api_key else {})
    try:
        with opener.open(request, timeout=5) as r:
            return {"status": r.status, "body": json.loads(r.read())}
    except urllib.error.HTTPError as e:
        return {"status": e.code, "body": json.loads(e.read() or b"null")}
    except OSError as e:
        return {"status": 0, "body": str(e)}


def label_scores(v):
    """The per-label scores as named columns."""
    s = [v.per_label[k] for k in v.labels]
    return {"label": list(v.labels), "precision": [x.precision for x in s], "recall": [x.recall for x in s],
            "f1": [x.f1 for x in s], "support": [x.support for x in s]}


def reliability(v):
    """The reliability bins as named columns."""
    return {field: [getattr(b, field) for b in v.reliability] for field in ("low", "high", "n", "confidence", "accuracy")}


def system_info():
    info = dataclasses.asdict(newrllama.system_info())
    for device in info["devices"]:  # reticulate 1.28 wraps ints past 2^31 around: bytes go as doubles
        device["memory_total"] = float(device["memory_total"])
        device["memory_free"] = float(device["memory_free"])
    return info


def sync_environ(values, unset):
    """R's Sys.setenv() does not reach os.environ once Python runs: the R side hands its values over."""
    for name, value in values.items():
        os.environ[name] = value
    for name in unset:
        os.environ.pop(name, None)


def python_executable():
    """The interpreter R's session runs, for a child process (the server) that must use the same one."""
    return sys.executable
