test_that("Python exception messages are parsed into class and text", {
  parsed <- newrllama:::split_python_message("newrllama.errors.ModelLoadError: cannot open 'x': No such file\n")
  expect_equal(parsed$class, "ModelLoadError")
  expect_equal(parsed$module, "newrllama.errors")
  expect_equal(parsed$text, "cannot open 'x': No such file")
  expect_null(newrllama:::split_python_message("an R error")$class)
})

test_that("Python classes map to newrllama condition classes", {
  expect_equal(newrllama:::python_error_class("NewrllamaError"), character())
  expect_equal(newrllama:::python_error_class("InvalidArgumentError"), "newrllama_invalid_argument")
  expect_equal(newrllama:::python_error_class("ModelLoadError"),
               c("newrllama_model_load_error", "newrllama_python_error"))
  expect_equal(newrllama:::python_error_class("KeyboardInterrupt"), "newrllama_interrupted")
})

test_that("errors raised in Python become newrllama_error conditions", {
  skip_if_no_newrllama()
  raise <- function(code) {
    newrllama:::with_python(reticulate::py_run_string(code))
  }
  expect_error(raise("import newrllama\nraise newrllama.TokenizeError('bad text')"),
               "bad text", class = "newrllama_tokenize_error")
  expect_error(raise("raise ValueError('plain python')"),
               "ValueError: plain python", class = "newrllama_error")
  e <- tryCatch(raise("raise KeyboardInterrupt()"), error = function(e) e)
  expect_s3_class(e, "newrllama_interrupted")
  expect_s3_class(e, "newrllama_error")
})

test_that("an exception without text is parsed too", {
  parsed <- newrllama:::split_python_message("KeyboardInterrupt\n")
  expect_equal(parsed$class, "KeyboardInterrupt")
  expect_equal(parsed$module, "")
})
