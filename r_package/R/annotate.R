#' Label texts with one of a fixed set of labels
#'
#' Every text gets exactly one of `labels`, with the probability of each label.
#' The prompt puts the `instruction` and coded `examples` first (in the model's
#' chat template, or plainly when the model has none), then the text, then the
#' labels' definitions and the list of labels, so the prefix cache decodes the
#' shared part once per call and each text once for all its listing orders.
#' Each label is scored as in [generate_parallel()] with
#' `choices`, followed by what ends an answer. The order in which the labels are
#' listed is taken out of the scores (`debias`), and a calibration fitted on
#' hand-coded texts ([calibrate_labels()]) may correct them.
#'
#' @inheritParams annotation_options
#' @param .data A data frame.
#' @param col The column holding the texts: a bare name, a string, or a variable holding its name.
#' @param x A character vector of texts.
#' @param labels A character vector of at least two labels, or a named
#'   character vector (or list) whose names are the labels and whose values
#'   define them (`""` for a label left undefined); or a task from
#'   [annotation_task()], which holds the instruction and options too.
#' @param instruction What the model is to do, before the list of labels.
#' @param context A context from [context_create()], a cluster from
#'   [cluster_create()] (every argument reaches its workers), or `NULL` for the
#'   session's ([llm_use()]) or, without one, to make a context on the
#'   embedded model, sized for the texts (the model is loaded once per session
#'   and kept, so that a grouped `dplyr::mutate()` does not load it for every
#'   group).
#' @param pred_name The name of the new label column.
#' @param columns `llm_vec_annotate()`: return the columns `llm_annotate()`
#'   adds (a tibble) rather than the labels alone.
#' @param ... Settings of the context made when `context` is `NULL`
#'   (`n_seq_max`, `n_threads`, `n_ctx`).
#' @param cascade A [cascade()]: a second, larger model for the texts the
#'   context's model is least sure of.
#' @param progress Show a cli progress bar with the time left (`TRUE`, the
#'   default). It appears once a call has run `cli.progress_show_after`
#'   seconds (2), in place in interactive sessions and as lines under
#'   Rscript and knitr; `options(cli.progress_show_after = Inf)` turns bars
#'   off.
#' @return `llm_annotate()`: `.data` with the label column (`pred_name`) and
#'   beside it `.prob` (the chosen label's probability), `.probs` (a
#'   list-column: each text's probabilities, named by label, order-free and
#'   calibrated when `calibration` is given; `NULL` for a text that failed),
#'   `.raw_probs` (the model's, before debiasing: scored with the labels
#'   listed in their sorted order, the order every debias method starts from, or with
#'   `debias = "none"` in the order given), `.order_free_probs`
#'   (before any calibration), `.order_flip` (whether the label changed
#'   between the listing orders scored; `NA` where one order was scored),
#'   `.tokens_cut` (how many of the text's tokens were cut to fit, `too_long`),
#'   `.error` (why a text failed; `NA` where it did not) and `.provenance`
#'   (what made the labels, as JSON: the model file and its SHA-256, the
#'   codebook and its digest, `debias`, the determinism held, the newrllama
#'   version; a calibration fitted on these labels refuses labels made
#'   otherwise). With a `codebook`, the same columns per question:
#'   `<question>.label`, `<question>.prob`, `<question>.probs`, ... These
#'   columns are what [calibrate_labels()], [prevalence()], [validate_labels()]
#'   and the other findings functions read. `llm_vec_annotate()`: the labels
#'   alone, a character vector (with a `codebook`, a tibble with one column
#'   per question); with `columns = TRUE`, a tibble of the columns
#'   `llm_annotate()` adds, which `dplyr::mutate()` splices in when it is left
#'   unnamed: `mutate(d, llm_vec_annotate(text, labels, columns = TRUE))` keeps
#'   the probabilities the findings functions read. A text that is `NA` or empty gets `NA`, and one warning of
#'   class `newrllama_failed_prompts` carries the reasons. A call whose labels
#'   look wrong as a whole (one label for nearly every text, or many labels
#'   that change with the listing order) warns.
#' @seealso [validate_labels()] to compare the labels with human coding, [calibrate_labels()]
#'   to correct them with a few coded texts, [least_confident()] to pick texts
#'   for human review.
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' stories <- data.frame(text = c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."))
#' llm_annotate(stories, text, c("acquisition", "crude oil"), "Give the topic of the news story.")
#' llm_vec_annotate(stories$text, c("acquisition", "crude oil"), "Give the topic of the news story.")
#' @export
llm_annotate <- function(.data, col, labels = NULL, instruction = "", context = NULL, pred_name = ".label", ...,
                         progress = TRUE, cascade = NULL,
                         # <annotation options>
                         definitions = NULL, examples = NULL, codebook = NULL, debias = NULL, calibration = NULL,
                         examples_in = NULL, too_long = NULL, output = NULL, resume = FALSE, retry_errors = FALSE
                         # </annotation options>
                         ) {
  x <- text_column(.data, substitute(col), parent.frame())
  pred_name <- check_string(pred_name, "pred_name")
  task <- task_of_call(labels, instruction, mget(annotation_task_options), sys.call())
  out <- annotate_texts(x, task, context, ..., progress = progress, output = output, resume = resume,
                        retry_errors = retry_errors, cascade = cascade, call = sys.call())
  with_annotation_columns(.data, out, task$labels, task$codebook, pred_name)
}

