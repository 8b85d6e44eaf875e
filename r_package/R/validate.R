#' Check predicted labels against the truth
#'
#' Compares labels from a model (or any coder) with human coding. Pairs whose
#' truth is `NA` are left out; an `NA` prediction (a prompt that failed) counts
#' as wrong. The figures are computed by the Python library, so R and Python
#' give the same numbers.
#'
#' @param predicted A vector of predicted labels (character, factor or numbers),
#'   or a data frame from [llm_annotate()].
#' @param truth A vector of true labels of the same length.
#' @param probs Optional: the probabilities of each label, a texts x labels
#'   matrix with the labels as column names or a list of named vectors (as the
#'   `.probs` column of [llm_annotate()]; `NA` or `NULL` for a text that
#'   failed). Adds the Brier score, the expected calibration error and the
#'   reliability bins.
#' @param order_flip Whether each text's label changed between the listing
#'   orders it was scored in (`.order_flip` of [llm_annotate()]): adds
#'   `order_flip_share`.
#' @param label When `predicted` is a data frame from [llm_annotate()]: its
#'   column of labels, whose `.probs` and `.order_flip` columns are then read
#'   too (and `truth` may name a column).
#' @return A list of class `newrllama_validation`: `accuracy`, `kappa` (Cohen's
#'   kappa, an `NA` prediction being a category of its own), `macro_f1` (the
#'   mean F1 over every label seen), each with a 95% interval
#'   (`accuracy_ci`: Wilson's score interval; `kappa_ci`, `macro_f1_ci`:
#'   percentile bootstrap with a fixed seed), `n` (pairs with a known truth),
#'   `n_missing` (of them, `NA` predictions), `per_label` (a tibble with
#'   `label`, `precision`, `recall`, `f1`, `support`; 0 where undefined),
#'   `confusion` (a table of truth by prediction); with `probs`, `brier`
#'   (mean squared distance of the probabilities from the one-hot truth),
#'   `ece` (expected calibration error over 10 bins of the top probability)
#'   and `reliability` (a tibble of the bins: `low`, `high`, `n`,
#'   `confidence`, `accuracy`), drawn by `plot()`; with `order_flip`,
#'   `order_flip_share` (of the texts scored in several orders, the share whose
#'   label changed with the order).
#' @seealso [agreement()] for several coders, [calibrate_labels()].
#' @examplesIf newrllama::newrllama_available()
#' validate_labels(c("acq", "crude", "acq"), c("acq", "crude", "crude"))$kappa
#' @export
validate_labels <- function(predicted, truth, probs = NULL, order_flip = NULL, label = ".label") {
  if (is.data.frame(predicted)) {
    truth <- column_or_values(predicted, substitute(truth), parent.frame(), "truth")
    parts <- annotation_parts(predicted, label, "predicted")
    probs <- lapply(parts$probs, function(p) if (is.null(p)) NULL else stats::setNames(unlist(p), unlist(parts$names)))
    order_flip <- vapply(parts$flips, function(f) if (is.null(f)) NA else f, logical(1))
    predicted <- predicted[[label]]
  }
  if (!is.null(order_flip) && (!is.logical(order_flip) || length(order_flip) != length(predicted))) {
    abort_invalid(sprintf("`order_flip` must be TRUE/FALSE/NA for each of the %d labels, not %s", length(predicted),
                          describe(order_flip)))
  }
  predicted <- check_labels(predicted, "predicted")
  truth <- check_labels(truth, "truth")
  if (length(predicted) != length(truth)) {
    abort_invalid(sprintf("`predicted` has %d labels but `truth` has %d", length(predicted), length(truth)))
  }
  if (is.character(predicted) || is.character(truth)) {
    # 1 and "1" are one label (a factor of numbers against numbers).
    predicted <- as.character(predicted)
    truth <- as.character(truth)
  }
  py_probs <- if (is.null(probs)) NULL else probability_rows(probs, length(truth))
  v <- with_python(python_helpers()$validate(na_to_none(predicted), na_to_none(truth), py_probs,
                                             if (is.null(order_flip)) NULL else na_to_none(order_flip)))
  scores <- python_helpers()$label_scores(v)
  bins <- python_helpers()$reliability(v)
  known <- !is.na(truth)
  structure(
    list(
      accuracy = v$accuracy,
      kappa = v$kappa,
      macro_f1 = v$macro_f1,
      accuracy_ci = unlist(v$accuracy_ci),
      kappa_ci = unlist(v$kappa_ci),
      macro_f1_ci = unlist(v$macro_f1_ci),
      n = v$n,
      n_missing = v$n_missing,
      per_label = tibble::tibble(
        label = as.character(unlist(scores$label)),
        precision = as.numeric(unlist(scores$precision)),
        recall = as.numeric(unlist(scores$recall)),
        f1 = as.numeric(unlist(scores$f1)),
        support = as.integer(unlist(scores$support))
      ),
      confusion = table(truth = truth[known], predicted = predicted[known], useNA = "ifany"),
      brier = if (is.null(v$brier)) NA_real_ else v$brier,
      ece = if (is.null(v$ece)) NA_real_ else v$ece,
      order_flip_share = if (is.null(v$order_flip_share)) NA_real_ else v$order_flip_share,
      reliability = tibble::tibble(low = as.numeric(unlist(bins$low)), high = as.numeric(unlist(bins$high)),
                               n = as.integer(unlist(bins$n)), confidence = as.numeric(unlist(bins$confidence)),
                               accuracy = as.numeric(unlist(bins$accuracy)))
    ),
    class = "newrllama_validation"
  )
}

