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
#' @param .data A data frame.
#' @param col The column holding the texts: a bare name or a string.
#' @param x A character vector of texts.
#' @param labels A character vector of at least two labels, or a named
#'   character vector (or list) whose names are the labels and whose values
#'   define them (`""` for a label left undefined).
#' @param instruction What the model is to do, before the list of labels.
#' @param context A context from [context_create()], a cluster from
#'   [cluster_create()] (every argument reaches its workers), or `NULL` to
#'   make a context on the embedded model, sized for the texts (the model is
#'   loaded once per session and kept, so that a grouped `dplyr::mutate()`
#'   does not load it for every group).
#' @param pred_name The name of the new label column.
#' @param ... Settings of the context made when `context` is `NULL`
#'   (`n_seq_max`, `n_threads`, `n_ctx`).
#' @param progress Show a progress bar.
#' @param output,resume The JSON Lines file to which the labels are appended
#'   as they come (so that a run killed half-way loses nothing), and whether to
#'   label only the texts not yet in it (see [cluster_create()]); `names(x)`
#'   identify the texts in the file. On a context, one question at a time and a
#'   `debias` that scores each text on its own (not `"prior"` or `"batch"`).
#' @param retry_errors With `resume = TRUE`: also label again the texts whose
#'   line in `output` holds an error.
#' @param definitions A named character vector or list: label = definition
#'   (added to those given in `labels`), put after the text, before the list of
#'   labels. On the Reuters stories the instruct model gave kappa 0.59 with them
#'   there (0.90 calibrated on 20 coded stories) and kappa 0 (every story one
#'   label) with them before the text (README, "Labels on real text").
#' @param examples Coded examples shown to the model before each text: a data
#'   frame with columns `text` and `label` (each label one of `labels`).
#' @param debias How the labels' listing order is taken out of the scores
#'   (`NULL`: the library's default, `"reverse"`): `"reverse"` (the list and
#'   its reverse, averaged: twice the work of one order), `"rotations"` (every
#'   cyclic rotation of the list, averaged), `"prior"` (a sample of the texts
#'   under every rotation estimates what each place adds, which is taken off
#'   the other texts' scores; at most 1.5 times the work), `"batch"` (each
#'   label's probability divided by its mean over the texts; no extra work) or
#'   `"none"`. The README gives what each achieves on real coded text.
#'   `"prior"` and `"batch"` estimate over the texts of one call: in a grouped
#'   `dplyr::mutate()`, each group, and on a cluster or with `output`, each
#'   chunk of texts, so a text's label depends on which texts share it (a
#'   warning of class `newrllama_group_dependent_labels` says so); the other
#'   cures score each text on its own.
#' @param calibration A calibration from [calibrate_labels()], applied to the scores
#'   (with a `codebook`: a named list, question = calibration).
#' @param examples_in Where the `examples` go (`NULL`: the library's default,
#'   `"system"`): `"system"` writes them into the system turn, `"turns"` makes
#'   each an earlier user turn answered by its label. The README gives what
#'   each achieves on real coded text.
#' @param codebook Several questions about each text, instead of `labels`: a
#'   named list, question = its labels (a character vector, or named: label =
#'   definition). Each text comes before its question, so it is decoded once
#'   and shared by its questions.
#' @return `llm_annotate()`: `.data` with the label column, `.prob` (the chosen
#'   label's probability), `.probs` (a list-column: each text's
#'   probabilities, named by label; `NULL` for a text that failed),
#'   `.order_flip` (whether the label changed between the listing orders
#'   scored; `NA` where one order was scored) and `.error` (why a text failed;
#'   `NA` where it did not): what `llm_vec_annotate()` puts in attributes, as
#'   columns that survive subsetting. `llm_vec_annotate()`: a character vector of labels with
#'   `attr(x, "probs")` (a texts x labels matrix: order-free, and calibrated
#'   when `calibration` is given), `attr(x, "raw_probs")` (the model's, with the
#'   labels in the listed order) and `attr(x, "order_free_probs")` (before any
#'   calibration), `attr(x, "order_flip")` (whether the label changed between
#'   the listing orders scored; `NA` where one order was scored) and
#'   `attr(x, "provenance")` (what made the labels, as JSON: the model file and
#'   its SHA-256, the codebook and its digest, `debias`, the determinism held,
#'   the newrllama version; a calibration fitted on these labels refuses labels
#'   made otherwise). A call whose
#'   labels look wrong as a whole (one label for nearly every text, or many
#'   labels that change with the listing order) warns. A text that is `NA` or empty gets `NA` (the reason in
#'   `attr(x, "errors")`), with one warning. With a `codebook`, `llm_annotate()`
#'   adds `<question>.label`, `<question>.prob` and `<question>.probs` columns per question,
#'   (and `.order_flip`, `.error`) per question,
#'   and `llm_vec_annotate()` returns a named list of such label vectors, one per
#'   question.
#' @seealso [validate_labels()] to compare the labels with human coding, [calibrate_labels()]
#'   to correct them with a few coded texts, [least_confident()] to pick texts
#'   for human review.
#' @examplesIf newrllama::newrllama_available()
#' stories <- data.frame(text = c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."))
#' llm_annotate(stories, text, c("acquisition", "crude oil"), "Give the topic of the news story.")
#' @export
llm_annotate <- function(.data, col, labels = NULL, instruction = "", context = NULL, pred_name = ".label", ...,
                         progress = interactive(), output = NULL, resume = FALSE, definitions = NULL, examples = NULL,
                         debias = NULL, calibration = NULL, codebook = NULL, examples_in = NULL, retry_errors = FALSE) {
  if (!is.data.frame(.data)) {
    abort_invalid(sprintf("`.data` must be a data frame, not %s", describe(.data)))
  }
  col <- substitute(col)
  name <- if (is.character(col) && length(col) == 1) col else if (is.name(col)) as.character(col) else NULL
  if (is.null(name) || !name %in% names(.data)) {
    abort_invalid("`col` must name a column of `.data` (a bare name or a string)")
  }
  pred_name <- check_string(pred_name, "pred_name")
  out <- llm_vec_annotate(.data[[name]], labels, instruction, context = context, ..., progress = progress,
                      output = output, resume = resume, definitions = definitions, examples = examples,
                      debias = debias, calibration = calibration, codebook = codebook, examples_in = examples_in,
                      retry_errors = retry_errors)
  if (is.null(codebook)) {
    .data[[pred_name]] <- as.vector(out)
    .data <- add_label_columns(.data, out, "")
  } else {
    for (q in names(out)) {
      .data[[paste0(q, ".label")]] <- as.vector(out[[q]])
      .data <- add_label_columns(.data, out[[q]], q)
    }
  }
  .data
}

