# generate_parallel() on a context writes answers as they finish and resumes after R dies.

skip_if_no_newrllama()

notes <- stats::setNames(sprintf("Write a short note about the number %d:", 1:24), sprintf("note-%02d", 1:24))

# The complete lines of the file (a kill may tear the last one; a resume cuts it off and runs its prompt again).
read_records <- function(path) {
  json <- reticulate::import("json")
  records <- lapply(readLines(path, warn = FALSE), function(line) tryCatch(json$loads(line), error = function(e) NULL))
  Filter(Negate(is.null), records)
}

test_that("a run killed half-way resumes with every prompt once", {
  skip_on_cran()
  skip_if_not_installed("processx")
  out <- tempfile(fileext = ".jsonl")
  on.exit(unlink(out), add = TRUE)
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script), add = TRUE)
  writeLines(c(
    "library(newrllama)",
    "ctx <- context_create(model_load(), n_ctx = 1024, n_threads = 1, n_seq_max = 4)",
    sprintf("prompts <- %s", paste(deparse(notes), collapse = "")),
    sprintf("generate_parallel(ctx, prompts, max_tokens = 24, output = %s, progress = FALSE)", deparse(out))
  ), script)
  child <- processx::process$new(file.path(R.home("bin"), "Rscript"), script, stdout = NULL, stderr = NULL)
  on.exit(child$kill(), add = TRUE)
  deadline <- Sys.time() + 120
  while (Sys.time() < deadline && (!file.exists(out) || length(readLines(out, warn = FALSE)) < 4)) {
    Sys.sleep(0.05)
  }
  child$kill() # SIGKILL: R dies at once, as in a crash
  before <- read_records(out)
  expect_gt(length(before), 0)
  expect_lt(length(before), length(notes))

  ctx <- test_context(model_load())
  expect_error(generate_parallel(ctx, notes, max_tokens = 24, output = out, progress = FALSE), "resume",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, notes, max_tokens = 5, output = out, resume = TRUE, progress = FALSE),
               "other settings", class = "newrllama_invalid_argument")
  done <- generate_parallel(ctx, notes, max_tokens = 24, output = out, resume = TRUE, progress = FALSE)
  expect_equal(attr(done, "stats")$n_prompts, length(notes) - length(before))
  records <- read_records(out)
  expect_setequal(vapply(records, `[[`, "", "id"), names(notes))
  expect_length(records, length(notes))
  for (r in before) {
    expect_equal(done[[r$id]], r$text)
  }
  expect_true(all(attr(done, "finish_reason") == "length"))
  expect_error(generate_parallel(ctx, c(a = "x", a = "y"), output = tempfile(), progress = FALSE), "more than once",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, stats::setNames(c("x", "y"), c("a", NA)), output = tempfile(), progress = FALSE),
               "names\\(prompts\\).*NA", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, c(a = "x", "y"), output = tempfile(), progress = FALSE), "non-empty",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "x", resume = TRUE, progress = FALSE), "output",
               class = "newrllama_invalid_argument")
})
