#' A cascade from a small model to a larger one
#'
#' For [llm_annotate()] and [llm_vec_annotate()] (`cascade = cascade(...)`):
#' every text is labelled on the call's context, then the texts its model is
#' least sure of (the smallest margin between its two most probable labels)
#' are labelled again by a second, larger model, whose label and probabilities
#' replace the first's. The rule reads the first model's output alone, never a
#' human code, so the labels are one fixed function of the texts and
#' [prevalence()] and [regression()] keep valid intervals with a random coded
#' sample. Each row's `.provenance` names the model that labelled it and the
#' cascade (both models, the rule, how many texts each labelled), which
#' [methods_text()] reports. A cascade labels one question, uncalibrated,
#' without an `output` file.
#'
#' @param model The second model: a context from [context_create()], a
#'   cluster from [cluster_create()] whose workers run it, a model from
#'   [model_load()], or a GGUF path or recommended model's name.
#' @param share The share of the labelled texts to send on, the least sure
#'   first (ties to the earlier text), in (0, 1].
#' @param threshold Instead of `share`: every text whose margin is below it.
#' @return A `newrllama_cascade`.
#' @seealso [llm_annotate()], [recommended_models()].
#' @examplesIf newrllama::newrllama_available()
#' # The model is loaded when a call first labels with it.
#' cascade("qwen2.5-coder-1.5b-instruct", share = 0.3)
#' @export
cascade <- function(model, share = NULL, threshold = NULL) {
  second <- if (inherits(model, c("newrllama_context", "newrllama_model", "newrllama_cluster"))) model$py else model
  py <- with_python(python_helpers()$cascade(second, share, threshold))
  structure(list(py = py, share = share, threshold = threshold, rule = py$rule()), class = "newrllama_cascade")
}

#' @export
print.newrllama_cascade <- function(x, ...) {
  cat("<newrllama_cascade> a second model labels ", x$rule, "\n", sep = "")
  invisible(x)
}

#' Choose a cascade's share from a coded sample
#'
#' Tries each share of least-sure texts a [cascade()] could send on, with the
#' second model's labels for the coded texts among them and the first
#' model's for the rest, and gives each share's Cohen's kappa against the
#' human codes; the smallest share within `tolerance` of the best is chosen.
#' The second model labels only the coded texts for the choice. The choice
#' reads the codes, so estimates from the same codes depend on it a little:
#' choose on a pilot sample and estimate from another, or report the choice.
#'
#' @param x A data frame from [llm_annotate()] with the first model's labels of
#'   every text.
#' @param truth The human codes (a column of `x` or a vector), `NA` where a
#'   text was not coded.
#' @param second A data frame from [llm_annotate()] with the second model's
#'   labels of the coded texts, in their order.
#' @param shares The shares to try, in (0, 1] (1: the second model alone).
#' @param tolerance How far below the best kappa the chosen share may be.
#' @param label The column of labels in `x` and `second`.
#' @return A tibble, one row per share: `share`, `kappa`, `chosen`;
#'   `cascade(model, share = out$share[out$chosen])` labels with it.
#' @seealso [cascade()].
#' @examplesIf newrllama::newrllama_available() && all(newrllama::recommended_models()$cached)
#' texts <- data.frame(text = c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.",
#'                              "Chevron bought Gulf.", "Oil prices fell again."),
#'                     code = c("acquisition", "crude oil", "acquisition", NA))
#' llm_use("qwen2.5-coder-0.5b-instruct", .silent = TRUE)
#' small <- llm_annotate(texts, text, c("acquisition", "crude oil"), progress = FALSE)
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' large <- llm_annotate(texts[!is.na(texts$code), ], text, c("acquisition", "crude oil"), progress = FALSE)
#' choose_cascade_share(small, code, large)
#' @export
choose_cascade_share <- function(x, truth, second, shares = c(0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1),
                                 tolerance = 0.01, label = ".label") {
  parts <- annotation_parts(x, label)
  truth <- check_labels(column_or_values(x, substitute(truth), parent.frame(), "truth"), "truth")
  second_parts <- annotation_parts(second, label, "second")
  tolerance <- check_number(tolerance, "tolerance")
  rows <- with_python(python_helpers()$choose_cascade_share(parts, na_to_none(as.character(truth)), second_parts,
                                                           as.list(as.numeric(shares)), tolerance))
  tibble::tibble(share = unlist(rows$share), kappa = unlist(rows$kappa), chosen = unlist(rows$chosen))
}