# The columns beside a question's labels (prefix "" for a lone question): the chosen label's probability, every
# label's (a list-column), whether the label changed with the listing order, and why a text failed; so that a
# data frame carries everything llm_vec_annotate() puts in attributes, and keeps it through filter() or [.
add_label_columns <- function(.data, out, prefix) {
  .data[[paste0(prefix, ".prob")]] <- chosen_prob(out)
  .data[[paste0(prefix, ".probs")]] <- probs_column(out)
  flip <- attr(out, "order_flip")
  .data[[paste0(prefix, ".order_flip")]] <- if (is.null(flip)) rep(NA, length(out)) else as.logical(flip)
  errors <- rep(NA_character_, length(out))
  failed <- attr(out, "errors")
  if (!is.null(failed)) {
    errors[as.integer(names(failed))] <- unname(failed)
  }
  .data[[paste0(prefix, ".error")]] <- errors
  .data
}

# Each text's probabilities, named by label (NULL for a text that failed): a list-column.
probs_column <- function(out) {
  probs <- attr(out, "probs")
  lapply(seq_along(out), function(i) if (is.na(out[[i]])) NULL else probs[i, ])
}

# The probability of each text's chosen label.
chosen_prob <- function(out) {
  probs <- attr(out, "probs")
  vapply(seq_along(out), function(i) if (is.na(out[[i]])) NA_real_ else probs[i, out[[i]]], numeric(1))
}

