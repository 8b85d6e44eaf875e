#' Run prompts on a cluster of worker processes
#'
#' Starts `workers` worker processes on a local Ray runtime (or on the Ray
#' cluster at `address`, which may span machines), each loading the model once
#' and keeping one context. [generate_parallel()] and [llm_annotate()] /
#' [llm_vec_annotate()] then work on the cluster as they do on a context: the
#' prompts are sent to the workers in chunks of `n_seq_max` and the results come
#' back in input order. A worker that dies has its chunk run again on another.
#'
#' With `output`, every result is appended to a JSON Lines file as soon as its
#' chunk finishes (one line per prompt: `index`, `id` (the prompt's name, when
#' the prompts have names), `text`, `finish_reason`, `error` and token counts;
#' `label` and `probs` for [llm_annotate()]; `input_sha256`, a digest of the prompt
#' and its settings, and `model_sha256`, the SHA-256 of the workers' model
#' file). With `resume = TRUE`, the prompts already in that file are not run
#' again, and the result still holds all of them; a file written for other
#' prompts, other settings or by another model is refused. With
#' `retry_errors = TRUE` as well, the prompts whose line holds an error are run
#' again.
#'
#' Needs the Python package `ray` (`pip install 'newrllama[cluster]'`).
#'
#' @param workers Number of worker processes.
#' @param model Path of a GGUF file, its URL or `hf://` address (see
#'   [model_load()]), a model from [model_load()] (its file is loaded by every
#'   worker), or `NULL` for the embedded model.
#' @param threads_per_worker CPU threads of each worker; `NULL` shares out this
#'   machine's cores.
#' @param n_seq_max Prompts decoded together by each worker.
#' @param n_ctx Context size of each worker in tokens; `NULL` gives 1024 per
#'   sequence.
#' @param address `NULL` to start a Ray runtime on this machine, or the address
#'   of a running Ray cluster (`"auto"`, `"ray://host:10001"`).
#' @return `cluster_create()`: an object of class `newrllama_cluster`.
#'   `cluster_stop()`: `NULL`, invisibly.
#' @seealso [generate_parallel()], [llm_annotate()].
#' @examplesIf newrllama::newrllama_available() && reticulate::py_module_available("ray")
#' cluster <- cluster_create(workers = 2)
#' out <- tempfile(fileext = ".jsonl")
#' answers <- generate_parallel(cluster, c(a = "The capital of France is", b = "1, 2, 3,"),
#'                              max_tokens = 8, output = out)
#' readLines(out)
#' cluster_stop(cluster)
#' @export
cluster_create <- function(workers = 2L, model = NULL, threads_per_worker = NULL, n_seq_max = 16L, n_ctx = NULL,
                           address = NULL) {
  workers <- check_count(workers, "workers", min = 1)
  model <- check_model_file(model, local = is.null(address))
  threads_per_worker <- if (is.null(threads_per_worker)) NULL else check_count(threads_per_worker,
                                                                               "threads_per_worker", min = 1)
  n_seq_max <- check_count(n_seq_max, "n_seq_max", min = 1)
  n_ctx <- if (is.null(n_ctx)) NULL else check_count(n_ctx, "n_ctx", min = 1)
  address <- if (is.null(address)) NULL else check_string(address, "address")
  create <- python_helpers()$cluster_create
  py <- with_python(create(model, workers, threads_per_worker, n_seq_max, n_ctx, address))
  info <- with_python(py$workers)
  structure(
    list(py = py, workers = length(info), model = info[[1]]$model, threads_per_worker = info[[1]]$n_threads,
         n_seq_max = info[[1]]$n_seq_max, n_ctx = info[[1]]$n_ctx, address = address),
    class = "newrllama_cluster"
  )
}

#' @rdname cluster_create
#' @param cluster A cluster from `cluster_create()`.
#' @export
cluster_stop <- function(cluster) {
  check_cluster(cluster)
  with_python(cluster$py$close())
  invisible(NULL)
}

#' @export
print.newrllama_cluster <- function(x, ...) {
  cat("<newrllama_cluster>\n")
  cat("  workers:   ", x$workers, " x ", x$threads_per_worker, " threads",
      if (is.null(x$address)) " (local Ray runtime)" else paste0(" (Ray cluster at ", x$address, ")"), "\n", sep = "")
  cat("  model:     ", x$model, "\n", sep = "")
  cat("  n_ctx:     ", x$n_ctx, " tokens per worker\n", sep = "")
  cat("  n_seq_max: ", x$n_seq_max, "\n", sep = "")
  cat("  state:     ", object_state(x$py), "\n", sep = "")
  invisible(x)
}

check_cluster <- function(x, name = "cluster", call = sys.call(-1)) {
  check_class(x, "newrllama_cluster", name, "cluster_create", call = call)
}

# A model for the workers: NULL (each loads the embedded one), a path, or a loaded model's path.
check_model_file <- function(model, local, call = sys.call(-1)) {
  if (is.null(model)) {
    return(NULL)
  }
  if (inherits(model, "newrllama_model")) {
    return(model$path)
  }
  path <- check_model_source(model, "model", must_exist = local, call = call)
  if (local && !is_fetched_model(path)) normalizePath(path) else path
}

# `output`, `resume`, `retry_errors` and the ids of the items (their names, when written to a file) as Python's
# Recording; Python checks them (resume without a file, retry_errors without resume; an id given twice or an empty
# one when the run starts) and its message speaks.
check_output <- function(output, resume, retry_errors, item_names, what, call = sys.call(-1)) {
  args <- python_args(list(output = output, resume = resume, retry_errors = retry_errors), call = call)
  if (is.character(args$output) && length(args$output) == 1) {
    args$output <- path.expand(args$output)
  }
  if (!is.null(output) && !is.null(item_names)) {
    ids <- python_args(stats::setNames(list(item_names), sprintf("names(%s)", what)), call = call)[[1]]
    args$ids <- as.list(unname(ids))
  }
  with_python(python_helpers()$Recording(args$output, args$ids, args$resume, args$retry_errors), call = call)
}
