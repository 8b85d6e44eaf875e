# Conditions signalled by the package. Every error has class `newrllama_error`
# so that callers can catch all of them with one handler, plus a subclass that
# says what went wrong.

newrllama_condition <- function(message, class, call = NULL, ...) {
  structure(
    class = c(class, "newrllama_error", "error", "condition"),
    list(message = message, call = call, ...)
  )
}

abort <- function(message, class = character(), call = NULL, ...) {
  stop(newrllama_condition(message, class, call = call, ...))
}

abort_invalid <- function(message, call = NULL) {
  abort(message, "newrllama_invalid_argument", call = call)
}

# "ModelLoadError" -> "newrllama_model_load_error". InvalidArgumentError maps
# to the class the R-side checks use, so one handler catches both.
python_error_class <- function(py_class) {
  if (identical(py_class, "NewrllamaError")) {
    return(character())
  }
  if (identical(py_class, "InvalidArgumentError")) {
    return("newrllama_invalid_argument")
  }
  if (identical(py_class, "KeyboardInterrupt")) {
    return("newrllama_interrupted")
  }
  snake <- tolower(gsub("([a-z0-9])([A-Z])", "\\1_\\2", py_class))
  c(paste0("newrllama_", snake), "newrllama_python_error")
}

# The Python exception that ended the last call into Python, as reticulate
# keeps it (NULL if the error was R's own): its class and those it derives from
# up to Python's built-in ones (reticulate names the exception object's classes
# "module.Class", most specific first), whether it is newrllama's, and its text.
python_exception <- function() {
  # Reading the exception calls Python (reticulate formats its traceback): no interrupt may land in the
  # middle of it, and if it fails the error is reported as it came.
  suspendInterrupts(tryCatch(read_python_exception(), error = function(e) NULL))
}

read_python_exception <- function() {
  last <- reticulate::py_last_error()
  if (is.null(last)) {
    return(NULL)
  }
  mro <- class(attr(last, "exception"))
  builtin <- startsWith(mro, "python.builtin.")
  own <- mro[seq_len(if (any(builtin)) which(builtin)[1] - 1 else length(mro))]
  if (!any(startsWith(own, "newrllama."))) {
    return(list(classes = last$type, ours = FALSE, text = last$value))
  }
  list(classes = sub(".*[.]", "", own), ours = TRUE, text = last$value)
}

# Turns an error raised while calling Python into a newrllama condition, classed
# from the exception object (not from the message text).
convert_python_error <- function(e, call = NULL) {
  if (inherits(e, "newrllama_error")) {
    return(e)
  }
  exception <- python_exception()
  if (is.null(exception)) {
    return(newrllama_condition(conditionMessage(e), "newrllama_python_error", call = call))
  }
  py_class <- exception$classes[[1]]
  text <- exception$text
  if (identical(py_class, "ClosedError")) {
    text <- paste0(text, "; create it again with model_load() or context_create()")
  } else if (identical(py_class, "KeyboardInterrupt")) {
    text <- "interrupted by the user"
  } else if (!exception$ours) {
    text <- paste0(py_class, ": ", text)
  }
  classes <- unique(unlist(lapply(exception$classes, python_error_class)))
  newrllama_condition(text, classes, call = call, python_class = py_class)
}

# Evaluates `expr` (a call into Python) and re-signals its errors as
# newrllama conditions that name the R function the user called. The last
# Python error is cleared first, so that an R error in `expr` is not taken for
# an older Python one.
with_python <- function(expr, call = sys.call(-1)) {
  force(call) # before `expr` adds frames to the stack
  reticulate::py_clear_last_error()
  tryCatch(expr, error = function(e) stop(convert_python_error(e, call)))
}

# One warning for the items of a call that failed (their results are NA): it carries every reason in `errors`
# (named by position) and says which function gives them as a column.
warn_failed <- function(errors, failed, table_function, what = "prompts") {
  if (!any(failed)) {
    return(invisible())
  }
  errors <- stats::setNames(errors[failed], which(failed))
  message <- sprintf(paste0("%d of %d %s failed (first: %s); their results are NA. The reasons are in this ",
                            "warning's `errors` and in the `.error` column of %s"),
                     sum(failed), length(failed), what, errors[[1]], table_function)
  warn_classed(message, "newrllama_failed_prompts", errors = errors)
}

# A warning of the package: class `newrllama_warning` and its own, with any further fields.
warn_classed <- function(message, class, ...) {
  warning(structure(class = c(class, "newrllama_warning", "warning", "condition"),
                    list(message = message, call = NULL, ...)))
}

warn_determinism <- function(message) warn_classed(message, "newrllama_determinism_warning")

warn_group_dependent <- function(message) warn_classed(message, "newrllama_group_dependent_labels")

warn_suspect_labels <- function(message) warn_classed(message, "newrllama_suspect_labels")

# Once per model file and session, as Python's default filter shows a warning once per place: a session that tries
# the machinery on the embedded model is told, not told at every call.
warn_base_model <- function(message) {
  if (message %in% the$base_model_warned) {
    return(invisible())
  }
  the$base_model_warned <- c(the$base_model_warned, message)
  warn_classed(paste(message, "(said once per session)"), "newrllama_base_model")
}

warn_unlike_random <- function(message) warn_classed(message, "newrllama_unlike_random_sample")

warn_failed_texts <- function(message) warn_classed(message, "newrllama_failed_texts")

# An old argument name that still works, with the name that replaces it.
warn_deprecated <- function(old, new) {
  warn_classed(sprintf("`%s` is now `%s`; the old name still works for now", old, new), "newrllama_deprecated")
}
