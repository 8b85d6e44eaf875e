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
  skip_on_fast_lane()
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

  ctx <- test_context(test_model())
  expect_error(generate_parallel(ctx, notes, max_tokens = 24, output = out, progress = FALSE), "resume",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, notes, max_tokens = 5, output = out, resume = TRUE, progress = FALSE),
               "other settings", class = "newrllama_invalid_argument")
  done <- generate_parallel(ctx, notes, max_tokens = 24, output = out, resume = TRUE, progress = FALSE)
  expect_equal(last_stats(ctx)$n_prompts, length(notes) - length(before))
  records <- read_records(out)
  expect_setequal(vapply(records, `[[`, "", "id"), names(notes))
  expect_length(records, length(notes))
  for (r in before) {
    expect_equal(done[[r$id]], r$text)
  }
  expect_true(all(vapply(records, `[[`, "", "finish_reason") == "length"))
  expect_error(generate_parallel(ctx, c(a = "x", a = "y"), output = tempfile(), progress = FALSE), "more than once",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, stats::setNames(c("x", "y"), c("a", NA)), output = tempfile(), progress = FALSE),
               "names\\(prompts\\).*NA", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, c(a = "x", "y"), output = tempfile(), progress = FALSE), "non-empty",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "x", resume = TRUE, progress = FALSE), "output",
               class = "newrllama_invalid_argument")
})

test_that("retry_errors runs again only the prompts whose line holds an error", {
  model <- test_model()
  out <- tempfile(fileext = ".jsonl")
  on.exit(unlink(out), add = TRUE)
  long <- strrep("Write a long note about rivers, lakes and seas. ", 25) # 277 tokens: more than 256 per sequence
  prompts <- c(a = notes[[1]], long = long, b = notes[[2]])
  small <- test_context(model, n_ctx = 1024L, n_seq_max = 4L)
  expect_warning(first <- generate_parallel(small, prompts, max_tokens = 2, output = out, progress = FALSE),
                 class = "newrllama_failed_prompts")
  records <- read_records(out)
  finish <- stats::setNames(vapply(records, `[[`, "", "finish_reason"), vapply(records, `[[`, "", "id"))
  expect_equal(finish[names(prompts)], c(a = "length", long = "error", b = "length"))
  expect_error(generate_parallel(small, prompts, max_tokens = 2, output = out, retry_errors = TRUE, progress = FALSE),
               "resume=True", class = "newrllama_invalid_argument")
  roomy <- test_context(model, n_ctx = 1024L, n_seq_max = 1L)
  done <- generate_parallel(roomy, prompts, max_tokens = 2, output = out, resume = TRUE, retry_errors = TRUE,
                            progress = FALSE)
  expect_equal(last_stats(roomy)$n_prompts, 1)
  expect_false(anyNA(done))
  expect_equal(done[c("a", "b")], first[c("a", "b")])
  ids <- vapply(read_records(out), `[[`, "", "id")
  expect_setequal(ids[1:3], names(prompts))
  expect_equal(ids[4], "long") # the new line of the prompt run again follows the others
})

test_that("llm_vec_annotate() passes retry_errors on", {
  model <- test_model()
  ctx <- test_context(model)
  out <- tempfile(fileext = ".jsonl")
  on.exit(unlink(out), add = TRUE)
  texts <- c(oil = "OPEC cut its crude output again.", gone = NA)
  labels <- c("acquisition", "crude oil")
  expect_warning(llm_vec_annotate(texts, labels, context = ctx, output = out, debias = "none", progress = FALSE),
                 class = "newrllama_warning")
  expect_warning(llm_vec_annotate(texts, labels, context = ctx, output = out, debias = "none", resume = TRUE,
                              retry_errors = TRUE, progress = FALSE), class = "newrllama_warning")
  # The missing text was labelled again (and failed again): its second line follows the first.
  expect_equal(vapply(read_records(out), `[[`, "", "id"), c("oil", "gone", "gone"))
  expect_error(llm_vec_annotate(texts, labels, context = ctx, output = out, debias = "none", retry_errors = TRUE,
                            progress = FALSE), "resume=True", class = "newrllama_invalid_argument")
})

test_that("resuming a file written by another model is refused and leaves the file as it was", {
  ctx <- test_context(test_model())
  out <- tempfile(fileext = ".jsonl")
  on.exit(unlink(out), add = TRUE)
  generate_parallel(ctx, notes[1:2], max_tokens = 2, output = out, progress = FALSE)
  other <- strrep("ab", 32)
  writeLines(gsub('"model_sha256": "[0-9a-f]{64}"', sprintf('"model_sha256": "%s"', other),
                  readLines(out)), out)
  before <- readLines(out)
  expect_error(generate_parallel(ctx, notes[1:3], max_tokens = 2, output = out, resume = TRUE, progress = FALSE),
               paste0(other, ".*mix two models"), class = "newrllama_invalid_argument")
  expect_equal(readLines(out), before)
})
