skip_if_no_newrllama()
model <- model_load()

test_that("context_create() makes a context that keeps its model", {
  ctx <- context_create(model, n_ctx = 512, n_threads = 1, n_seq_max = 2)
  expect_s3_class(ctx, "newrllama_context")
  expect_identical(ctx$model, model)
  expect_equal(ctx$n_ctx, 512L)
  expect_equal(ctx$n_seq_max, 2L)
  expect_equal(ctx$n_ctx_seq, 256L)
  expect_equal(ctx$n_threads, 1L)
  expect_output(print(ctx), "<newrllama_context>")
  expect_output(print(ctx), "256 per sequence")
  expect_output(print(ctx), "prefix cache: on")
})

test_that("n_threads = NULL uses every core", {
  ctx <- context_create(model, n_ctx = 256, n_seq_max = 1)
  expect_gte(ctx$n_threads, 1L)
})

test_that("context_create() checks its arguments", {
  expect_error(context_create("model"), "newrllama_model", class = "newrllama_invalid_argument")
  expect_error(context_create(list(py = NULL)), "model", class = "newrllama_invalid_argument")
  expect_error(context_create(model, n_ctx = 0), "n_ctx", class = "newrllama_invalid_argument")
  expect_error(context_create(model, n_ctx = NA), "n_ctx", class = "newrllama_invalid_argument")
  expect_error(context_create(model, n_ctx = 1e12), "n_ctx", class = "newrllama_invalid_argument")
  expect_error(context_create(model, n_seq_max = -1), "n_seq_max", class = "newrllama_invalid_argument")
  expect_error(context_create(model, n_seq_max = 2.5), "n_seq_max", class = "newrllama_invalid_argument")
  expect_error(context_create(model, n_threads = 0), "n_threads", class = "newrllama_invalid_argument")
  expect_error(context_create(model, n_threads = "all"), "n_threads", class = "newrllama_invalid_argument")
  expect_error(context_create(model, prefix_cache = NA), "prefix_cache", class = "newrllama_invalid_argument")
  expect_error(context_create(model, prefix_cache = "yes"), "prefix_cache", class = "newrllama_invalid_argument")
})

test_that("a context from a previous session or a closed one gives a clear error", {
  ctx <- test_context(model)
  old <- from_previous_session(ctx)
  expect_output(print(old), "previous R session")
  expect_error(generate(old, "Hi", max_tokens = 1), "previous R session.*context_create",
               class = "newrllama_stale_object")
  ctx$py$close()
  expect_output(print(ctx), "state: +closed")
  expect_error(generate(ctx, "Hi", max_tokens = 1), "closed", class = "newrllama_closed_error")
  expect_error(generate_parallel(ctx, "Hi", max_tokens = 1), "closed", class = "newrllama_error")
})

test_that("engine_stats() reports the context's steps", {
  ctx <- test_context(model)
  before <- engine_stats(ctx)
  expect_named(before, c("n_steps", "t_step_s", "t_python_s", "n_cached_prefixes", "n_prefix_evictions", "n_running",
                         "n_waiting", "python_us_per_step"), ignore.order = TRUE)
  invisible(generate(ctx, capital_prompt(), max_tokens = 3))
  after <- engine_stats(ctx)
  expect_gte(after$n_steps, before$n_steps + 3)
  expect_gt(after$t_step_s, 0)
  expect_equal(after$n_running, 0)
  expect_error(engine_stats("x"), "context", class = "newrllama_invalid_argument")
})
