.onLoad <- function(libname, pkgname) {
  # Nothing is imported here: the module is loaded lazily by py_newrllama(),
  # the equivalent of reticulate::import(delay_load = TRUE) that can also pick
  # the interpreter and report a missing Python side as one classed error.
  the$module <- NULL
  invisible()
}
