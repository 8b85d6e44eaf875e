skip_if_no_newrllama()
skip_if_not_installed("processx")

# Python's own http.server stands in for a model host: a server no one here wrote, on loopback.
serve_folder <- function(folder) {
  port <- free_port()
  python <- reticulate::py_config()$python
  server <- processx::process$new(python, c("-u", "-m", "http.server", "--bind", "127.0.0.1", port,
                                             "--directory", folder),
                                  stderr = "|", stdout = "|", env = c("current", LD_LIBRARY_PATH = ""))
  started <- character()
  for (i in 1:100) {
    server$poll_io(100)
    started <- c(started, server$read_output_lines())
    if (any(grepl("Serving HTTP", started))) break
  }
  expect_match(started, "Serving HTTP", all = FALSE)
  list(url = sprintf("http://127.0.0.1:%d", port), process = server)
}

# The log line of a request comes after its response: give it a moment.
requests_for <- function(server, path) {
  server$process$poll_io(500)
  lines <- server$process$read_error_lines()
  sum(grepl(sprintf("\"GET %s HTTP", path), lines, fixed = TRUE))
}

test_that("model_load() downloads a URL once, then loads it from the cache", {
  folder <- tempfile("host")
  dir.create(folder)
  embedded <- model_load()
  file.copy(embedded$path, file.path(folder, "gemma.gguf"))
  writeLines("<html>a login page</html>", file.path(folder, "page.gguf"))
  cache <- tempfile("cache")
  old <- Sys.getenv("NEWRLLAMA_CACHE_DIR", unset = NA)
  Sys.setenv(NEWRLLAMA_CACHE_DIR = cache)
  on.exit(if (is.na(old)) Sys.unsetenv("NEWRLLAMA_CACHE_DIR") else Sys.setenv(NEWRLLAMA_CACHE_DIR = old), add = TRUE)
  server <- serve_folder(folder)
  on.exit(server$process$kill(), add = TRUE)

  url <- paste0(server$url, "/gemma.gguf")
  model <- model_load(url, progress = FALSE)
  expect_equal(model$source, url)
  expect_true(startsWith(normalizePath(model$path), normalizePath(cache)))
  expect_equal(tokenize(model, "Hello"), tokenize(embedded, "Hello"))
  expect_output(print(model), "from: +http://127")
  expect_equal(requests_for(server, "/gemma.gguf"), 1L)
  again <- model_load(url, progress = FALSE)
  expect_equal(again$path, model$path)
  expect_equal(requests_for(server, "/gemma.gguf"), 0L) # no request since the first

  expect_error(model_load(paste0(server$url, "/missing.gguf"), progress = FALSE), "not found \\(HTTP 404",
               class = "newrllama_model_load_error")
  expect_error(model_load(paste0(server$url, "/page.gguf"), progress = FALSE), "not a GGUF model file",
               class = "newrllama_model_load_error")
  file.copy(embedded$path, file.path(folder, "copy.gguf"))
  expect_error(model_load(paste0(server$url, "/copy.gguf"), sha256 = strrep("0", 64), progress = FALSE),
               "SHA-256", class = "newrllama_model_load_error")
  kept <- list.files(file.path(cache, "models"))
  expect_false(any(grepl("copy", kept[!endsWith(kept, ".lock")])))
  expect_error(model_load(url, sha256 = "abc"), "64 hexadecimal", class = "newrllama_invalid_argument")
  expect_error(model_load(url, progress = NA), "progress", class = "newrllama_invalid_argument")
})

test_that("system_info() reports the build and its devices", {
  info <- system_info()
  expect_equal(info$llama_cpp_python, "0.3.36")
  expect_type(info$gpu_offload, "logical")
  expect_type(info$gpu_backends, "character")
  expect_true("CPU" %in% info$devices$backend)
  expect_true(all(info$devices$memory_total > 2^20))
  expect_true(length(info$cpu_features) > 0)
})
