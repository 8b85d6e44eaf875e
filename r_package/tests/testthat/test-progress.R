skip_if_no_newrllama()

# A run as a user starts one from a script: Rscript, not interactive, output to a pipe.
script_output <- function(code) {
  script <- tempfile(fileext = ".R")
  writeLines(c("options(cli.progress_show_after = 0)", "suppressPackageStartupMessages(library(newrllama))", code),
             script)
  out <- system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, stderr = TRUE)
  paste(out, collapse = "\n")
}

test_that("a non-interactive Rscript run prints its progress by default, and not with progress = FALSE", {
  skip_on_cran()
  skip_on_fast_lane()
  code <- function(extra) {
    c("ctx <- context_create(model_load(), n_ctx = 1024L, n_seq_max = 2L, n_threads = 1L)",
      paste0("x <- llm_vec_annotate(c('The striker scored.', 'Shares fell.', 'Rain tomorrow.'), ",
             "c('sports', 'business', 'weather'), context = ctx", extra, ")"),
      "cat('labelled', length(x), '\\n')")
  }
  shown <- script_output(code(""))
  expect_match(shown, "labelled 3")
  expect_match(shown, "newrllama .*/[0-9]+ prompts")
  quiet <- script_output(code(", progress = FALSE"))
  expect_match(quiet, "labelled 3")
  expect_no_match(quiet, "prompts")
  expect_error(llm_vec_annotate("a", c("x", "y"), progress = "yes"), "progress",
               class = "newrllama_invalid_argument")
})
