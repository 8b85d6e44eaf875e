test_that("newrllama_available() answers TRUE or FALSE without error", {
  expect_type(newrllama_available(), "logical")
  expect_length(newrllama_available(), 1)
})

test_that("a missing Python side gives one clear classed error naming install_newrllama()", {
  # Needs a fresh R process: Python cannot be swapped once started.
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script))
  writeLines(c(
    "library(newrllama)",
    "cat('available:', newrllama_available(), '\\n')",
    "e <- tryCatch(model_load(), error = function(e) e)",
    "cat('class:', class(e), '\\n')",
    "cat('message:', conditionMessage(e), '\\n')"
  ), script)
  env <- c(
    "NEWRLLAMA_PYTHON=/nonexistent/bin/python",
    paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep))
  )
  out <- system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = TRUE, stderr = TRUE, env = env)
  out <- paste(out, collapse = "\n")
  expect_match(out, "available: FALSE")
  expect_match(out, "class: newrllama_python_missing newrllama_error error condition")
  expect_match(out, "install_newrllama()", fixed = TRUE)
})

test_that("Python discovery follows NEWRLLAMA_PYTHON, then RETICULATE_PYTHON", {
  withr_env <- function(vars, code) {
    old <- Sys.getenv(names(vars), unset = NA, names = TRUE)
    on.exit(for (n in names(old)) if (is.na(old[[n]])) Sys.unsetenv(n) else do.call(Sys.setenv, as.list(old[n])))
    do.call(Sys.setenv, as.list(vars))
    code
  }
  expect_equal(withr_env(c(NEWRLLAMA_PYTHON = "/a/python", RETICULATE_PYTHON = "/b/python"),
                         newrllama:::newrllama_python()), "/a/python")
  expect_equal(withr_env(c(NEWRLLAMA_PYTHON = "", RETICULATE_PYTHON = "/b/python"),
                         newrllama:::newrllama_python()), "/b/python")
})
