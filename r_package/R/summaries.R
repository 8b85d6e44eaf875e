# summary(), tidy() and glance() of results: one place that says what each result boils down to. glance() gives
# the one-row figures, tidy() the per-row table, summary() both, printed under a heading.

#' Summaries of results
#'
#' `summary()` of a validation, calibration, annotation plan, coding plan,
#' shares ([prevalence()]) or coefficients ([regression()]) gives its figures
#' as one row (`$overall`, what `generics::glance()` gives) and, where the
#' result has rows, its table (`$table`, what `generics::tidy()` gives), and
#' prints both.
#'
#' @param object,x A result of [validate_labels()], [calibrate_labels()],
#'   [plan_annotation()], [plan_coding()], [prevalence()] or [regression()].
#' @param ... Unused.
#' @return `summary()`: a `newrllama_summary`, a list of `title`, `overall` (a
#'   one-row tibble) and `table` (a tibble, or `NULL`). `glance()` and
#'   `tidy()`: a tibble.
#' @examplesIf newrllama::newrllama_available()
#' v <- validate_labels(c("a", "b", "a"), c("a", "b", "b"))
#' summary(v)
#' @name newrllama_summaries
NULL

new_summary <- function(title, overall, table = NULL) {
  structure(list(title = title, overall = overall, table = table), class = "newrllama_summary")
}

#' @export
print.newrllama_summary <- function(x, ...) {
  cat(cli::style_bold(x$title), "\n", sep = "")
  print(as.data.frame(x$overall), row.names = FALSE)
  if (!is.null(x$table)) {
    cat("\n")
    print(x$table, n = Inf)
  }
  invisible(x)
}

#' @rdname newrllama_summaries
#' @export
summary.newrllama_validation <- function(object, ...) {
  new_summary(sprintf("Labels against human codes (%d texts)", object$n), glance.newrllama_validation(object),
              tidy.newrllama_validation(object))
}

#' @rdname newrllama_summaries
#' @export
summary.newrllama_calibration <- function(object, ...) {
  new_summary("Calibration", glance.newrllama_calibration(object))
}

#' @rdname newrllama_summaries
#' @export
summary.newrllama_annotation_plan <- function(object, ...) {
  new_summary(sprintf("Annotation plan (%d texts)", nrow(object$texts)), glance.newrllama_annotation_plan(object),
              tidy.newrllama_annotation_plan(object))
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::glance
glance.newrllama_annotation_plan <- function(x, ...) {
  per_text <- x$texts$text_tokens # not `tokens`: tibble() would read its own column of that name
  tibble::tibble(texts = nrow(x$texts), tokens = sum(per_text, na.rm = TRUE),
                 max_tokens = if (all(is.na(per_text))) NA_integer_ else max(per_text, na.rm = TRUE),
                 too_long = length(x$too_long_texts), tokens_cut = sum(x$texts$tokens_cut),
                 failing = sum(!is.na(x$texts$error)), prompts = x$n_prompts, n_ctx = x$n_ctx,
                 n_seq_max = x$n_seq_max, model_bytes = x$model_bytes, context_bytes = x$context_bytes,
                 seconds = x$seconds)
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::tidy
tidy.newrllama_annotation_plan <- function(x, ...) {
  x$texts
}

#' @rdname newrllama_summaries
#' @export
summary.newrllama_coding_plan <- function(object, ...) {
  new_summary(sprintf("Coding plan: code %d more of %d texts", object$n_more, object$n),
              glance.newrllama_coding_plan(object), tidy.newrllama_coding_plan(object))
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::glance
glance.newrllama_coding_plan <- function(x, ...) {
  tibble::tibble(n_more = x$n_more, n_coded = x$n_coded, n = x$n, reachable = isTRUE(x$reachable),
                 design = x$design$kind)
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::tidy
tidy.newrllama_coding_plan <- function(x, ...) {
  tibble::tibble(label = names(x$widths), width = unname(x$widths),
                 expected_width = unname(x$expected_widths[names(x$widths)]))
}

#' @rdname newrllama_summaries
#' @export
summary.newrllama_prevalence <- function(object, ...) {
  new_summary(sprintf("Shares from the model's labels and %d coded texts of %d (PPI++)", object$n_coded[[1]],
                      object$n[[1]]), glance.newrllama_prevalence(object),
              tidy.newrllama_prevalence(object)[, intersect(c("estimand", "label", "group", "reference", "estimate",
                                                              "conf.low", "conf.high", "naive", "classical"),
                                                            names(object))])
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::tidy
tidy.newrllama_prevalence <- function(x, ...) {
  tibble::as_tibble(unclass(x))
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::glance
glance.newrllama_prevalence <- function(x, ...) {
  tibble::tibble(n_coded = x$n_coded[[1]], n = x$n[[1]], lambda = mean(x$lambda))
}

#' @rdname newrllama_summaries
#' @export
summary.newrllama_regression <- function(object, ...) {
  new_summary(sprintf("Coefficients from the model's codes and %d coded texts of %d (PPI++)", object$n_coded[[1]],
                      object$n[[1]]), glance.newrllama_regression(object),
              tidy.newrllama_regression(object)[, c("term", "estimate", "std.error", "conf.low", "conf.high",
                                                    "classical", "classical.conf.low", "classical.conf.high")])
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::tidy
tidy.newrllama_regression <- function(x, ...) {
  tibble::as_tibble(unclass(x))
}

#' @rdname newrllama_summaries
#' @exportS3Method generics::glance
glance.newrllama_regression <- function(x, ...) {
  tibble::tibble(n_coded = x$n_coded[[1]], n = x$n[[1]], lambda = x$lambda[[1]])
}
