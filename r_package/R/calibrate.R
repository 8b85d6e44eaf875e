#' Calibrate labels on a hand-coded sample
#'
#' Fits a small correction of the label scores on texts coded by hand: each
#' label's probability becomes proportional to
#' `exp(scale * log(p) + offset[label])`, with `p` the order-free probability
#' from [llm_vec_annotate()] and a penalty pulling `scale` to 1 and the offsets to
#' 0, so that a few dozen coded texts are enough. The penalty's strength is
#' chosen by cross-validation on the coded texts unless given; with `balanced`
#' every label weighs the same in the fit, however rare in the coded sample
#' (the calibrated probabilities are then those of a corpus where the labels
#' are equally frequent). Its accuracy and kappa are cross-validated on the
#' coded sample (`folds`-fold, a fixed seed).
#'
#' @param x The result of [llm_vec_annotate()] for the coded texts.
#' @param truth Their true labels (`NA` where unknown: left out, as are texts
#'   that failed).
#' @param penalty The strength of the penalty (a positive number), or `NULL`
#'   to choose it by cross-validation.
#' @param folds The number of folds of the cross-validation.
#' @param balanced Weigh every label alike (`TRUE`) or by its share of the
#'   coded texts (`FALSE`).
#' @return A `newrllama_calibration`: `labels`, `scale`, `offsets` (a named
#'   numeric vector), `n` (the coded texts used), `cv_accuracy`, `cv_kappa`,
#'   `penalty` (the one used), `balanced`.
#'   `predict(cal, y)` applies it to the result `y` of [llm_vec_annotate()];
#'   `llm_vec_annotate(..., calibration = cal)` applies it as it labels.
#' @seealso [validate_labels()], [least_confident()].
#' @examplesIf newrllama::newrllama_available()
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.", "Chevron bought Gulf.")
#' coded <- llm_vec_annotate(texts, c("acquisition", "crude oil"), progress = FALSE)
#' cal <- calibrate_labels(coded, c("acquisition", "crude oil", "acquisition"))
#' predict(cal, coded)
#' @export
calibrate_labels <- function(x, truth, penalty = NULL, folds = 5L, balanced = TRUE) {
  parts <- annotation_parts(x, "x")
  truth <- check_labels(truth, "truth")
  if (!is.null(penalty)) penalty <- check_number(penalty, "penalty", min = 0, min_open = TRUE)
  folds <- check_count(folds, "folds", min = 2)
  balanced <- check_flag(balanced, "balanced")
  cal <- with_python(do.call(python_helpers()$calibrate, c(unname(parts), list(na_to_none(as.character(truth)), penalty,
                                                                       folds, balanced))))
  calibration_object(cal)
}

# The R face of a Python Calibration; `json` lets it outlive the Python object (saveRDS(), a new session).
calibration_object <- function(cal) {
  structure(
    list(py = cal, labels = unlist(cal$labels), scale = cal$scale, offsets = unlist(cal$offsets), n = cal$n,
         cv_accuracy = cal$cv_accuracy, cv_kappa = cal$cv_kappa, penalty = cal$penalty, balanced = cal$balanced,
         json = python_helpers()$calibration_json(cal)),
    class = "newrllama_calibration"
  )
}

#' Save a calibration to a file and read it back
#'
#' A calibration is kept in a small JSON file with what its coded texts'
#' labels were made by (the model's SHA-256, the codebook, `debias`), which
#' Python's `newrllama.Calibration.load()` reads too. `saveRDS()` works as
#' well.
#'
#' @param calibration A calibration from [calibrate_labels()].
#' @param path The file.
#' @return `write_calibration()`: `path`, invisibly. `read_calibration()`: the
#'   calibration.
#' @examplesIf newrllama::newrllama_available()
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.", "Chevron bought Gulf.")
#' coded <- llm_vec_annotate(texts, c("acquisition", "crude oil"), progress = FALSE)
#' cal <- calibrate_labels(coded, c("acquisition", "crude oil", "acquisition"), folds = 3)
#' path <- tempfile(fileext = ".json")
#' write_calibration(cal, path)
#' read_calibration(path)
#' @export
write_calibration <- function(calibration, path) {
  calibration <- check_calibration(calibration)
  path <- check_string(path, "path")
  with_python(calibration$py$save(path))
  invisible(path)
}

#' @rdname write_calibration
#' @export
read_calibration <- function(path) {
  path <- check_string(path, "path")
  calibration_object(with_python(py_newrllama()$Calibration$load(path)))
}

