"""The annotation options' one table: each option's name, owner (AnnotationTask, whose checks hold it, or Recording),
Python type and default, R default, R conversion, and its documentation in both languages.

annotate(), Cluster.annotate(), plan_annotation() and R's llm_annotate(), llm_vec_annotate(), annotation_task() and
plan_annotation() take these options: scripts/write_annotation_options.py writes their arguments and documentation
from this table into marked regions of those files, and tests/python/labels/test_annotation_options.py fails when a
region, AnnotationTask or Recording departs from it. A new option is a row here, its check and use in the
implementation, and a run of that script."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Tuple

from .order_bias import DEFAULT_DEBIAS


@dataclass(frozen=True)
class AnnotationOption:
    name: str
    owner: str          # "task": a field of AnnotationTask; "recording": a field of Recording
    py_type: str        # the annotation written in Python's signatures
    default: Any        # Python's default (AnnotationTask's or Recording's)
    doc: str            # annotate()'s documentation of it
    r_doc: str          # R's (roxygen markdown); "" for an option R does not take
    r_default: str = "NULL"  # R's default, as R code; NULL leaves the library's default to Python
    r_convert: str = "value"  # how task_of_call() converts R's value: "value" (as it is) or the name of a check

    @property
    def in_r(self) -> bool:
        return bool(self.r_doc)


DEBIAS_DOC = (
    "How the labels' listing order is taken out of the scores (see order_bias.py). \"auto\", the default, is "
    "\"contextual\" for a text short enough to follow the list of labels and \"reverse\" for the others (and for "
    "every text whose labels are calibrated or pending, see ``calibration``); \"reverse\" scores the list and its "
    "reverse, twice the work; \"rotations\" every cyclic rotation, K times; \"prior\" a sample of the texts under "
    "every rotation, taking what each place adds off the other texts' scores, at most 1.5 times; \"batch\" divides "
    "each label's probability by its mean over the texts, nothing extra; \"contextual\" divides it by its mean for "
    "content-free texts under the same prompt, one scoring per text and three per call and layout; \"none\". "
    "\"prior\" and \"batch\" estimate over the texts of one call: with ``output`` (and on a cluster) over each group "
    "of texts written, so a text's label depends on which texts share it (a warning says so).")

R_DEBIAS_DOC = (
    "How the labels' listing order is taken out of the scores (`NULL`: the library's default, `\"auto\"`, which is "
    "`\"contextual\"` for a text short enough to follow the list of labels and `\"reverse\"` for the others, and for "
    "every text whose labels are calibrated or pending, see `calibration`): `\"reverse\"` (the list and its reverse, "
    "averaged: twice the work of one order), `\"rotations\"` (every cyclic rotation of the list, averaged), "
    "`\"prior\"` (a sample of the texts under every rotation estimates what each place adds, which is taken off the "
    "other texts' scores; at most 1.5 times the work), `\"batch\"` (each label's probability divided by its mean "
    "over the texts; no extra work), `\"contextual\"` (each label's probability divided by its mean for content-free "
    "texts, `\"N/A\"`, `\"[MASK]\"` and an empty text, under the same prompt: one scoring per text and three per "
    "call) or `\"none\"`. The benchmarks page (\"Labels on real text\", \"Short texts\") gives what each achieves on "
    "real coded text. `\"prior\"` and `\"batch\"` estimate over the texts of one call: in a grouped "
    "`dplyr::mutate()`, each group, and on a cluster or with `output`, each chunk of texts, so a text's label "
    "depends on which texts share it (a warning of class `newrllama_group_dependent_labels` says so); the other "
    "settings score each text on its own.")

ANNOTATION_OPTIONS: Tuple[AnnotationOption, ...] = (
    AnnotationOption(
        "definitions", "task", "Optional[Mapping[str, str]]", None,
        "A dict label -> definition, added to (or overriding) those given in ``labels``, put after the text, before "
        "the list of labels: on the Reuters stories the instruct model told the topics apart with them there, and "
        "gave every story one label with them before the text, in the system turn (bench/bench_validity.py, its "
        "results in docs/benchmarks.md, \"Labels on real text\").",
        "A named character vector or list: label = definition (added to those given in `labels`), put after the "
        "text, before the list of labels. On the Reuters stories the instruct model told the topics apart with them "
        "there and gave every story one label with them before the text, in the system turn "
        "(`bench/bench_validity.py`; the benchmarks page, \"Labels on real text\", gives its results).",
        r_convert="check_definitions"),
    AnnotationOption(
        "examples", "task", "Optional[Sequence[Tuple[str, str]]]", None,
        "A list of (text, label) coded examples, shown to the model before each text (see ``examples_in``).",
        "Coded examples shown to the model before each text: a data frame with columns `text` and `label` (each "
        "label one of `labels`).",
        r_convert="check_examples"),
    AnnotationOption(
        "codebook", "task", "Optional[Mapping[str, Any]]", None,
        "Several questions about each text instead of ``labels``: a dict question -> its labels (a list, or a dict "
        "label -> definition; the instruction is shared). Each text's result is then a dict question -> Annotation; "
        "the text comes before the question, so its tokens are decoded once and shared by its questions.",
        "Several questions about each text, instead of `labels`: a named list, question = its labels (a character "
        "vector, or named: label = definition). Each text comes before its question, so it is decoded once and "
        "shared by its questions.",
        r_convert="check_questions"),
    AnnotationOption("debias", "task", "str", DEFAULT_DEBIAS, DEBIAS_DOC, R_DEBIAS_DOC, r_convert="check_string"),
    AnnotationOption(
        "calibration", "task", "Any", None,
        "A Calibration from ``calibrate()``, which corrects the scores; the texts' human codes (one per text, None "
        "where a text is not coded), on which a calibration is fitted and applied in the same call; or \"pending\" "
        "for labels to be calibrated later (the coded texts a calibration will be fitted on, or every text before one "
        "is). With a ``codebook``, a dict question -> any of these, for any of the questions. With debias \"auto\", "
        "labels calibrated, coded or pending are scored in two orders for every text, as \"reverse\" scores them: "
        "calibrated, one order labelled held-back one-liners worse than two (bench/bench_calibration.py); the codes "
        "give what \"pending\", ``calibrate()`` on the coded texts and ``apply()`` would, and a file written with "
        "codes resumes with more texts coded. A calibration fitted on texts \"auto\" scored in one order gets its "
        "texts scored in one order too (``calibrate()`` warns of the loss).",
        "A calibration from [calibrate_labels()], applied to the scores; the texts' human codes (a character "
        "vector or factor, one per text, `NA` where a text is not coded), on which a calibration is fitted and "
        "applied in the same call; or `\"pending\"` for labels to be calibrated later (the coded texts a calibration "
        "will be fitted on, or every text before one is). With a `codebook`, a named list, question = any of these. "
        "With `debias = \"auto\"`, labels calibrated, coded or pending are scored in two orders for every text: "
        "calibrated, one order labelled held-back one-liners worse than two (the benchmarks page, \"Calibration on "
        "sets never tuned on\"); the codes give what `\"pending\"`, [calibrate_labels()] on the coded texts and "
        "applying it would. A calibration fitted on texts scored in one order gets its texts scored in one order too.",
        r_convert="python_calibrations"),
    AnnotationOption(
        "examples_in", "task", "ExamplesIn", "system",
        "Where the ``examples`` go: \"system\" (the default) writes them into the system turn, \"turns\" makes each "
        "an earlier user turn answered by its label (on the Reuters stories turns made the instruct model give every "
        "story one label, the system turn did not; same benchmark as ``definitions``).",
        "Where the `examples` go (`NULL`: the library's default, `\"system\"`): `\"system\"` writes them into the "
        "system turn, `\"turns\"` makes each an earlier user turn answered by its label. The benchmarks page "
        "(\"Labels on real text\") gives what each achieves on real coded text.", r_convert="check_string"),
    AnnotationOption(
        "too_long", "task", "str", "error",
        "What happens to a text whose prompt and longest label do not fit a sequence (``n_ctx / n_seq_max`` of the "
        "context; without one, the model's training context within the budget of a context made for the call): "
        "\"error\" (the default) fails it with its length; \"truncate_end\" keeps its start, \"truncate_start\" its "
        "end, \"truncate_middle\" both halves joined by \" [...] \", cut by tokens until it fits. "
        "``Annotation.tokens_cut`` counts the tokens cut from each text, the provenance records the rule and "
        "methods_text() says how many texts were cut. Without a context and with \"error\", the context made for the "
        "call grows to fit the longest text.",
        "What happens to a text whose prompt and longest label do not fit a sequence of the context (`n_ctx / "
        "n_seq_max`; with `context = NULL`, the model's training context within the budget of the context made for "
        "the call). `NULL`: the library's default, `\"error\"` (the text fails, and its `.error` gives its length; a "
        "context made for the call grows to fit every text). `\"truncate_end\"` keeps the text's start, "
        "`\"truncate_start\"` its end, `\"truncate_middle\"` both halves joined by `\" [...] \"`, cut by tokens until "
        "it fits; `.tokens_cut` counts what was cut, the provenance records the rule and [methods_text()] says how "
        "many texts were cut.", r_convert="check_string"),
    AnnotationOption(
        "output", "recording", "Union[str, os.PathLike, None]", None,
        "A JSON Lines file to which the labels are appended as groups of texts finish, so that a run killed half-way "
        "loses nothing (the format and rules of ``Cluster.annotate``). Every option above, and the model file, is "
        "part of what a resume must match.",
        "The JSON Lines file to which the labels are appended as they come, so that a run killed half-way loses "
        "nothing (see [cluster_create()]); `names(x)` identify the texts in the file (for `llm_annotate()`, the "
        "rows' positions: resume on the same rows in the same order)."),
    AnnotationOption(
        "resume", "recording", "bool", False,
        "With ``output``: label only the texts not yet in it.",
        "With `output`: label only the texts not yet in it.", r_default="FALSE"),
    AnnotationOption(
        "retry_errors", "recording", "bool", False,
        "With ``resume=True``: also label again the texts whose line in ``output`` holds an error.",
        "With `resume = TRUE`: also label again the texts whose line in `output` holds an error.",
        r_default="FALSE"),
    AnnotationOption(
        "ids", "recording", "Optional[Sequence[Hashable]]", None,
        "One str or int per text, naming it in ``output`` (else its position).", ""),
)

OPTIONS: Dict[str, AnnotationOption] = {o.name: o for o in ANNOTATION_OPTIONS}
TASK_OPTIONS = tuple(o.name for o in ANNOTATION_OPTIONS if o.owner == "task")
RECORDING_OPTIONS = tuple(o.name for o in ANNOTATION_OPTIONS if o.owner == "recording")


def options_of(owner: str, values: Mapping[str, Any]) -> Dict[str, Any]:
    """The options of one owner ("task" or "recording") among a call's arguments (its ``locals()``)."""
    return {o.name: values[o.name] for o in ANNOTATION_OPTIONS if o.owner == owner and o.name in values}
