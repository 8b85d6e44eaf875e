# Shared by the test files; generation is kept to a few tokens.

skip_if_no_newrllama <- function() {
  if (!newrllama_available()) {
    testthat::skip(paste0(
      "the newrllama Python package is not available ",
      "(set NEWRLLAMA_PYTHON or run install_newrllama())"
    ))
  }
}

# One model for every file (test-model.R and test-download.R test model_load() itself): the other files need
# a model only to make contexts from.
test_model <- local({
  model <- NULL
  function() {
    if (is.null(model)) {
      model <<- model_load()
    }
    model
  }
})

capital_prompt <- function(country = "France") {
  sprintf("The capital of Germany is Berlin. The capital of Italy is Rome. The capital of %s is", country)
}

# One thread: the tests may share the CPU with other work, and llama.cpp's
# worker threads slow down badly when the cores are oversubscribed.
test_context <- function(model, n_ctx = 1024L, n_seq_max = 4L) {
  context_create(model, n_ctx = n_ctx, n_threads = 1L, n_seq_max = n_seq_max)
}

# What an object restored by readRDS() in a new R session looks like: the R
# list survives, the Python object behind it does not.
from_previous_session <- function(x) {
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file))
  saveRDS(x, file)
  readRDS(file)
}

skip_if_no_server <- function() {
  skip_on_fast_lane()
  skip_if_no_newrllama()
  testthat::skip_if_not_installed("processx")
  if (!reticulate::py_module_available("fastapi") || !reticulate::py_module_available("openai")) {
    testthat::skip("the server extra (fastapi, uvicorn) or the openai client is not installed in Python")
  }
}

skip_if_no_ray <- function() {
  skip_on_fast_lane()
  skip_if_no_newrllama()
  if (!reticulate::py_module_available("ray")) {
    testthat::skip("the cluster extra (ray) is not installed in Python")
  }
}

# The fast lane (NEWRLLAMA_TEST_LANE=fast, bash scripts/test.sh --fast) leaves out the tests that start processes,
# servers or Ray, as pytest -m "not slow" does.
skip_on_fast_lane <- function() {
  testthat::skip_if(identical(Sys.getenv("NEWRLLAMA_TEST_LANE"), "fast"), "the fast lane leaves this test out")
}
