skip_if_no_server()

test_that("newrllama_serve() starts a server that OpenAI clients use, and stop() ends it", {
  server <- newrllama_serve(n_seq_max = 2L, threads = 1L, api_key = "k3y")
  on.exit(server$stop(), add = TRUE)
  expect_s3_class(server, "newrllama_server")
  expect_match(server$base_url, "^http://127\\.0\\.0\\.1:[0-9]+/v1$")
  expect_equal(server$model, "gemma-3-270m")
  expect_output(print(server), "running")
  # The openai Python package, a client no one here wrote, called from R.
  openai <- reticulate::import("openai")
  client <- openai$OpenAI(base_url = server$base_url, api_key = "k3y", max_retries = 0L)
  answer <- client$completions$create(model = server$model, prompt = capital_prompt("France"), max_tokens = 3L,
                                      temperature = 0)
  expect_match(answer$choices[[1]]$text, "Paris")
  chat <- client$chat$completions$create(model = server$model, max_tokens = 8L, temperature = 0,
                                         messages = list(list(role = "user", content = "Say hello.")))
  expect_true(nchar(chat$choices[[1]]$message$content) > 0)
  wrong <- openai$OpenAI(base_url = server$base_url, api_key = "nope", max_retries = 0L)
  expect_error(wrong$models$list(), "401|key")
  server$stop()
  expect_false(server$process$is_alive())
  expect_output(print(server), "stopped")
})

test_that("newrllama_serve() checks its arguments and reports a model that cannot load", {
  expect_error(newrllama_serve(model = "/no/such/model.gguf"), "does not exist",
               class = "newrllama_invalid_argument")
  expect_error(newrllama_serve(port = 70000), "port", class = "newrllama_invalid_argument")
  expect_error(newrllama_serve(n_seq_max = 0), "n_seq_max", class = "newrllama_invalid_argument")
  expect_error(newrllama_serve(prefix_cache = NA), "prefix_cache", class = "newrllama_invalid_argument")
  bad <- tempfile(fileext = ".gguf")
  writeLines("not a model", bad)
  expect_error(newrllama_serve(model = bad, timeout = 60), "not a GGUF model file", class = "newrllama_error")
})
