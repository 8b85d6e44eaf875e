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

test_that("conditions are classed from the exception object, not from message text", {
  skip_if_no_newrllama()
  raise <- function(code) {
    newrllama:::with_python(reticulate::py_run_string(code))
  }
  # A subclass of a newrllama error keeps its parents' classes, whatever its name says.
  e <- tryCatch(raise(paste0("import newrllama\nclass Odd(newrllama.ModelLoadError): pass\n",
                             "raise Odd('a ValueError: in the text')")), error = function(e) e)
  expect_s3_class(e, "newrllama_odd")
  expect_s3_class(e, "newrllama_model_load_error")
  expect_equal(conditionMessage(e), "a ValueError: in the text")
  # An R error whose text looks like Python's is not taken for one, nor for the last Python error.
  e <- tryCatch(newrllama:::with_python(stop("newrllama.errors.ModelLoadError: made in R")), error = function(e) e)
  expect_false(inherits(e, "newrllama_model_load_error"))
  expect_s3_class(e, "newrllama_python_error")
})
