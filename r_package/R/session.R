#' The model every verb uses when given no context
#'
#' Sets, for the rest of the R session, what [llm_annotate()],
#' [llm_vec_annotate()], [plan_annotation()], [robustness()] and
#' [llm_generate()] run on when their `context` is `NULL`, as mall's
#' `llm_use()` does. Given a model alone, the annotation verbs make a context
#' on it sized for each call's texts (every text fits a sequence, up to the
#' model's training context), and [llm_generate()] one context with
#' [context_create()]'s defaults; given settings in `...`, one context made here
#' with them; or a context or cluster given, as they are. Without a session
#' model, the annotation verbs use the embedded base model (and warn: it is not
#' for labels), and [llm_generate()] needs a context.
#'
#' @param model A model from [model_load()], a recommended model's name
#'   ([recommended_models()]: `"qwen2.5-coder-1.5b-instruct"` for annotation), a
#'   GGUF path or URL (loaded with [model_load()]), `NULL` for the embedded model, or a context from
#'   [context_create()] or a cluster from [cluster_create()] to use as they are.
#' @param ... Settings of one context made on `model` ([context_create()]'s:
#'   `n_ctx`, `n_seq_max`, `n_threads`, ...); none: a context sized for each
#'   call.
#' @param .silent Do not print what the verbs will use.
#' @return The model, context or cluster the verbs will use, invisibly.
#'   `llm_session()` gives it (`NULL` when none is set); `llm_use_none()` drops
#'   it and returns `NULL` invisibly.
#' @seealso [context_create()] for the settings.
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", n_ctx = 2048L, n_seq_max = 4L)
#' llm_vec_annotate("OPEC cut its crude output.", c("acquisition", "crude oil"))
#' llm_use_none()
#' @export
llm_use <- function(model = NULL, ..., .silent = FALSE) {
  .silent <- check_flag(.silent, ".silent")
  if (inherits(model, c("newrllama_context", "newrllama_cluster"))) {
    check_dots_empty(...)
    runner <- check_runner(model)
  } else {
    if (is.null(model) || is.character(model)) model <- model_load(model)
    check_model(model)
    runner <- if (...length() == 0) model else context_create(model, ...)
  }
  the$session <- runner
  if (!.silent) {
    message("newrllama verbs given no context now use ", session_label(runner), ".")
  }
  invisible(runner)
}

#' @rdname llm_use
#' @export
llm_session <- function() {
  the$session
}

#' @rdname llm_use
#' @export
llm_use_none <- function() {
  the$session <- NULL
  invisible(NULL)
}

# What a verb given `context` runs on: the context, else the session's (NULL when neither is set).
session_runner <- function(context) {
  if (!is.null(context)) context else the$session
}

session_label <- function(runner) {
  if (inherits(runner, "newrllama_cluster")) {
    return("a cluster")
  }
  if (inherits(runner, "newrllama_model")) {
    return(sprintf("%s, with a context sized for each call", basename(runner$path)))
  }
  sprintf("%s (n_ctx %d, n_seq_max %d)", basename(runner$model$path), as.integer(runner$n_ctx),
          as.integer(runner$n_seq_max))
}

# The context llm_generate() runs on for a session set to a model alone: made once, on first use, with
# context_create()'s defaults (generation has no texts to size a context for).
session_generation_context <- function(model) {
  if (is.null(the$generation_context) || !identical(the$generation_context$model$path, model$path) ||
      reticulate::py_is_null_xptr(the$generation_context$py)) {
    the$generation_context <- context_create(model)
  }
  the$generation_context
}
