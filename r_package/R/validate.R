#' Check predicted labels against the truth
#'
#' Compares labels from a model (or any coder) with human coding. Pairs whose
#' truth is `NA` are left out; an `NA` prediction (a prompt that failed) counts
#' as wrong. The figures are computed by the Python library, so R and Python
#' give the same numbers.
#'
#' @param predicted A vector of predicted labels (character, factor or numbers).
#' @param truth A vector of true labels of the same length.
#' @return A list of class `newrllama_validation`: `accuracy`, `kappa` (Cohen's
#'   kappa, an `NA` prediction being a category of its own), `macro_f1` (the
#'   mean F1 over every label seen), `n` (pairs with a known truth),
#'   `n_missing` (of them, `NA` predictions), `per_label` (a data frame with
#'   `label`, `precision`, `recall`, `f1`, `support`; 0 where undefined) and
#'   `confusion` (a table of truth by prediction).
#' @seealso [agreement()] for several coders.
#' @examplesIf newrllama::newrllama_available()
#' validate(c("acq", "crude", "acq"), c("acq", "crude", "crude"))$kappa
#' @export
validate <- function(predicted, truth) {
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
  v <- with_python(py_newrllama()$validate(na_to_none(predicted), na_to_none(truth)))
  scores <- python_helpers()$label_scores(v)
  known <- !is.na(truth)
  structure(
    list(
      accuracy = v$accuracy,
      kappa = v$kappa,
      macro_f1 = v$macro_f1,
      n = v$n,
      n_missing = v$n_missing,
      per_label = data.frame(
        label = unlist(scores[[1]]),
        precision = as.numeric(unlist(scores[[2]])),
        recall = as.numeric(unlist(scores[[3]])),
        f1 = as.numeric(unlist(scores[[4]])),
        support = as.integer(unlist(scores[[5]])),
        stringsAsFactors = FALSE
      ),
      confusion = table(truth = truth[known], predicted = predicted[known], useNA = "ifany")
    ),
    class = "newrllama_validation"
  )
}

#' @export
print.newrllama_validation <- function(x, ...) {
  cat("<newrllama_validation> ", x$n, " labels", if (x$n_missing) paste0(" (", x$n_missing, " missing)"), "\n",
      sep = "")
  cat(sprintf("  accuracy %.3f, kappa %.3f, macro-F1 %.3f\n", x$accuracy, x$kappa, x$macro_f1))
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
#' @seealso [validate()] for one coder against the truth.
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
  a <- with_python(py_newrllama()$agreement(rows, level))
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
