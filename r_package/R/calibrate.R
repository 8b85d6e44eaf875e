#' Calibrate labels on a hand-coded sample
#'
#' Fits a small correction of the label scores on texts coded by hand: each
#' label's probability becomes proportional to
#' `exp(scale * log(p) + offset[label])`, with `p` the order-free probability
#' from [llm_annotate()] and a penalty pulling `scale` to 1 and the offsets to
#' 0, so that a few dozen coded texts are enough. Unless `penalty` is given,
#' cross-validation on the coded texts decides whether to calibrate at all and
#' how strongly, by `criterion`: `"kappa"` calibrates only where the held-out
#' coded texts get labels that agree with their codes better than the model's
#' own labels do, `"log-loss"` where their probabilities are predicted better
#' (what [prevalence()] and [regression()] use). With `balanced`
#' every label weighs the same in the fit, however rare in the coded sample
#' (the calibrated probabilities are then those of a corpus where the labels
#' are equally frequent). Its accuracy and kappa are cross-validated on the
#' coded sample (`folds`-fold, a fixed seed).
#'
#' Labels scored in one order (the default `debias = "auto"` on short texts,
#' without `calibration`) calibrate worse than labels scored in two: a warning
#' of class `newrllama_one_order_scores` says so, and
#' `llm_annotate(..., calibration = codes)` (the human codes, `NA` where a text
#' is not coded) scores every text in two orders, fits on the coded ones and
#' applies the fit, in one call.
#'
#' @param x A data frame from [llm_annotate()] holding the coded texts.
#' @param truth Their true labels (`NA` where unknown: left out, as are texts
#'   that failed): a column of `x` (bare or a string) or a vector.
#' @param penalty The strength of the penalty (a positive number), or `NULL`
#'   to choose it by cross-validation.
#' @param folds The number of folds of the cross-validation.
#' @param balanced Weigh every label alike (`TRUE`) or by its share of the
#'   coded texts (`FALSE`).
#' @param criterion What decides whether to calibrate: `"kappa"` (the labels)
#'   or `"log-loss"` (the probabilities).
#' @param label The column of labels in `x` (or `newdata`); its companions are
#'   read beside it as [llm_annotate()] names them (`.probs`, or
#'   `<question>.probs` beside `<question>.label`).
#' @return A `newrllama_calibration`: `labels`, `scale`, `offsets` (a named
#'   numeric vector), `n` (the coded texts used), `cv_accuracy`, `cv_kappa`,
#'   `penalty` (the one used; `Inf`: no calibration), `calibrated` (`FALSE`
#'   when the coded texts chose no calibration: it then changes nothing),
#'   `balanced`, `criterion`.
#'   `predict(cal, y)` applies it to a data frame `y` from [llm_annotate()]
#'   (its label columns replaced by calibrated ones);
#'   `llm_annotate(..., calibration = cal)` applies it as it labels.
#' @seealso [validate_labels()], [least_confident()].
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.", "Chevron bought Gulf.")
#' coded <- llm_annotate(data.frame(text = texts), text, c("acquisition", "crude oil"), progress = FALSE)
#' cal <- calibrate_labels(coded, c("acquisition", "crude oil", "acquisition"))
#' predict(cal, coded)
#' @export
calibrate_labels <- function(x, truth, penalty = NULL, folds = 5L, balanced = TRUE, criterion = "kappa",
                             label = ".label") {
  parts <- annotation_parts(x, label)
  truth <- check_labels(column_or_values(x, substitute(truth), parent.frame(), "truth"), "truth")
  if (!is.null(penalty)) penalty <- check_number(penalty, "penalty", min = 0, min_open = TRUE)
  folds <- check_count(folds, "folds", min = 2)
  balanced <- check_flag(balanced, "balanced")
  criterion <- check_string(criterion, "criterion")
  out <- with_python(python_helpers()$calibrate(parts, na_to_none(as.character(truth)), penalty = penalty,
                                                folds = folds, balanced = balanced, criterion = criterion))
  for (message in unlist(out[[2]])) warn_classed(message, "newrllama_one_order_scores")
  calibration_object(out[[1]])
}

