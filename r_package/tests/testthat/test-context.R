skip_if_no_newrllama()
model <- test_model()

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
  expect_output(print(ctx), "batch-invariant: yes")
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
  expect_error(context_create(model, batch_invariant = NA), "batch_invariant", class = "newrllama_invalid_argument")
})

test_that("a context from a previous session or a closed one gives a clear error", {
  ctx <- test_context(model)
  old <- from_previous_session(ctx)
  expect_output(print(old), "previous R session")
  expect_error(generate_text(old, "Hi", max_tokens = 1), "previous R session.*context_create",
               class = "newrllama_stale_object")
  ctx$py$close()
  expect_output(print(ctx), "state: +closed")
  expect_error(generate_text(ctx, "Hi", max_tokens = 1), "closed", class = "newrllama_closed_error")
  expect_error(generate_parallel(ctx, "Hi", max_tokens = 1), "closed", class = "newrllama_error")
})

test_that("engine_stats() reports the context's steps", {
  ctx <- test_context(model)
  before <- engine_stats(ctx)
  expect_named(before, c("n_steps", "t_step_s", "t_python_s", "n_cached_prefixes", "n_prefix_evictions", "n_running",
                         "n_waiting", "python_us_per_step", "determinism"), ignore.order = TRUE)
  expect_true(before$determinism$batch_invariant)
  expect_match(before$determinism$build, "llama-cpp-python")
  invisible(generate_text(ctx, capital_prompt(), max_tokens = 3))
  after <- engine_stats(ctx)
  expect_gte(after$n_steps, before$n_steps + 3)
  expect_gt(after$t_step_s, 0)
  expect_equal(after$n_running, 0)
  expect_error(engine_stats("x"), "context", class = "newrllama_invalid_argument")
})

test_that("a rerun gives the same bits: after other calls, on a fresh context, and each prompt alone", {
  prompts <- paste("Here is a short story about", c("a lost dog", "an old clock", "the winter sea", "a paper kite"))
  ctx <- context_create(model, n_ctx = 2048L, n_seq_max = 4L, n_threads = 2L)
  first <- generate_parallel(ctx, prompts, max_tokens = 12, progress = FALSE)
  invisible(generate_parallel(ctx, rev(paste(prompts, "Once")), max_tokens = 6, progress = FALSE))
  again <- generate_parallel(ctx, prompts, max_tokens = 12, progress = FALSE)
  expect_gt(last_stats(ctx)$n_cached_tokens, 0)
  fresh <- context_create(model, n_ctx = 2048L, n_seq_max = 4L, n_threads = 2L)
  alone <- vapply(prompts, function(p) generate_text(fresh, p, max_tokens = 12), character(1), USE.NAMES = FALSE)
  expect_identical(as.vector(again), as.vector(first))
  expect_identical(alone, as.vector(first))
  loose <- context_create(model, n_ctx = 2048L, n_seq_max = 4L, n_threads = 2L, batch_invariant = FALSE)
  expect_output(print(loose), "batch-invariant: no")
  expect_false(engine_stats(loose)$determinism$batch_invariant)
})

test_that("batch invariance on layers offloaded to a GPU is not claimed, with a classed warning", {
  # A CPU build cannot offload: the model's record is faked as Python's test does.
  offloaded <- model_load(test_model()$path)
  reticulate::py_set_attr(offloaded$py, "n_gpu_layers", 20L)
  reticulate::py_set_attr(offloaded$py, "backend", "cuda")
  expect_warning(ctx <- context_create(offloaded, n_ctx = 512, n_seq_max = 1, n_threads = 1),
                 "20 layers on cuda.*n_gpu_layers=0", class = "newrllama_determinism_warning")
  expect_false(ctx$batch_invariant)
  record <- engine_stats(ctx)$determinism
  expect_equal(record[c("batch_invariant", "backend", "n_gpu_layers")],
               list(batch_invariant = FALSE, backend = "cuda", n_gpu_layers = 20L))
  expect_no_warning(context_create(offloaded, n_ctx = 512, n_seq_max = 1, n_threads = 1, batch_invariant = FALSE))
  expect_equal(engine_stats(test_context(model))$determinism[c("backend", "n_gpu_layers")],
               list(backend = "cpu", n_gpu_layers = 0L))
})