#' Calibrated labels to estimate from with the texts they were calibrated on
#'
#' [prevalence()] and [regression()] give valid intervals when the model's
#' probabilities do not depend on the coded texts; a calibration fitted on
#' those same texts makes them depend. `cross_fit()` calibrates by
#' cross-prediction (Zrnic and Candes, 2024): the coded texts are split into
#' `folds`, each coded text gets the calibration fitted on the other folds,
#' and every uncoded text the average of the folds' calibrations.
#'
#' @inheritParams calibrate_labels
#' @param truth The human codes, `NA` where a text is not coded.
#' @param seed The seed of the split into folds.
#' @return Labels as [llm_vec_annotate()] returns them, calibrated.
#' @seealso [calibrate_labels()], [prevalence()].
#' @examplesIf newrllama::newrllama_available()
#' labels <- c("acquisition", "crude oil")
#' x <- rep(c("acquisition", "crude oil"), 20)
#' attr(x, "probs") <- cbind(acquisition = rep(c(0.7, 0.4), 20), `crude oil` = rep(c(0.3, 0.6), 20))
#' truth <- ifelse(seq_along(x) %% 2 == 0, x, NA)
#' prevalence(cross_fit(x, truth), truth)
#' @export
cross_fit <- function(x, truth, folds = 5L, seed = 0L, penalty = NULL, balanced = TRUE) {
  parts <- annotation_parts(x, "x")
  truth <- check_labels(truth, "truth")
  folds <- check_count(folds, "folds", min = 2)
  seed <- check_count(seed, "seed")
  if (!is.null(penalty)) penalty <- check_number(penalty, "penalty", min = 0, min_open = TRUE)
  balanced <- check_flag(balanced, "balanced")
  out <- with_python(do.call(python_helpers()$cross_fit, c(unname(parts), list(na_to_none(as.character(truth)), folds,
                                                                               seed, penalty, balanced))))
  result <- label_vector(out, parts$names, names(x), warn = FALSE)
  attr(result, "order_flip") <- attr(x, "order_flip")
  result
}

#' @importFrom stats predict
#' @export
predict.newrllama_calibration <- function(object, newdata, ...) {
  parts <- annotation_parts(newdata, "newdata")
  object <- check_calibration(object, "object")
  out <- with_python(do.call(python_helpers()$calibration_apply, c(list(object$py), unname(parts))))
  result <- label_vector(out, parts$names, names(newdata), warn = FALSE)
  attr(result, "order_flip") <- attr(newdata, "order_flip")
  result
}

#' @export
print.newrllama_calibration <- function(x, ...) {
  cat("<newrllama_calibration> ", length(x$labels), " labels, fitted on ", x$n, " coded texts\n", sep = "")
  cat(sprintf("  cross-validated accuracy %.3f, kappa %.3f; scale %.2f, penalty %g%s\n", x$cv_accuracy, x$cv_kappa,
              x$scale, x$penalty, if (isTRUE(x$balanced)) ", labels weighed alike" else ""))
  invisible(x)
}

#' Texts to code by hand: the least confident labels
#'
#' The texts whose top probability is closest to the second (the smallest
#' margin), the least sure first: where a human coder adds the most.
#'
#' @param x The result of [llm_vec_annotate()].
#' @param n How many texts.
#' @return Integer positions in `x` (texts that failed are not among them).
#' @examplesIf newrllama::newrllama_available()
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.")
#' x <- llm_vec_annotate(texts, c("acquisition", "crude oil"), progress = FALSE)
#' least_confident(x, 1)
#' @export
least_confident <- function(x, n) {
  parts <- annotation_parts(x, "x")
  n <- check_count(n, "n")
  as.integer(unlist(with_python(python_helpers()$least_confident(parts$labels, parts$names, parts$probs,
                                                                 parts$errors, n)))) + 1L
}

# llm_vec_annotate()'s result, taken apart for Python: labels, the label names, and each matrix's rows.
annotation_parts <- function(x, name, call = sys.call(-1)) {
  probs <- attr(x, "probs")
  if (!is.character(x) || !is.matrix(probs) || is.null(colnames(probs)) || nrow(probs) != length(x)) {
    abort_invalid(sprintf("`%s` must be the result of llm_vec_annotate() (labels with attr(, \"probs\")), not %s",
                          name, describe(x)), call = call)
  }
  rows <- function(m) {
    if (is.null(m)) m <- probs
    lapply(seq_len(nrow(m)), function(i) if (anyNA(m[i, ])) NULL else unname(m[i, ]))
  }
  errors <- rep(list(NULL), length(x))
  errors[is.na(x)] <- as.list(rep("failed", sum(is.na(x))))
  list(labels = na_to_none(unname(x)), names = colnames(probs), probs = rows(probs),
       raw_probs = rows(attr(x, "raw_probs")), order_free_probs = rows(attr(x, "order_free_probs")), errors = errors,
       provenance = attr(x, "provenance"))
}
