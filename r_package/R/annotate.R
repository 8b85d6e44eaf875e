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
#' @param context A context from [context_create()]; `NULL` makes one on the
#'   embedded model, sized for the texts.
#' @param pred_name The name of the new label column.
#' @param ... Settings of the context made when `context` is `NULL`
#'   (`n_seq_max`, `n_threads`, `n_ctx`).
#' @param progress Show a progress bar.
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
                     progress = interactive()) {
  if (!is.data.frame(.data)) {
    abort_invalid(sprintf("`.data` must be a data frame, not %s", describe(.data)))
  }
  col <- substitute(col)
  name <- if (is.character(col) && length(col) == 1) col else if (is.name(col)) as.character(col) else NULL
  if (is.null(name) || !name %in% names(.data)) {
    abort_invalid("`col` must name a column of `.data` (a bare name or a string)")
  }
  pred_name <- check_string(pred_name, "pred_name")
  out <- annotate_vec(.data[[name]], labels, instruction, context = context, ..., progress = progress)
  .data[[pred_name]] <- as.vector(out)
  probs <- attr(out, "probs")
  .data[[".prob"]] <- vapply(seq_along(out), function(i) if (is.na(out[[i]])) NA_real_ else probs[i, out[[i]]],
                             numeric(1))
  .data
}

#' @rdname annotate
#' @export
annotate_vec <- function(x, labels, instruction = "", context = NULL, ..., progress = interactive()) {
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
  if (!is.null(context)) {
    check_context(context)
  }
  settings <- list(...)
  for (key in names(settings)) {
    settings[[key]] <- check_count(settings[[key]], key, min = 1)
  }
  texts <- na_to_none(x)
  out <- with_python(do.call(python_helpers()$annotate, c(list(texts, as.list(labels), instruction,
                                                                if (is.null(context)) NULL else context$py,
                                                                progress), settings)))
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