# Probabilities (a matrix with the labels as column names, or a list of named vectors as in llm_annotate()'s
# `.probs`) as Python's list of label -> probability dicts (NULL for a text that failed).
probability_rows <- function(probs, n, call = sys.call(-1)) {
  if (is.matrix(probs) && is.numeric(probs) && !is.null(colnames(probs))) {
    probs <- lapply(seq_len(nrow(probs)), function(i) probs[i, ])
  } else if (!is.list(probs) || !all(vapply(probs, function(p) is.null(p) || (is.numeric(p) && !is.null(names(p))),
                                            logical(1)))) {
    abort_invalid(sprintf(paste("`probs` must be a numeric matrix with the labels as column names or a list of",
                                "named numeric vectors, not %s"), describe(probs)), call = call)
  }
  if (length(probs) != n) {
    abort_invalid(sprintf("`probs` has %d rows but there are %d labels", length(probs), n), call = call)
  }
  lapply(probs, function(p) if (is.null(p) || anyNA(p)) NULL else as.list(p))
}

#' @export
plot.newrllama_validation <- function(x, ...) {
  if (nrow(x$reliability) == 0) {
    abort_invalid("a reliability plot needs the probabilities: validate_labels(predicted, truth, probs = ...)")
  }
  graphics::plot(c(0, 1), c(0, 1), type = "n", xlab = "top probability", ylab = "share correct",
                 main = sprintf("Reliability (ECE %.3f, n = %d)", x$ece, x$n), ...)
  graphics::abline(0, 1, lty = 2, col = "grey")
  graphics::lines(x$reliability$confidence, x$reliability$accuracy, type = "b", pch = 19)
  invisible(x)
}

#' @export
print.newrllama_validation <- function(x, ...) {
  cat("<newrllama_validation> ", x$n, " labels", if (x$n_missing) paste0(" (", x$n_missing, " missing)"), "\n",
      sep = "")
  cat(sprintf("  accuracy %.3f [%.3f, %.3f], kappa %.3f [%.3f, %.3f], macro-F1 %.3f [%.3f, %.3f] (95%% intervals)\n",
              x$accuracy, x$accuracy_ci[1], x$accuracy_ci[2], x$kappa, x$kappa_ci[1], x$kappa_ci[2],
              x$macro_f1, x$macro_f1_ci[1], x$macro_f1_ci[2]))
  if (!is.na(x$brier)) {
    cat(sprintf("  Brier score %.3f, expected calibration error %.3f\n", x$brier, x$ece))
  }
  if (!is.null(x$order_flip_share) && !is.na(x$order_flip_share)) {
    cat(sprintf("  label changed with the listing order on %.1f%% of the texts\n", 100 * x$order_flip_share))
  }
  invisible(x)
}

#' Agreement among coders: Krippendorff's alpha
#'
#' Krippendorff's alpha for any number of coders, with missing ratings,
#' computed from its definition (a coincidence matrix of the values paired
#' within each unit; units with fewer than two ratings are left out), and the
#' share of agreeing pairs of ratings within units.
#'
#' @param ratings A coders x units matrix or data frame, `NA` for a missing
#'   rating (one row per coder, one column per unit).
#' @param level The level of measurement: `"nominal"`, `"ordinal"` or
#'   `"interval"` (the last two need numbers).
#' @return A list of class `newrllama_agreement`: `alpha` (`NaN` when every
#'   rating has the same value), `percent_agreement`, `level`, `n_units`,
#'   `n_coders`.
#' @seealso [validate_labels()] for one coder against the truth.
#' @examplesIf newrllama::newrllama_available()
#' ratings <- rbind(
#'   c(1, 2, 3, 3, 2, 1, 4, 1, 2, NA, NA, NA),
#'   c(1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NA, 3),
#'   c(NA, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NA),
#'   c(1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NA)
#' )
#' agreement(ratings, "interval")$alpha
#' @export
agreement <- function(ratings, level = c("nominal", "ordinal", "interval")) {
  level <- match.arg(level)
  if (is.data.frame(ratings)) {
    ratings <- as.matrix(ratings)
  }
  if (!is.matrix(ratings) || nrow(ratings) < 1 || ncol(ratings) < 1) {
    abort_invalid("`ratings` must be a coders x units matrix or data frame (one row per coder)")
  }
  if (is.factor(ratings[1, 1])) {
    ratings <- matrix(as.character(ratings), nrow(ratings))
  }
  rows <- lapply(seq_len(nrow(ratings)), function(i) na_to_none(check_labels(ratings[i, ], "ratings")))
  a <- with_python(python_helpers()$agreement(rows, level))
  structure(
    list(alpha = a$alpha, percent_agreement = a$percent_agreement, level = a$level, n_units = a$n_units,
         n_coders = a$n_coders),
    class = "newrllama_agreement"
  )
}

#' @export
print.newrllama_agreement <- function(x, ...) {
  cat(sprintf("<newrllama_agreement> Krippendorff's alpha (%s) %.3f; %d coders, %d units; %.1f%% of pairs agree\n",
              x$level, x$alpha, x$n_coders, x$n_units, 100 * x$percent_agreement))
  invisible(x)
}

check_labels <- function(x, name, call = sys.call(-1)) {
  if (is.factor(x)) {
    x <- as.character(x)
  }
  if (!is.atomic(x) || !is.null(dim(x)) || !(is.character(x) || is.numeric(x) || is.logical(x))) {
    abort_invalid(sprintf("`%s` must be a vector of labels (character, factor or numbers), not %s", name, describe(x)),
                  call = call)
  }
  x
}

# A list with NULL (Python None) where x is NA: reticulate would pass a character NA as the string "NA".
na_to_none <- function(x) {
  out <- as.list(unname(x)) # a named list would reach Python as a dict
  out[is.na(x)] <- list(NULL)
  out
}
