# Written by scripts/write_annotation_options.py from python_core/newrllama/labels/annotation_options.py:
# do not edit.

#' Options of an annotation
#'
#' The options [llm_annotate()], [llm_vec_annotate()], [annotation_task()] and [plan_annotation()] take
#' (the last two, those of the task alone), written once for R and Python.
#'
#' @param definitions A named character vector or list: label = definition (added to those given in `labels`), put
#'   after the text, before the list of labels. On the Reuters stories the instruct model told the topics apart with
#'   them there and gave every story one label with them before the text, in the system turn
#'   (`bench/bench_validity.py`; the benchmarks page, "Labels on real text", gives its results).
#' @param examples Coded examples shown to the model before each text: a data frame with columns `text` and `label`
#'   (each label one of `labels`).
#' @param codebook Several questions about each text, instead of `labels`: a named list, question = its labels (a
#'   character vector, or named: label = definition). Each text comes before its question, so it is decoded once and
#'   shared by its questions.
#' @param debias How the labels' listing order is taken out of the scores (`NULL`: the library's default, `"auto"`,
#'   which is `"contextual"` for a text short enough to follow the list of labels and `"reverse"` for the others, and
#'   for every text whose labels are calibrated or pending, see `calibration`): `"reverse"` (the list and its
#'   reverse, averaged: twice the work of one order), `"rotations"` (every cyclic rotation of the list, averaged),
#'   `"prior"` (a sample of the texts under every rotation estimates what each place adds, which is taken off the
#'   other texts' scores; at most 1.5 times the work), `"batch"` (each label's probability divided by its mean over
#'   the texts; no extra work), `"contextual"` (each label's probability divided by its mean for content-free texts,
#'   `"N/A"`, `"[MASK]"` and an empty text, under the same prompt: one scoring per text and three per call) or
#'   `"none"`. The benchmarks page ("Labels on real text", "Short texts") gives what each achieves on real coded
#'   text. `"prior"` and `"batch"` estimate over the texts of one call: in a grouped `dplyr::mutate()`, each group,
#'   and on a cluster or with `output`, each chunk of texts, so a text's label depends on which texts share it (a
#'   warning of class `newrllama_group_dependent_labels` says so); the other settings score each text on its own.
#' @param calibration A calibration from [calibrate_labels()], applied to the scores; the texts' human codes (a
#'   character vector or factor, one per text, `NA` where a text is not coded), on which a calibration is fitted and
#'   applied in the same call; or `"pending"` for labels to be calibrated later (the coded texts a calibration will
#'   be fitted on, or every text before one is). With a `codebook`, a named list, question = any of these. With
#'   `debias = "auto"`, labels calibrated, coded or pending are scored in two orders for every text: calibrated, one
#'   order labelled held-back one-liners worse than two (the benchmarks page, "Calibration on sets never tuned on");
#'   the codes give what `"pending"`, [calibrate_labels()] on the coded texts and applying it would. A calibration
#'   fitted on texts scored in one order gets its texts scored in one order too.
#' @param examples_in Where the `examples` go (`NULL`: the library's default, `"system"`): `"system"` writes them
#'   into the system turn, `"turns"` makes each an earlier user turn answered by its label. The benchmarks page
#'   ("Labels on real text") gives what each achieves on real coded text.
#' @param too_long What happens to a text whose prompt and longest label do not fit a sequence of the context (`n_ctx
#'   / n_seq_max`; with `context = NULL`, the model's training context within the budget of the context made for the
#'   call). `NULL`: the library's default, `"error"` (the text fails, and its `.error` gives its length; a context
#'   made for the call grows to fit every text). `"truncate_end"` keeps the text's start, `"truncate_start"` its end,
#'   `"truncate_middle"` both halves joined by `" [...] "`, cut by tokens until it fits; `.tokens_cut` counts what
#'   was cut, the provenance records the rule and [methods_text()] says how many texts were cut.
#' @param output The JSON Lines file to which the labels are appended as they come, so that a run killed half-way
#'   loses nothing (see [cluster_create()]); `names(x)` identify the texts in the file (for `llm_annotate()`, the
#'   rows' positions: resume on the same rows in the same order).
#' @param resume With `output`: label only the texts not yet in it.
#' @param retry_errors With `resume = TRUE`: also label again the texts whose line in `output` holds an error.
#' @name annotation_options
#' @keywords internal
NULL

# The options of the task, which task_of_call() hands to Python, and how it converts each.
annotation_task_options <- c("definitions", "examples", "codebook", "debias", "calibration", "examples_in", "too_long")
annotation_option_converters <- c(
  definitions = "check_definitions",
  examples = "check_examples",
  codebook = "check_questions",
  debias = "check_string",
  calibration = "python_calibrations",
  examples_in = "check_string",
  too_long = "check_string"
)
