skip_on_fast_lane()  # HTTP servers and R processes
skip_if_no_newrllama()
skip_if_not_installed("processx")

# Python's own http.server stands in for a model host: a server no one here wrote, on loopback.
serve_folder <- function(folder) {
  python <- reticulate::py_config()$python
  # A free port can be taken by another process (the other lane) before the server binds it: then another port.
  for (attempt in 1:3) {
    port <- free_port()
    server <- processx::process$new(python, c("-u", "-m", "http.server", "--bind", "127.0.0.1", port,
                                               "--directory", folder),
                                    stderr = "|", stdout = "|", env = c("current", LD_LIBRARY_PATH = ""))
    # Up to a minute by the clock (the other lane may be loading a model): poll_io() returns as soon as either
    # stream has output, so a count of polls can run out in no time.
    started <- errors <- character()
    deadline <- Sys.time() + 60
    while (!any(grepl("Serving HTTP", started)) && server$is_alive() && Sys.time() < deadline) {
      server$poll_io(200)
      started <- c(started, server$read_output_lines())
      errors <- c(errors, server$read_error_lines())
    }
    if (server$is_alive()) break
  }
  expect_match(started, "Serving HTTP", all = FALSE, info = paste(errors, collapse = "\n"))
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
  source <- Sys.getenv("NEWRLLAMA_SOURCE")
  if (nzchar(source)) {
    # the one place the version is written
    pyproject <- readLines(file.path(source, "pyproject.toml"))
    pinned <- regmatches(pyproject, regexpr("(?<=\"llama-cpp-python==)[^\"]+", pyproject, perl = TRUE))
    expect_equal(info$llama_cpp_python, pinned)
  } else {
    expect_match(info$llama_cpp_python, "^[0-9]+\\.[0-9]+\\.[0-9]+$")
  }
  expect_type(info$gpu_offload, "logical")
  expect_type(info$gpu_backends, "character")
  expect_true("CPU" %in% info$devices$backend)
  expect_true(all(info$devices$memory_total > 2^20))
  expect_true(length(info$cpu_features) > 0)
})

# The loopback hub of the Python tests, in a process of its own: it can cut bodies and be slow.
hub_server <- function(files, delay = 0) {
  script <- test_path("..", "..", "..", "tests", "python", "helpers", "model_server.py")
  skip_if_not(file.exists(script), "tests/python/helpers/model_server.py is not here (not run from the repository)")
  args <- c("-u", script, paste0(names(files), "=", files), "--delay", delay)
  server <- processx::process$new(reticulate::py_config()$python, args, stdout = "|", stderr = "|",
                                  env = c("current", LD_LIBRARY_PATH = ""))
  # It hashes its files before it prints its URL: on a loaded machine that takes a while.
  url <- character()
  deadline <- Sys.time() + 120
  while (!length(url) && server$is_alive() && Sys.time() < deadline) {
    server$poll_io(1000)
    url <- server$read_output_lines(n = 1)
  }
  expect_match(url, "^http://127", info = server$read_error())
  list(url = url, process = server)
}

with_cache <- function(dir, expr) {
  old <- Sys.getenv("NEWRLLAMA_CACHE_DIR", unset = NA)
  on.exit(if (is.na(old)) Sys.unsetenv("NEWRLLAMA_CACHE_DIR") else Sys.setenv(NEWRLLAMA_CACHE_DIR = old))
  Sys.setenv(NEWRLLAMA_CACHE_DIR = dir)
  force(expr)
}

