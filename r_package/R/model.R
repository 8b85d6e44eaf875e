#' Load a GGUF model
#'
#' Loads a model file with llama.cpp. Without a path, loads the embedded
#' default model (gemma-3-270m, a small base model, quantized Q4_K_M).
#'
#' A model object holds a Python object that lives only in the current R
#' session: one restored with `readRDS()` must be loaded again.
#'
#' @param model_path Path of a GGUF file, or `NULL` for the embedded model.
#' @param n_gpu_layers Number of layers to offload to a GPU (0 = CPU only).
#' @param use_mmap Map the file into memory instead of reading it.
#' @param use_mlock Lock the weights in RAM.
#' @return An object of class `newrllama_model`.
#' @seealso [context_create()] to make a context on the model.
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' model
#' @export
model_load <- function(model_path = NULL, n_gpu_layers = 0L, use_mmap = TRUE, use_mlock = FALSE) {
  if (!is.null(model_path)) {
    model_path <- path.expand(check_string(model_path, "model_path"))
    # Checked here so that the message is clear and names the argument.
    if (!file.exists(model_path)) {
      abort(sprintf("`model_path`: model file '%s' does not exist", model_path), call = sys.call(),
            c("newrllama_model_load_error", "newrllama_python_error"))
    }
  }
  n_gpu_layers <- check_count(n_gpu_layers, "n_gpu_layers", min = -1)
  use_mmap <- check_flag(use_mmap, "use_mmap")
  use_mlock <- check_flag(use_mlock, "use_mlock")
  nl <- py_newrllama()
  py <- with_python(nl$Model(model_path, n_gpu_layers = n_gpu_layers,
                             use_mmap = use_mmap, use_mlock = use_mlock))
  structure(
    list(
      py = py,
      path = with_python(py$path),
      n_vocab = with_python(py$n_vocab),
      description = with_python(py$description)
    ),
    class = "newrllama_model"
  )
}

#' @export
print.newrllama_model <- function(x, ...) {
  cat("<newrllama_model>\n")
  cat("  path:       ", x$path, "\n", sep = "")
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
