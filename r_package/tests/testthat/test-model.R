skip_if_no_newrllama()
model <- test_model()

test_that("model_load() loads the embedded model", {
  expect_s3_class(model, "newrllama_model")
  expect_true(file.exists(model$path))
  expect_gt(model$n_vocab, 1000)
  expect_output(print(model), "<newrllama_model>")
  expect_output(print(model), "state: +ready")
})

test_that("a child process started after loading a model inherits nothing newrllama set", {
  # R's system() hands the C environment on; llama.cpp's own tools ran 4x slower with what was set there.
  ctx <- context_create(model, n_ctx = 512, n_seq_max = 1)
  generate_text(ctx, "Hello", max_tokens = 2)
  child <- system2("env", stdout = TRUE)
  # Neither is set where the tests run (scripts/test.sh), so whatever holds one was set by newrllama or llama.cpp.
  expect_false(any(startsWith(child, "GGML_CPU_TILED_MM_FORCE=")))
  expect_false(any(startsWith(child, "KMP_BLOCKTIME=")))
})

test_that("model_load() loads a model by path", {
  again <- model_load(model$path, use_mmap = FALSE)
  expect_equal(again$n_vocab, model$n_vocab)
})

test_that("a missing model file is a model load error", {
  expect_error(model_load(file.path(tempdir(), "no-such-model.gguf")), "does not exist",
               class = "newrllama_model_load_error")
})

test_that("a file that is not GGUF is a model load error, not a crash", {
  file <- tempfile(fileext = ".gguf")
  on.exit(unlink(file))
  writeLines("this is not a model", file)
  expect_error(model_load(file), "GGUF", class = "newrllama_model_load_error")
})

test_that("model_load() checks its arguments", {
  expect_error(model_load(1), "model_path", class = "newrllama_invalid_argument")
  expect_error(model_load(NA_character_), "model_path", class = "newrllama_invalid_argument")
  expect_error(model_load(n_gpu_layers = "a"), "n_gpu_layers", class = "newrllama_invalid_argument")
  expect_error(model_load(n_gpu_layers = 1.5), "n_gpu_layers", class = "newrllama_invalid_argument")
  expect_error(model_load(use_mmap = NA), "use_mmap", class = "newrllama_invalid_argument")
  expect_error(model_load(use_mlock = "yes"), "use_mlock", class = "newrllama_invalid_argument")
})

test_that("a model from a previous session gives a clear error", {
  old <- from_previous_session(model)
  expect_true(reticulate::py_is_null_xptr(old$py))
  expect_output(print(old), "previous R session")
  expect_error(tokenize(old, "a"), "previous R session.*model_load", class = "newrllama_stale_object")
  expect_error(context_create(old), "previous R session", class = "newrllama_error")
})

test_that("a closed model gives a clear error", {
  closed <- model_load()
  closed$py$close()
  expect_output(print(closed), "state: +closed")
  expect_error(tokenize(closed, "a"), "closed.*model_load", class = "newrllama_closed_error")
  expect_error(context_create(closed), "closed", class = "newrllama_error")
})