# `.data` with the columns of a labelling call's results (Python's named columns, by question with a codebook).
with_annotation_columns <- function(.data, out, labels, codebook, pred_name) {
  if (is.null(codebook)) {
    return(put_annotation_columns(.data, out, label_names(labels), pred_name))
  }
  for (q in names(codebook)) {
    .data <- put_annotation_columns(.data, out[[q]], label_names(codebook[[q]]), paste0(q, ".label"))
  }
  .data
}

#' @rdname llm_annotate
#' @export
llm_vec_annotate <- function(x, labels = NULL, instruction = "", context = NULL, ..., progress = TRUE, columns = FALSE,
                             pred_name = ".label", cascade = NULL,
                             # <annotation options>
                             definitions = NULL, examples = NULL, codebook = NULL, debias = NULL, calibration = NULL,
                             examples_in = NULL, too_long = NULL, output = NULL, resume = FALSE, retry_errors = FALSE
                             # </annotation options>
                             ) {
  columns <- check_flag(columns, "columns")
  pred_name <- check_string(pred_name, "pred_name")
  task <- task_of_call(labels, instruction, mget(annotation_task_options), sys.call())
  out <- annotate_texts(x, task, context, ..., progress = progress, output = output, resume = resume,
                        retry_errors = retry_errors, cascade = cascade, call = sys.call())
  if (columns) {
    return(with_annotation_columns(tibble::tibble(.rows = length(x)), out, task$labels, task$codebook, pred_name))
  }
  if (is.null(task$codebook)) {
    return(stats::setNames(chosen_labels(out), names(x)))
  }
  tibble::as_tibble(lapply(out, chosen_labels))
}

# Checks the texts of llm_annotate() and llm_vec_annotate(), labels them with `task` (task_of_call()), and warns
# about what went wrong: labels that look wrong as a whole, a group-dependent debias method in a grouped call, and texts
# that failed (their reasons in the warning's `errors`). Returns Python's named columns (by question with a
# codebook).
annotate_texts <- function(x, task, context, ..., progress, output, resume, retry_errors, cascade = NULL, call) {
  if (is.factor(x)) {
    x <- as.character(x)
  }
  if (!is.character(x)) {
    abort_invalid(sprintf("the texts must be a character vector, not %s", describe(x)), call = call)
  }
  progress <- progress_reporter(progress, "prompts", call = call)
  recording <- check_output(output, resume, retry_errors, names(x), "x", call = call)
  if (in_grouped_call()) {
    message <- with_python(python_helpers()$group_warning(task$py), call = call)
    if (!is.null(message)) warn_group_dependent(message)
  }
  if (!is.null(cascade) && !inherits(cascade, "newrllama_cascade")) {
    abort_invalid(sprintf("`cascade` must come from cascade(), not %s", describe(cascade)), call = call)
  }
  out <- label_texts(session_runner(context), x, task$py, progress, recording, call, ..., cascade = cascade$py)
  warn_annotations(if (is.null(task$codebook)) list(out) else out)
  out
}

