# Finding Python and the newrllama module. Python is started only when a
# function needs it, so that loading the package never fails and
# newrllama_available() can answer without error.

the <- new.env(parent = emptyenv())

# The Python interpreter to use, in order: NEWRLLAMA_PYTHON, RETICULATE_PYTHON,
# the "r-newrllama" virtualenv made by install_newrllama(). NULL lets
# reticulate choose.
newrllama_python <- function() {
  for (var in c("NEWRLLAMA_PYTHON", "RETICULATE_PYTHON")) {
    value <- Sys.getenv(var)
    if (nzchar(value)) {
      return(value)
    }
  }
  found <- tryCatch(
    if (reticulate::virtualenv_exists("r-newrllama")) reticulate::virtualenv_python("r-newrllama"),
    error = function(e) NULL
  )
  found
}

# Imports newrllama, starting Python on the chosen interpreter if it is not
# running yet. RETICULATE_PYTHON outranks every other setting in reticulate, so
# it is set for the moment Python starts and then restored.
import_newrllama <- function() {
  if (!reticulate::py_available(initialize = FALSE)) {
    python <- newrllama_python()
    if (!is.null(python)) {
      old <- Sys.getenv("RETICULATE_PYTHON", unset = NA)
      on.exit(
        if (is.na(old)) Sys.unsetenv("RETICULATE_PYTHON") else Sys.setenv(RETICULATE_PYTHON = old),
        add = TRUE
      )
      Sys.setenv(RETICULATE_PYTHON = python)
    }
  }
  reticulate::import("newrllama", delay_load = FALSE)
}

# The newrllama Python module, imported on first use and kept.
py_newrllama <- function() {
  if (!is.null(the$module)) {
    return(the$module)
  }
  module <- tryCatch(import_newrllama(), error = function(e) e)
  if (inherits(module, "error")) {
    abort(
      paste0(
        "the newrllama Python package is not available (", trimws(conditionMessage(module)), ").\n",
        "Install it with install_newrllama(), or point NEWRLLAMA_PYTHON to a Python that has it, ",
        "then restart R."
      ),
      "newrllama_python_missing"
    )
  }
  the$module <- module
  module
}

# The one door from R to Python: newrllama._r_helpers, whose functions unpack results in one call (rather than
# field by field through reticulate) and which holds the library's names R calls as they are.
python_helpers <- function() {
  if (is.null(the$helpers)) {
    py_newrllama()
    the$helpers <- with_python(reticulate::import("newrllama._r_helpers", delay_load = FALSE))
  }
  the$helpers
}

# Python's int(), unconverted: SamplingParams takes seeds up to 2^32 - 1,
# beyond what an R integer holds.
py_int <- function(x) {
  if (is.null(the$builtins)) {
    py_newrllama() # starts Python on the right interpreter first
    the$builtins <- reticulate::import_builtins(convert = FALSE)
  }
  the$builtins$int(x)
}

#' Is the newrllama Python package available?
#'
#' Checks, without signalling an error, whether the Python side of newrllama
#' can be used. Starts Python if it is not running yet.
#'
#' @return `TRUE` or `FALSE`.
#' @seealso [install_newrllama()] to install the Python side.
#' @examples
#' newrllama_available()
#' @export
newrllama_available <- function() {
  ok <- tryCatch({
    py_newrllama()
    TRUE
  }, error = function(e) FALSE)
  isTRUE(ok)
}
