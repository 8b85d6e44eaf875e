#' Start an OpenAI-compatible server
#'
#' Starts `python -m newrllama serve` as a child process, waits until it
#' answers `/health`, and returns an object with its URLs and a `stop()`
#' function. Requests from any number of clients (ellmer, httr2, the `openai`
#' Python package) are decoded together in one batch of up to `n_seq_max`
#' sequences. The server is bound to `host` (loopback unless told otherwise)
#' and ends with `stop()`, when the object is garbage collected, or when R
#' exits.
#'
#' With ellmer: `ellmer::chat_openai_compatible(base_url = server$base_url,
#' model = server$model)`. Endpoints: `/v1/completions`, `/v1/chat/completions`
#' (with `stream`, `choices`, `grammar`, `response_format`), `/v1/models`,
#' `/health`, `/metrics` (Prometheus).
#'
#' @param model Path to a GGUF file, or `NULL` for the embedded model.
#' @param port Port to listen on; `NULL` picks a free one.
#' @param host Address to bind; `"127.0.0.1"` accepts local clients only.
#' @param n_seq_max Requests decoded together.
#' @param n_ctx KV cells in all (`NULL`: 2048 per sequence).
#' @param threads CPU threads (`NULL`: all cores).
#' @param api_key `NULL`, or a key clients must send as
#'   `Authorization: Bearer <key>`.
#' @param timeout Seconds to wait for the model to load.
#' @param prefix_cache Share prompt starts between requests (`TRUE`, the
#'   default) or decode every request's prompt in full (`FALSE`).
#' @param batch_invariant A request's answer and probabilities do not depend
#'   on the other requests served with it (`TRUE`, the default); see
#'   [context_create()].
#' @return An object of class `newrllama_server`: a list with `url`,
#'   `base_url` (`url` + `"/v1"`, for OpenAI clients), `model` (the model id
#'   clients use), `process` (the processx process) and `stop()`.
#' @examplesIf newrllama::newrllama_available() && interactive()
#' server <- newrllama_serve()
#' server$base_url
#' # chat <- ellmer::chat_openai_compatible(base_url = server$base_url, model = server$model)
#' server$stop()
#' @export
newrllama_serve <- function(model = NULL, port = NULL, host = "127.0.0.1", n_seq_max = 16L, n_ctx = NULL,
                            threads = NULL, api_key = NULL, timeout = 120, prefix_cache = TRUE,
                            batch_invariant = TRUE) {
  if (!requireNamespace("processx", quietly = TRUE)) {
    abort("newrllama_serve() needs the processx package (Debian: r-cran-processx)", "newrllama_error")
  }
  args <- c("-m", "newrllama", "serve", "--host", check_string(host, "host"),
            "--n-seq-max", as.character(check_count(n_seq_max, "n_seq_max", min = 1)), "--log-level", "warning")
  if (!is.null(model)) {
    model <- check_string(model, "model")
    if (!file.exists(model)) abort_invalid(sprintf("`model` does not exist: %s", model))
    args <- c(args, "--model", normalizePath(model))
  }
  if (!is.null(n_ctx)) args <- c(args, "--n-ctx", as.character(check_count(n_ctx, "n_ctx", min = 1)))
  if (!is.null(threads)) args <- c(args, "--threads", as.character(check_count(threads, "threads", min = 1)))
  if (!is.null(api_key)) args <- c(args, "--api-key", check_string(api_key, "api_key"))
  if (!check_flag(prefix_cache, "prefix_cache")) args <- c(args, "--no-prefix-cache")
  if (!check_flag(batch_invariant, "batch_invariant")) args <- c(args, "--no-batch-invariant")
  port <- if (is.null(port)) free_port() else check_count(port, "port", min = 1, max = 65535)
  timeout <- check_count(timeout, "timeout", min = 1)
  # the same Python as the rest of the package, and a clear error if it lacks newrllama
  python <- python_helpers()$python_executable()
  log <- tempfile("newrllama-serve-", fileext = ".log")
  # R's LD_LIBRARY_PATH (R's lib, the system lib dir first) would give the child the system's libpython
  # instead of its own: a Python of another build, whose extension modules then fail to load.
  process <- processx::process$new(python, c(args, "--port", as.character(port)), stdout = log, stderr = "2>&1",
                                   env = c("current", LD_LIBRARY_PATH = ""), cleanup = TRUE, cleanup_tree = TRUE)
  url <- sprintf("http://%s:%d", if (host %in% c("0.0.0.0", "::")) "127.0.0.1" else host, as.integer(port))
  wait_until_healthy(process, url, timeout, log)
  models <- http_get(url, "/v1/models", api_key)$body
  structure(
    list(url = url, base_url = paste0(url, "/v1"), model = models$data[[1]]$id, process = process,
         stop = function() {
           if (process$is_alive()) {
             process$interrupt() # uvicorn shuts down cleanly on SIGINT
             process$wait(10000)
             if (process$is_alive()) process$kill()
           }
           invisible(NULL)
         }),
    class = "newrllama_server"
  )
}

#' @export
print.newrllama_server <- function(x, ...) {
  cat(sprintf("<newrllama server %s, model %s, %s>\n", x$base_url, x$model,
              if (x$process$is_alive()) "running" else "stopped"))
  invisible(x)
}

# A port nothing listens on now (the server binds it a moment later).
free_port <- function() {
  for (attempt in 1:50) {
    port <- sample(20000:60000, 1)
    socket <- tryCatch(serverSocket(port), error = function(e) NULL)
    if (!is.null(socket)) {
      close(socket)
      return(port)
    }
  }
  abort("no free port found; give one with `port`", "newrllama_error")
}

# GET url + path: list(status, parsed JSON body), status 0 if nothing answered. Through Python's urllib
# (Python runs anyway): base R's url() hides the status of a failed request.
http_get <- function(url, path, api_key = NULL) {
  python_helpers()$http_get(paste0(url, path), api_key)
}

wait_until_healthy <- function(process, url, timeout, log, call = sys.call(-1)) {
  deadline <- Sys.time() + timeout
  while (Sys.time() < deadline) {
    if (!process$is_alive()) {
      abort(sprintf("the server exited:\n%s", paste(readLines(log, warn = FALSE), collapse = "\n")),
            "newrllama_error", call = call)
    }
    health <- http_get(url, "/health")
    if (health$status == 200) {
      return(invisible(TRUE))
    }
    if (health$status == 500) {
      process$kill()
      abort(sprintf("the server could not load the model: %s", health$body$error), "newrllama_error", call = call)
    }
    Sys.sleep(0.1)
  }
  process$kill()
  abort(sprintf("the server did not answer /health within %d s", timeout), "newrllama_error", call = call)
}