#' An annotation task, made once
#'
#' The labels (or codebook), instruction and options of a labelling call, checked once and kept in one object that
#' [llm_annotate()], [llm_vec_annotate()] and [plan_annotation()] take in the place of `labels`, as ellmer keeps a
#' chat's settings in an object. The same task gives the same prompts in every call, and a change to it is one
#' edit.
#'
#' @inheritParams llm_annotate
#' @return A `newrllama_annotation_task`: a list with `labels`, `codebook` and `instruction` as given and `py`, the
#'   Python library's `AnnotationTask`. `print()` sums it up.
#' @seealso [llm_annotate()], whose arguments these are.
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' task <- annotation_task(c("acquisition", "crude oil"), "Give the topic of the news story.", debias = "reverse")
#' task
#' llm_vec_annotate(c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."), task)
#' @export
annotation_task <- function(labels = NULL, instruction = "",
                            # <annotation task options>
                            definitions = NULL, examples = NULL, codebook = NULL, debias = NULL, calibration = NULL,
                            examples_in = NULL, too_long = NULL
                            # </annotation task options>
                            ) {
  if (inherits(labels, "newrllama_annotation_task")) {
    abort_invalid("`labels` is a task already: give its options to annotation_task() once")
  }
  task_of_call(labels, instruction, mget(annotation_task_options), sys.call())
}

#' @export
print.newrllama_annotation_task <- function(x, ...) {
  py <- x$py
  what <- if (is.null(x$codebook)) {
    labels <- label_names(x$labels)
    sprintf("%d labels: %s", length(labels), paste(labels, collapse = ", "))
  } else {
    sprintf("%d questions: %s", length(x$codebook), paste(names(x$codebook), collapse = ", "))
  }
  cat("<newrllama_annotation_task> ", what, "\n", sep = "")
  if (nzchar(x$instruction)) cat("  instruction: ", x$instruction, "\n", sep = "")
  cat("  debias: ", py$debias, "; too_long: ", py$too_long, "; examples_in: ", py$examples_in, "\n", sep = "")
  invisible(x)
}

# The task of a labelling call: the one annotation_task() made, given in the place of `labels` (then no other
# option may be given), or one made of the call's arguments (`options`: the task's options by name, as
# annotation_task_options names them), checked by Python's AnnotationTask; NULL options take the library's default.
task_of_call <- function(labels, instruction, options, call) {
  if (inherits(labels, "newrllama_annotation_task")) {
    if (!identical(instruction, "") || !all(vapply(options, is.null, logical(1)))) {
      abort_invalid("give a task's instruction and options in annotation_task() or in the call, not both",
                    call = call)
    }
    return(labels)
  }
  converted <- lapply(names(options), function(name) {
    convert_option(annotation_option_converters[[name]], options[[name]], name, options, call)
  })
  py <- with_python(do.call(python_helpers()$annotation_task, c(
    list(if (is.null(labels)) NULL else check_codebook_labels(labels, call = call),
         check_string(instruction, "instruction", call = call)),
    stats::setNames(converted, names(options))
  )), call = call)
  structure(list(labels = labels, codebook = options$codebook, instruction = instruction, py = py),
            class = "newrllama_annotation_task")
}

# An option's R value as Python takes it, by the way the options' table names (annotation_option_converters).
convert_option <- function(how, value, name, options, call) {
  if (is.null(value)) {
    return(NULL)
  }
  switch(how,
    value = value,
    check_string = check_string(value, name, call = call),
    check_definitions = check_definitions(value, call = call),
    check_examples = check_examples(value, call = call),
    check_questions = check_questions(value, call = call),
    python_calibrations = python_calibrations(value, !is.null(options$codebook), call = call),
    stop("the options' table names an unknown conversion: ", how)
  )
}

