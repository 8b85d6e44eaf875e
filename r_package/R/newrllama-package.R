#' newrllama: run many prompts through a local GGUF model
#'
#' The R interface to the newrllama Python library, with the function names
#' and arguments of the older package newrllama4. Load a model with
#' [model_load()], make a context with [context_create()], then call
#' [generate_text()] or [generate_parallel()]. Errors are conditions of class
#' `newrllama_error`; bad arguments have class `newrllama_invalid_argument`.
#'
#' Python is found in this order: the environment variable `NEWRLLAMA_PYTHON`,
#' then `RETICULATE_PYTHON`, then the virtualenv `r-newrllama` made by
#' [install_newrllama()].
#'
#' @keywords internal
"_PACKAGE"