#' @rdname llm_annotate
#' @export
llm_vec_annotate <- function(x, labels = NULL, instruction = "", context = NULL, ..., progress = interactive(),
                             output = NULL, resume = FALSE, definitions = NULL, examples = NULL, debias = NULL,
                             calibration = NULL, codebook = NULL, examples_in = NULL, retry_errors = FALSE) {
  if (is.factor(x)) {
    x <- as.character(x)
  }
  if (!is.character(x)) {
    abort_invalid(sprintf("the texts must be a character vector, not %s", describe(x)))
  }
  questions <- check_questions(codebook)
  spec <- list(labels = if (is.null(labels)) NULL else check_codebook_labels(labels),
               definitions = check_definitions(definitions), examples = check_examples(examples),
               debias = if (is.null(debias)) NULL else check_string(debias, "debias"),
               calibration = python_calibrations(calibration, !is.null(codebook)), codebook = questions,
               examples_in = if (is.null(examples_in)) NULL else check_string(examples_in, "examples_in"))
  instruction <- check_string(instruction, "instruction")
  progress <- check_flag(progress, "progress")
  target <- check_output(output, resume, retry_errors, names(x), "x")
  if (in_grouped_call()) {
    message <- with_python(python_helpers()$group_warning(spec$debias))
    if (!is.null(message)) warn_group_dependent(message)
  }
  out <- label_texts(context, x, spec, instruction, progress, target, sys.call(), ...)
  if (is.null(codebook)) {
    return(label_vector(out, label_names(labels), names(x)))
  }
  result <- lapply(seq_along(codebook), function(k) {
    label_vector(out[[names(codebook)[k]]], label_names(codebook[[k]]), names(x), warn = k == 1)
  })
  names(result) <- names(codebook)
  result
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

# The Python object(s) behind `calibration`: one, or with a codebook a named list of them, by question.
python_calibrations <- function(calibration, by_question, call = sys.call(-1)) {
  if (is.null(calibration)) {
    return(NULL)
  }
  if (!by_question) {
    return(check_calibration(calibration, call = call)$py)
  }
  if (!is.list(calibration) || inherits(calibration, "newrllama_calibration") || is.null(names(calibration))) {
    abort_invalid("with a `codebook`, `calibration` must be a named list: question = calibration", call = call)
  }
  lapply(calibration, function(cal) check_calibration(cal, call = call)$py)
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

# The character vector of labels with its probability matrices, from Python's named columns.
label_vector <- function(out, labels, names, warn = TRUE) {
  result <- vapply(out$label, function(l) if (is.null(l)) NA_character_ else l, character(1))
  names(result) <- names
  attr(result, "probs") <- probability_matrix(out$probs, labels, names)
  attr(result, "raw_probs") <- probability_matrix(out$raw_probs, labels, names)
  attr(result, "order_free_probs") <- probability_matrix(out$order_free_probs, labels, names)
  attr(result, "order_flip") <- vapply(out$order_flip, function(f) if (is.null(f)) NA else isTRUE(f), logical(1))
  attr(result, "provenance") <- out$provenance
  if (warn) {
    for (message in unlist(out$suspect)) warn_suspect_labels(message)
  }
  errors <- vapply(out$error, function(e) if (is.null(e)) "unknown error" else as.character(e), character(1))
  with_errors(result, is.na(result), errors, warn)
}

# The labelling itself, by the kind of `context`: a local context (or none), or a cluster.
# `target` (output, resume, retry_errors, ids) from check_output(): the file the labels are written to.
label_texts <- function(context, x, spec, instruction, progress, target, call, ...) {
  UseMethod("label_texts")
}

#' @export
label_texts.default <- function(context, x, spec, instruction, progress, target, call, ...) {
  if (!is.null(context)) {
    check_context(context, call = call)
  }
  python_annotate(if (is.null(context)) NULL else context$py, x, spec, instruction, progress, target, call,
                  python_args(list(...), call = call), model = if (is.null(context)) embedded_model())
}

#' @export
label_texts.newrllama_cluster <- function(context, x, spec, instruction, progress, target, call, ...) {
  check_dots_empty(..., call = call)
  check_cluster(context, "context", call = call)
  python_annotate(context$py, x, spec, instruction, progress, target, call, list())
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
    the$embedded_model <- with_python(py_newrllama()$Model(NULL))
  }
  the$embedded_model
}

# One Python call labels on a context, on none or on a cluster: the same arguments reach each.
python_annotate <- function(on, x, spec, instruction, progress, target, call, settings, model = NULL) {
  with_python(do.call(python_helpers()$annotate, c(list(na_to_none(x), spec$labels, instruction, on, model, progress,
                                                        spec$definitions, spec$examples, spec$debias,
                                                        spec$calibration, spec$codebook, spec$examples_in,
                                                        target$ids, target$output, target$resume,
                                                        target$retry_errors),
                                                   settings)), call = call)
}