# The texts of llm_annotate()'s `col`: a bare column name, a string, or a variable of the caller's (`env`) holding
# a column's name.
text_column <- function(.data, col, env, call = sys.call(-1)) {
  .data[[text_column_name(.data, col, env, call)]]
}

# The name of that column.
text_column_name <- function(.data, col, env, call = sys.call(-1)) {
  if (!is.data.frame(.data)) {
    abort_invalid(sprintf("`.data` must be a data frame, not %s", describe(.data)), call = call)
  }
  name <- if (is.name(col) && as.character(col) %in% names(.data)) as.character(col) else
    tryCatch(eval(col, env), error = function(e) NULL)
  if (!is.character(name) || length(name) != 1 || !name %in% names(.data)) {
    abort_invalid(paste0("`col` must name a column of `.data`: a bare name, a string, or a variable holding a ",
                         "column's name"), call = call)
  }
  name
}

# The warnings of a labelling call, from each question's columns: a base model (no chat template), labels that look
# wrong as a whole, and the texts that failed (once, from the first question: a text fails for every question alike).
warn_annotations <- function(questions) {
  for (message in unlist(questions[[1]]$base_model)) warn_base_model(message)
  for (question in questions) {
    for (message in unlist(question$suspect)) warn_suspect_labels(message)
  }
  errors <- vapply(questions[[1]]$error, function(e) if (is.null(e)) NA_character_ else as.character(e), character(1),
                   USE.NAMES = FALSE)
  failed <- is.na(chosen_labels(questions[[1]]))
  warn_failed(ifelse(failed & is.na(errors), "unknown error", errors), failed, "llm_annotate()", "texts")
}

# A multi-question codebook as Python takes it: a dict question -> labels (a list, or a dict label -> definition).
check_questions <- function(codebook, call = sys.call(-1)) {
  if (is.null(codebook)) {
    return(NULL)
  }
  if (!is.list(codebook) || is.null(names(codebook)) || any(!nzchar(names(codebook)))) {
    abort_invalid("`codebook` must be a named list: question = labels (a character vector, or named: label = definition)",
                  call = call)
  }
  lapply(codebook, check_codebook_labels, call = call)
}

# The Python value(s) behind `calibration`: one, or with a codebook a named list of them, by question.
python_calibrations <- function(calibration, by_question, call = sys.call(-1)) {
  if (is.null(calibration)) {
    return(NULL)
  }
  if (!by_question) {
    return(python_calibration(calibration, call = call))
  }
  if (!is.list(calibration) || inherits(calibration, "newrllama_calibration") || is.null(names(calibration))) {
    abort_invalid("with a `codebook`, `calibration` must be a named list: question = calibration", call = call)
  }
  lapply(calibration, python_calibration, call = call)
}

# One question's calibration: a calibration's Python object, the texts' human codes (NA where not coded) as a list,
# or a single string ("pending", or a mistake Python names).
python_calibration <- function(calibration, call = sys.call(-1)) {
  if (is.factor(calibration)) {
    calibration <- as.character(calibration)
  }
  if (is.character(calibration) && length(calibration) == 1 && !is.na(calibration)) {
    return(calibration)
  }
  if (is.character(calibration) || (is.logical(calibration) && all(is.na(calibration)))) {
    return(na_to_none(as.character(calibration)))
  }
  check_calibration(calibration, call = call)$py
}

# Labels as Python takes them: a list, or a dict label -> definition when named.
check_codebook_labels <- function(labels, call = sys.call(-1)) {
  if (is.list(labels) && !is.null(names(labels))) {
    labels <- unlist(lapply(labels, function(d) if (is.null(d)) "" else d))
  }
  if (!is.character(labels) || anyNA(labels)) {
    abort_invalid(sprintf("`labels` must be a character vector without NA, not %s", describe(labels)), call = call)
  }
  if (is.null(names(labels))) {
    return(as.list(labels))
  }
  if (any(!nzchar(names(labels))) || anyNA(names(labels))) {
    abort_invalid("`labels` with names must name every label (its value is the label's definition)", call = call)
  }
  as.list(labels)
}

