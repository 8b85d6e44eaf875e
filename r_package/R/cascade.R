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
