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

# reticulate (1.28) reports a Python exception as an R error whose message is
# "module.Class: text". Parse it rather than depend on py_last_error(), which
# may describe an older exception.
split_python_message <- function(message) {
  # An exception without text (KeyboardInterrupt) has no ": ".
  pattern <- "^(([A-Za-z_][A-Za-z0-9_]*\\.)*)([A-Za-z_][A-Za-z0-9_]*(Error|Exception|Interrupt))(: ?|\\s*$)"
  m <- regmatches(message, regexec(pattern, message))[[1]]
  if (length(m) == 0) {
    return(list(class = NULL, text = message))
  }
  module <- sub("\\.$", "", m[2])
  text <- substring(message, nchar(m[1]) + 1)
  list(class = m[4], module = module, text = sub("\\s+$", "", text))
}

# Turns an error raised while calling Python into a newrllama condition.
convert_python_error <- function(e, call = NULL) {
  if (inherits(e, "newrllama_error")) {
    return(e)
  }
  parsed <- split_python_message(conditionMessage(e))
  if (is.null(parsed$class)) {
    return(newrllama_condition(parsed$text, "newrllama_python_error", call = call))
  }
  text <- parsed$text
  if (identical(parsed$class, "ClosedError")) {
    text <- paste0(text, "; create it again with model_load() or context_create()")
  } else if (identical(parsed$class, "KeyboardInterrupt")) {
    text <- "interrupted by the user"
  } else if (!startsWith(parsed$module, "newrllama")) {
    text <- paste0(parsed$class, ": ", text)
  }
  newrllama_condition(text, python_error_class(parsed$class), call = call,
                      python_class = parsed$class)
}

# Evaluates `expr` (a call into Python) and re-signals its errors as
# newrllama conditions that name the R function the user called.
with_python <- function(expr, call = sys.call(-1)) {
  force(call) # before `expr` adds frames to the stack
  tryCatch(expr, error = function(e) stop(convert_python_error(e, call)))
}

warn_failed_prompts <- function(n_failed, n_total) {
  message <- sprintf(
    "%d of %d prompts failed; their results are NA and the reasons are in attr(result, \"errors\")",
    n_failed, n_total
  )
  warning(structure(
    class = c("newrllama_warning", "warning", "condition"),
    list(message = message, call = NULL)
  ))
}

warn_group_dependent <- function(message) {
  warning(structure(
    class = c("newrllama_group_dependent_labels", "newrllama_warning", "warning", "condition"),
    list(message = message, call = NULL)
  ))
}

warn_suspect_labels <- function(message) {
  warning(structure(
    class = c("newrllama_suspect_labels", "newrllama_warning", "warning", "condition"),
    list(message = message, call = NULL)
  ))
}
