#' How the coded texts were drawn
#'
#' The design of the coded sample, which [prevalence()], [regression()] and
#' [methods_text()] take and [plan_coding()] returns. PPI's intervals hold when
#' the coded texts are a probability sample of the texts: a simple random
#' sample (`"random"`), a random sample within each stratum (`"stratified"`,
#' with `strata`), or texts drawn one by one with known probabilities
#' (`"probabilities"`, with `inclusion_probs`, as an active plan gives them).
#' Texts picked rather than drawn (`"picked"`, saying `how`: for example the
#' least confident labels from [least_confident()]) serve to calibrate, and
#' estimates from them are refused with the reason.
#'
#' @param kind `"random"`, `"stratified"`, `"probabilities"` or `"picked"`.
#' @param strata For `"stratified"`: one stratum per text (the source, the
#'   year, ...).
#' @param inclusion_probs For `"probabilities"`: each text's probability of
#'   being coded.
#' @param how For `"picked"`: how the texts were picked, as the methods
#'   paragraph should say it ("as the least confident labels").
#' @param finite `TRUE`: the estimand is the share among these texts, and the
#'   coded share of them narrows the intervals (finite-population correction);
#'   `FALSE`: the process the texts come from (published PPI++).
#' @return An object of class `newrllama_coding_design`.
#' @examples
#' coding_design("stratified", strata = c("wire", "wire", "blog", "blog", "blog"))
#' @export
coding_design <- function(kind = c("random", "stratified", "probabilities", "picked"), strata = NULL,
                          inclusion_probs = NULL, how = NULL, finite = TRUE) {
  kind <- match.arg(kind)
  finite <- check_flag(finite, "finite")
  if (!is.null(strata)) strata <- na_to_none(check_labels(strata, "strata"))
  if (!is.null(inclusion_probs)) inclusion_probs <- as.list(numeric_values(inclusion_probs, "`inclusion_probs`"))
  if (!is.null(how)) how <- check_string(how, "how")
  new_coding_design(with_python(python_helpers()$coding_design(kind, strata, inclusion_probs, how, finite)))
}

new_coding_design <- function(py) {
  structure(list(py = py, kind = py$kind), class = "newrllama_coding_design")
}

#' @export
print.newrllama_coding_design <- function(x, ...) {
  d <- x$py
  what <- switch(x$kind,
    random = "a simple random sample",
    stratified = sprintf("a random sample within %d strata", length(unique(unlist(d$strata)))),
    probabilities = "texts drawn one by one with known probabilities",
    picked = sprintf("texts picked %s (for calibration, not estimates)", d$how)
  )
  cat(sprintf("<newrllama coding design: %s%s>\n", what,
              if (x$kind %in% c("random", "stratified") && !isTRUE(d$finite)) ", no finite-population correction" else ""))
  invisible(x)
}

# The Python design behind `design` (NULL: the library's default, a simple random sample).
python_design <- function(design, call = sys.call(-1)) {
  if (is.null(design)) {
    return(NULL)
  }
  check_class(design, "newrllama_coding_design", "design", "coding_design", call = call)
  design$py
}