label_names <- function(labels) {
  if (is.null(names(labels))) as.character(unlist(labels)) else names(labels)
}

check_definitions <- function(definitions, call = sys.call(-1)) {
  if (is.null(definitions)) {
    return(NULL)
  }
  if (is.list(definitions)) {
    definitions <- unlist(definitions)
  }
  if (!is.character(definitions) || is.null(names(definitions)) || anyNA(definitions)) {
    abort_invalid(sprintf("`definitions` must be a named character vector (label = definition), not %s",
                          describe(definitions)), call = call)
  }
  as.list(definitions)
}

check_examples <- function(examples, call = sys.call(-1)) {
  if (is.null(examples)) {
    return(NULL)
  }
  if (!is.data.frame(examples) || !all(c("text", "label") %in% names(examples))) {
    abort_invalid("`examples` must be a data frame with columns `text` and `label`", call = call)
  }
  text <- as.character(examples$text)
  label <- as.character(examples$label)
  lapply(seq_len(nrow(examples)), function(i) list(if (is.na(text[i])) NULL else text[i],
                                                   if (is.na(label[i])) NULL else label[i]))
}

check_calibration <- function(x, name = "calibration", call = sys.call(-1)) {
  if (inherits(x, "newrllama_calibration") && reticulate::py_is_null_xptr(x$py) && is.character(x$json)) {
    # From saveRDS() or an earlier session: the numbers are all in `json`.
    x$py <- with_python(python_helpers()$calibration_from_json(x$json), call = call)
  }
  check_class(x, "newrllama_calibration", name, "calibrate_labels", call = call)
  x
}

# The labelling itself, by the kind of `context`: a local context (or none), or a cluster. `task` and `recording`
# are Python's AnnotationTask and Recording (from check_output(): the file the labels are written to).
label_texts <- function(context, x, task, progress, recording, call, ..., cascade = NULL) {
  UseMethod("label_texts")
}

#' @export
label_texts.default <- function(context, x, task, progress, recording, call, ..., cascade = NULL) {
  if (!is.null(context)) {
    check_context(context, call = call)
  }
  python_annotate(if (is.null(context)) NULL else context$py, x, task, progress, recording, call,
                  c(python_args(list(...), call = call), list(cascade = cascade)),
                  model = if (is.null(context)) embedded_model())
}

#' @export
label_texts.newrllama_model <- function(context, x, task, progress, recording, call, ..., cascade = NULL) {
  python_annotate(NULL, x, task, progress, recording, call,
                  c(python_args(list(...), call = call), list(cascade = cascade)), model = context$py)
}

#' @export
label_texts.newrllama_cluster <- function(context, x, task, progress, recording, call, ..., cascade = NULL) {
  check_dots_empty(..., call = call)
  check_cluster(context, "context", call = call)
  python_annotate(context$py, x, task, progress, recording, call, list(cascade = cascade))
}

# Whether this is one group's call within a grouped dplyr verb (each group then labels as a call of its own).
in_grouped_call <- function() {
  if (!requireNamespace("dplyr", quietly = TRUE)) {
    return(FALSE)
  }
  group <- tryCatch(dplyr::cur_group(), error = function(e) NULL)
  !is.null(group) && ncol(group) > 0
}

# The embedded model, loaded once per session for the calls that give no context (a grouped dplyr verb calls
# once per group).
embedded_model <- function() {
  if (is.null(the$embedded_model) || reticulate::py_is_null_xptr(the$embedded_model)) {
    the$embedded_model <- with_python(python_helpers()$Model(NULL))
  }
  the$embedded_model
}

# One Python call labels on a context, on none or on a cluster: the same task and recording reach each.
python_annotate <- function(on, x, task, progress, recording, call, settings, model = NULL) {
  with_python(do.call(python_helpers()$annotate, c(list(na_to_none(x), task, recording, on, model, progress),
                                                   settings)), call = call)
}