test_that("a cut download resumes, and two R processes loading one URL both get the model", {
  path <- model_load()$path
  hub <- hub_server(c(gemma.gguf = path, twice.gguf = path), delay = 0.001)
  on.exit(hub$process$kill(), add = TRUE)
  cache <- tempfile("cache")
  with_cache(cache, {
    http_get(hub$url, "/control/cut/5000000")
    url <- paste0(hub$url, "/files/gemma.gguf")
    expect_error(model_load(url, progress = FALSE), "load it again to resume", class = "newrllama_model_load_error")
    part <- list.files(file.path(cache, "models"), pattern = "\\.part$", full.names = TRUE)
    expect_equal(file.size(part), 5000000)
    http_get(hub$url, "/control/cut/none")
    model <- model_load(url, progress = FALSE)
    expect_equal(unname(tools::md5sum(model$path)), unname(tools::md5sum(path)))
    expect_false(file.exists(part))
  })

  script <- sprintf("library(newrllama); m <- model_load('%s/files/twice.gguf', progress = FALSE); cat(m$path)",
                    hub$url)
  skip_if_not(any(file.exists(file.path(.libPaths(), "newrllama", "DESCRIPTION"))),
              "newrllama is not installed in a library that child R processes can load")
  env <- c("current", NEWRLLAMA_CACHE_DIR = cache, R_LIBS = paste(.libPaths(), collapse = .Platform$path.sep))
  runs <- lapply(1:2, function(i) processx::process$new(file.path(R.home("bin"), "Rscript"), c("-e", script),
                                                         stdout = "|", stderr = "|", env = env))
  for (run in runs) run$wait(120000)
  expect_equal(vapply(runs, function(r) r$get_exit_status(), 0L), c(0L, 0L),
               info = paste(vapply(runs, function(r) r$read_all_error(), ""), collapse = "\n"))
  paths <- vapply(runs, function(r) r$read_all_output(), "")
  expect_equal(paths[1], paths[2])
  expect_equal(http_get(hub$url, "/control/hits/twice.gguf")$body$hits, 1L) # the second waited for the first
  expect_equal(unname(tools::md5sum(paths[1])), unname(tools::md5sum(path)))
})

test_that("model_load() loads a recommended model by name from the hub, checked against the list", {
  models <- recommended_models()
  expect_s3_class(models, "tbl_df")
  expect_equal(models$name[[1]], "qwen2.5-coder-1.5b-instruct")
  small <- models[models$name == "qwen2.5-coder-0.5b-instruct", ]
  cached <- file.path(Sys.getenv("NEWRLLAMA_CACHE_DIR", path.expand("~/.cache/newrllama")), small$file_name)
  skip_if_not(file.exists(cached), "the 0.5B instruct model is not in the cache (scripts/fetch_instruct_model.py)")
  # The hub's layout, /owner/repo/resolve/main/file, served by Python's http.server.
  folder <- tempfile("hub")
  hub_path <- sub("^hf://([^/]+)/([^/]+)/", "\\1/\\2/resolve/main/", small$hub)
  dir.create(file.path(folder, dirname(hub_path)), recursive = TRUE)
  file.symlink(normalizePath(cached), file.path(folder, hub_path))
  server <- serve_folder(folder)
  on.exit(server$process$kill(), add = TRUE)
  cache <- tempfile("cache")
  old <- Sys.getenv(c("NEWRLLAMA_CACHE_DIR", "NEWRLLAMA_HF_ENDPOINT"), unset = NA)
  Sys.setenv(NEWRLLAMA_CACHE_DIR = cache, NEWRLLAMA_HF_ENDPOINT = server$url)
  on.exit(for (k in names(old)) if (is.na(old[[k]])) Sys.unsetenv(k) else do.call(Sys.setenv, as.list(old[k])),
          add = TRUE)

  model <- model_load("qwen2.5-coder-0.5b-instruct", progress = FALSE)
  expect_equal(model$source, "qwen2.5-coder-0.5b-instruct")
  expect_true(startsWith(normalizePath(model$path), normalizePath(cache)))
  expect_equal(requests_for(server, paste0("/", hub_path)), 1L)
  expect_equal(tokenize(model, "Hello"), tokenize(model_load(cached), "Hello"))
  again <- model_load("qwen2.5-coder-0.5b-instruct", progress = FALSE)
  expect_equal(again$path, model$path)
  expect_equal(requests_for(server, paste0("/", hub_path)), 0L)
  expect_error(model_load("qwen2.5-coder-0.5b-instruct", sha256 = strrep("0", 64)), "its own SHA-256",
               class = "newrllama_invalid_argument")
})
