#' Label texts with one of a fixed set of labels
#'
#' Every text gets exactly one of `labels`, with the probability of each label.
#' The prompt puts `instruction` and the labels first (in the system turn of the
#' model's chat template, or plainly when the model has none) and the text
#' last, so the prefix cache decodes the shared part once. Labels are scored as
#' in [generate_parallel()] with `choices`.
#'
#' @param .data A data frame.
#' @param col The column holding the texts: a bare name or a string.
#' @param x A character vector of texts.
#' @param labels A character vector of at least two labels.
#' @param instruction What the model is to do, before the list of labels.
#' @param context A context from [context_create()], a cluster from
#'   [cluster_create()], or `NULL` to make a context on the embedded model,
#'   sized for the texts.
#' @param pred_name The name of the new label column.
#' @param ... Settings of the context made when `context` is `NULL`
#'   (`n_seq_max`, `n_threads`, `n_ctx`).
#' @param progress Show a progress bar.
#' @param output,resume With a cluster as `context` only: the JSON Lines file
#'   to which every label is appended as it comes, and whether to label only the
#'   texts not yet in it (see [cluster_create()]); `names(x)` identify the texts
#'   in the file.
#' @return `annotate()`: `.data` with the label column and `.prob` (the chosen
#'   label's probability). `annotate_vec()`: a character vector of labels with
#'   `attr(x, "probs")`, a texts x labels matrix. A text that is `NA` or empty
#'   gets `NA` (the reason in `attr(x, "errors")`), with one warning.
#' @seealso [validate()] to compare the labels with human coding.
#' @examplesIf newrllama::newrllama_available()
#' stories <- data.frame(text = c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."))
#' annotate(stories, text, c("acquisition", "crude oil"), "Give the topic of the news story.")
#' @export
annotate <- function(.data, col, labels, instruction = "", context = NULL, pred_name = ".label", ...,
                     progress = interactive(), output = NULL, resume = FALSE) {
  if (!is.data.frame(.data)) {
    abort_invalid(sprintf("`.data` must be a data frame, not %s", describe(.data)))
  }
  col <- substitute(col)
  name <- if (is.character(col) && length(col) == 1) col else if (is.name(col)) as.character(col) else NULL
  if (is.null(name) || !name %in% names(.data)) {
    abort_invalid("`col` must name a column of `.data` (a bare name or a string)")
  }
  pred_name <- check_string(pred_name, "pred_name")
  out <- annotate_vec(.data[[name]], labels, instruction, context = context, ..., progress = progress,
                      output = output, resume = resume)
  .data[[pred_name]] <- as.vector(out)
  probs <- attr(out, "probs")
  .data[[".prob"]] <- vapply(seq_along(out), function(i) if (is.na(out[[i]])) NA_real_ else probs[i, out[[i]]],
                             numeric(1))
  .data
}

#' @rdname annotate
#' @export
annotate_vec <- function(x, labels, instruction = "", context = NULL, ..., progress = interactive(), output = NULL,
                         resume = FALSE) {
  if (is.factor(x)) {
    x <- as.character(x)
  }
  if (!is.character(x)) {
    abort_invalid(sprintf("the texts must be a character vector, not %s", describe(x)))
  }
  if (!is.character(labels) || anyNA(labels)) {
    abort_invalid(sprintf("`labels` must be a character vector without NA, not %s", describe(labels)))
  }
  instruction <- check_string(instruction, "instruction")
  progress <- check_flag(progress, "progress")
  out <- label_texts(context, x, as.list(labels), instruction, progress, output, resume, sys.call(), ...)
  result <- vapply(out[[1]], function(l) if (is.null(l)) NA_character_ else l, character(1))
  probs <- matrix(NA_real_, length(x), length(labels), dimnames = list(names(x), labels))
  for (i in which(!is.na(result))) {
    probs[i, ] <- as.numeric(unlist(out[[2]][[i]]))
  }
  names(result) <- names(x)
  attr(result, "probs") <- probs
  if (anyNA(result)) {
    failed <- which(is.na(result))
    errors <- vapply(out[[3]][failed], as.character, character(1))
    names(errors) <- failed
    attr(result, "errors") <- errors
    warn_failed_prompts(length(failed), length(result))
  }
  result
}

# The labelling itself, by the kind of `context`: a local context (or none), or a cluster.
label_texts <- function(context, x, labels, instruction, progress, output, resume, call, ...) {
  UseMethod("label_texts")
}

#' @export
label_texts.default <- function(context, x, labels, instruction, progress, output, resume, call, ...) {
  if (!is.null(context)) {
    check_context(context, call = call)
  }
  if (!is.null(output) || !isFALSE(resume)) {
    abort_invalid("`output` and `resume` need a cluster as `context` (see cluster_create())", call = call)
  }
  settings <- list(...)
  for (key in names(settings)) {
    settings[[key]] <- check_count(settings[[key]], key, min = 1, call = call)
  }
  with_python(do.call(python_helpers()$annotate, c(list(na_to_none(x), labels, instruction,
                                                        if (is.null(context)) NULL else context$py, progress),
                                                   settings)), call = call)
}

#' @export
label_texts.newrllama_cluster <- function(context, x, labels, instruction, progress, output, resume, call, ...) {
  check_dots_empty(..., call = call)
  check_cluster(context, "context", call = call)
  target <- check_output(output, resume, names(x), "x", call = call)
  with_python(python_helpers()$annotate_cluster(context$py, na_to_none(x), labels, instruction, target$ids,
                                                target$output, target$resume, progress), call = call)
}
