#' Ordinal codes: the mean score, and agreement that counts near misses
#'
#' `mean_score()` estimates the mean of an ordinal code (a 1-5 tone, none /
#' some / most) over the texts on its scale, from the model's probabilities on
#' every text and a random sample coded by hand (PPI++), beside the model's
#' expected scores alone (naive) and the coded texts alone. Codes named in
#' `unclear` (such as `"unclear"` or `"none of these"`, which coders, and the
#' model when offered it, may give) are off the scale: their texts are left
#' out of the mean (the mean is the ratio of the scores' total to the number
#' of texts on the scale, with a delta-method interval), and their share is a
#' share like any label's in [prevalence()].
#' `weighted_kappa()` is Cohen's kappa weighted by how far apart two codes
#' stand on the scale.
#'
#' @param x A data frame from [llm_annotate()] (labels with probabilities).
#' @param truth The human codes: a column of `x` or a vector, `NA` where a
#'   text was not coded.
#' @param scores The labels on the scale with their scores, a named numeric
#'   vector such as `c(negative = -1, neutral = 0, positive = 1)`.
#' @param unclear Labels off the scale.
#' @param alpha One minus the intervals' level.
#' @param label The column of labels in `x`.
#' @param predicted,scale,weights For `weighted_kappa()`: the labels given, the
#'   labels of the scale in order, and `"linear"` or `"quadratic"`
#'   disagreement weights.
#' @return `mean_score()`: a one-row tibble: `estimate`, `std.error`,
#'   `conf.low`, `conf.high`, `lambda`, `naive`, `naive.low`, `naive.high`,
#'   `classical`, `classical.std.error`, `classical.conf.low`,
#'   `classical.conf.high`, `n_coded`, `n_unclear`, `n`. `weighted_kappa()`:
#'   a one-row tibble `kappa`, `conf.low`, `conf.high` (its bootstrap
#'   interval at 95% confidence).
#' @examplesIf newrllama::newrllama_available()
#' weighted_kappa(c("1", "2", "3", "3"), c("1", "3", "3", "2"), scale = c("1", "2", "3"))
#' @export
mean_score <- function(x, truth, scores, unclear = NULL, alpha = 0.05, label = ".label") {
  parts <- annotation_parts(x, label)
  truth <- check_labels(column_or_values(x, substitute(truth), parent.frame(), "truth"), "truth")
  if (!is.numeric(scores) || is.null(names(scores)) || any(!nzchar(names(scores)))) {
    abort_invalid("`scores` must be a named numeric vector: label = score, for the labels on the scale")
  }
  alpha <- check_number(alpha, "alpha")
  out <- with_python(python_helpers()$mean_score(parts, na_to_none(as.character(truth)), as.list(scores),
                                                 unclear = as.list(as.character(unclear)), alpha = alpha))
  for (message in unlist(out[[2]])) warn_failed_texts(message)
  columns_frame(out[[1]])
}

#' @rdname mean_score
#' @export
weighted_kappa <- function(predicted, truth, scale, weights = c("quadratic", "linear")) {
  weights <- match.arg(weights)
  out <- with_python(python_helpers()$weighted_kappa(na_to_none(as.character(predicted)),
                                                     na_to_none(as.character(truth)), as.list(as.character(scale)),
                                                     weights))
  tibble::tibble(kappa = out[[1]], conf.low = out[[2]][[1]], conf.high = out[[2]][[2]])
}

#' Each label's share when a text may carry several
#'
#' For texts that may carry several labels, ask each label as a yes/no
#' question of a codebook (`llm_annotate(d, text, codebook = list(acquisition
#' = c("yes", "no"), "crude oil" = c("yes", "no")))`); `label_shares()`
#' estimates each label's share of the texts from the answers and the human
#' codes (for each coded text the labels it carries), each by PPI++ on its own
#' question as [prevalence()] does. The shares need not sum to one.
#'
#' @param x A data frame from [llm_annotate()] with a codebook of yes/no
#'   questions (columns `<question>.label` and `<question>.probs`).
#' @param truth Per text the labels a coder gave it (a list of character
#'   vectors, `character()` for none), `NULL` or `NA` where not coded: a
#'   list-column of `x` or a list.
#' @param questions The questions (labels) to estimate; by default every
#'   `<question>.label` column of `x`.
#' @param yes The answer that means a text has the label.
#' @param alpha One minus the intervals' level.
#' @return A tibble as [prevalence()]'s, one row per label.
#' @export
label_shares <- function(x, truth, questions = NULL, yes = "yes", alpha = 0.05) {
  truth <- column_or_values(x, substitute(truth), parent.frame(), "truth")
  if (!is.list(truth)) {
    abort_invalid("`truth` must be a list of character vectors (the labels of each coded text), NULL or NA where not coded")
  }
  if (is.null(questions)) questions <- sub("\\.label$", "", grep(".\\.label$", names(x), value = TRUE))
  parts <- lapply(stats::setNames(nm = questions), function(q) annotation_parts(x, paste0(q, ".label")))
  codes <- lapply(truth, function(t) if (is.null(t) || (length(t) == 1 && is.na(t))) NULL else as.list(as.character(t)))
  cols <- with_python(python_helpers()$label_shares(parts, codes, yes = check_string(yes, "yes"),
                                                    alpha = check_number(alpha, "alpha")))
  tibble::new_tibble(columns_frame(cols), class = "newrllama_prevalence")
}
