.onLoad <- function(libname, pkgname) {
  # Nothing is imported here: the module is loaded lazily by py_newrllama(),
  # the equivalent of reticulate::import(delay_load = TRUE) that can also pick
  # the interpreter and report a missing Python side as one classed error.
  the$module <- NULL
  # reticulate before 1.36 unwinds only R's stack when Ctrl-C interrupts a call into Python
  # (rstudio/reticulate#1601), and its task callback that flushes Python's output after every top-level call
  # then imports `sys` with Python's stack half unwound, which crashed the session in the interrupt test
  # (test-reliability.R) under some memory layouts. Without that callback, the session and the context keep
  # working after an interrupt. A value the user set is kept.
  if (is.null(getOption("reticulate.autoflush")) && utils::packageVersion("reticulate") < "1.36") {
    options(reticulate.autoflush = FALSE)
  }
  invisible()
}