# The R face of a Python Calibration; `json` lets it outlive the Python object (saveRDS(), a new session).
calibration_object <- function(cal) {
  structure(
    list(py = cal, labels = unlist(cal$labels), scale = cal$scale, offsets = unlist(cal$offsets), n = cal$n,
         cv_accuracy = cal$cv_accuracy, cv_kappa = cal$cv_kappa, penalty = cal$penalty, calibrated = cal$calibrated,
         balanced = cal$balanced, criterion = cal$criterion,
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
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.", "Chevron bought Gulf.")
#' coded <- llm_annotate(data.frame(text = texts), text, c("acquisition", "crude oil"), progress = FALSE)
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
  calibration_object(with_python(python_helpers()$Calibration$load(path)))
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
#' @param truth The human codes, `NA` where a text is not coded: a column of
#'   `x` or a vector.
#' @param seed The seed of the split into folds.
#' @param criterion What decides, in each fold, whether to calibrate:
#'   `"log-loss"` (the default here: the probabilities, which [prevalence()]
#'   and [regression()] estimate from) or `"kappa"` (the labels).
#' @return `x` with its label columns calibrated.
#' @seealso [calibrate_labels()], [prevalence()].
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' texts <- rep(c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."), 8)
#' x <- llm_annotate(data.frame(text = texts), text, c("acquisition", "crude oil"), progress = FALSE)
#' x$code <- c(rep(c("acquisition", "crude oil"), 6), NA, NA, NA, NA)
#' prevalence(cross_fit(x, code, folds = 2), code)
#' @export
cross_fit <- function(x, truth, folds = 5L, seed = 0L, penalty = NULL, balanced = TRUE, criterion = "log-loss",
                      label = ".label") {
  parts <- annotation_parts(x, label)
  truth <- check_labels(column_or_values(x, substitute(truth), parent.frame(), "truth"), "truth")
  folds <- check_count(folds, "folds", min = 2)
  seed <- check_count(seed, "seed")
  if (!is.null(penalty)) penalty <- check_number(penalty, "penalty", min = 0, min_open = TRUE)
  balanced <- check_flag(balanced, "balanced")
  criterion <- check_string(criterion, "criterion")
  out <- with_python(python_helpers()$cross_fit(parts, na_to_none(as.character(truth)), folds = folds, seed = seed,
                                                penalty = penalty, balanced = balanced, criterion = criterion))
  relabelled(x, out, parts, label)
}

#' @param object A calibration from [calibrate_labels()].
#' @param newdata A data frame from [llm_annotate()].
#' @param ... Unused.
#' @rdname calibrate_labels
#' @importFrom stats predict
#' @export
predict.newrllama_calibration <- function(object, newdata, label = ".label", ...) {
  check_dots_empty(...)
  parts <- annotation_parts(newdata, label, "newdata")
  object <- check_calibration(object, "object")
  out <- with_python(python_helpers()$calibration_apply(object$py, parts))
  relabelled(newdata, out, parts, label)
}

# `x` with its labels and their columns replaced by Python's calibrated ones (the order flips and the tokens cut are
# the model's, kept).
relabelled <- function(x, out, parts, label) {
  out$order_flip <- parts$flips
  out$tokens_cut <- parts$tokens_cut
  put_annotation_columns(x, out, unlist(parts$names), label)
}

#' @export
print.newrllama_calibration <- function(x, ...) {
  cat("<newrllama_calibration> ", length(x$labels), " labels, fitted on ", x$n, " coded texts\n", sep = "")
  if (isFALSE(x$calibrated)) {
    cat(sprintf("  no calibration chosen (by cross-validated %s): it changes nothing\n", x$criterion))
  }
  cat(sprintf("  cross-validated accuracy %.3f, kappa %.3f; scale %.2f, penalty %g%s\n", x$cv_accuracy, x$cv_kappa,
              x$scale, x$penalty, if (isTRUE(x$balanced)) ", labels weighed alike" else ""))
  invisible(x)
}

#' Texts to code by hand: the least confident labels
#'
#' The texts whose top probability is closest to the second (the smallest
#' margin), the least sure first: where a human coder adds the most.
#'
#' @inheritParams calibrate_labels
#' @param n How many texts.
#' @return Integer positions in `x` (texts that failed are not among them),
#'   of class `newrllama_picked`: [write_coding_sheet()] records that they were
#'   picked, so that the estimates refuse their codes (they serve to
#'   calibrate).
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.")
#' x <- llm_annotate(data.frame(text = texts), text, c("acquisition", "crude oil"), progress = FALSE)
#' least_confident(x, 1)
#' @export
least_confident <- function(x, n, label = ".label") {
  parts <- annotation_parts(x, label)
  n <- check_count(n, "n")
  positions <- as.integer(unlist(with_python(python_helpers()$least_confident(parts, n)))) + 1L
  structure(positions, class = c("newrllama_picked", "integer"))
}

#' @export
print.newrllama_picked <- function(x, ...) {
  cat("<newrllama_picked> positions picked by the model's doubt (codes of them calibrate, not estimate)\n")
  print(as.integer(x), ...)
  invisible(x)
}
