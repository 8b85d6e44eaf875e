#' Create a context on a model
#'
#' A context is the model's working memory. Its `n_ctx` token cells are split
#' evenly between `n_seq_max` sequences: up to `n_seq_max` prompts are decoded
#' together, and each prompt with its answer must fit in `n_ctx / n_seq_max`
#' tokens.
#'
#' With `prefix_cache = TRUE` (the default), the context keeps runs of tokens
#' it decoded, and a prompt starts from the longest one it begins with, across
#' calls and callers: a beginning of 8 tokens or more shared by prompts waiting
#' together (an instruction followed by different documents, from one call or
#' from many callers) is decoded once for all of them, a prompt that starts
#' while another with the same beginning runs copies what that one decoded,
#' and what a finished prompt decoded (its prompt and answer: the next turn of
#' a chat starts with it) stays for later ones. The least recently used runs
#' are evicted first. [last_stats()]`$n_cached_tokens` after
#' [generate_parallel()] says how many prompt tokens came from the cache.
#'
#' Answers and probabilities are the same bits whatever ran before on the
#' context, whether a prompt's start came from the cache, and (with
#' `batch_invariant = TRUE`, the default) whichever other prompts shared its
#' steps: a prompt alone gives what it gives in any batch. Fixed `n_threads`,
#' `n_batch` and `n_seq_max` give the same bits in another session on a
#' machine of the same kind; [engine_stats()] records what they depend on.
#'
#' @param model A model from [model_load()].
#' @param n_ctx Total context size in tokens.
#' @param n_threads Number of CPU threads; `NULL` uses all cores.
#' @param n_seq_max Number of prompts decoded together.
#' @param prefix_cache Decode a shared prompt prefix once (`TRUE`, the
#'   default) or every prompt in full (`FALSE`).
#' @param batch_invariant `TRUE` (the default): a prompt's answer and
#'   probabilities do not depend on the other prompts decoded with it, or on
#'   how its prompt was cut into pieces (K and V are kept in bf16). `FALSE`
#'   keeps llama.cpp's f16 cells, whose attention prefills long prompts
#'   faster; a prompt's numbers may then depend on the steps it shared. On a
#'   model with layers offloaded to a GPU (see [model_load()]'s
#'   `n_gpu_layers`) `TRUE` cannot be held: a warning of class
#'   `newrllama_determinism_warning` says so and the context records `FALSE`.
#' @param n_batch Most prompt tokens decoded in one step (prefill is done in
#'   chunks of this size, shared between the prompts being prefilled).
#' @return An object of class `newrllama_context`, which keeps its model alive.
#' @seealso [generate_text()], [generate_parallel()].
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' ctx <- context_create(model, n_ctx = 1024, n_seq_max = 4)
#' ctx
#' @export
context_create <- function(model, n_ctx = 4096L, n_threads = NULL, n_seq_max = 8L, prefix_cache = TRUE,
                           n_batch = 512L, batch_invariant = TRUE) {
  check_model(model)
  args <- python_args(list(n_ctx = n_ctx, n_seq_max = n_seq_max, n_threads = n_threads,
                           prefix_cache = prefix_cache, n_batch = n_batch, batch_invariant = batch_invariant))
  made <- with_python(do.call(python_helpers()$context, c(list(model$py), args)))
  py <- made[[1]]
  if (!is.null(made[[2]])) {
    warn_determinism(made[[2]])
  }
  structure(
    list(
      py = py,
      model = model,
      n_ctx = with_python(py$n_ctx),
      n_seq_max = with_python(py$n_seq_max),
      n_ctx_seq = with_python(py$n_ctx_seq),
      n_threads = with_python(py$n_threads),
      prefix_cache = with_python(py$prefix_cache),
      batch_invariant = with_python(py$batch_invariant)
    ),
    class = "newrllama_context"
  )
}

#' @export
print.newrllama_context <- function(x, ...) {
  cat("<newrllama_context>\n")
  cat("  model:     ", x$model$path, "\n", sep = "")
  cat("  n_ctx:     ", x$n_ctx, " tokens (", x$n_ctx_seq, " per sequence)\n", sep = "")
  cat("  n_seq_max: ", x$n_seq_max, "\n", sep = "")
  cat("  n_threads: ", x$n_threads, "\n", sep = "")
  cat("  prefix cache: ", if (isTRUE(x$prefix_cache)) "on" else "off", "\n", sep = "")
  cat("  batch-invariant: ", if (isTRUE(x$batch_invariant)) "yes" else "no", "\n", sep = "")
  cat("  state:     ", object_state(x$py), "\n", sep = "")
  invisible(x)
}

#' The engine's figures for a context
#'
#' What the context's scheduler has done since the context was made: the steps
#' it ran (each one batched decode of every running prompt), the time spent in
#' them (in C) and around them (the scheduler, in Python), the prefix cache,
#' and the prompts running and waiting now.
#'
#' @param context A context from [context_create()].
#' @return A named list: `n_steps`, `t_step_s`, `t_python_s`,
#'   `python_us_per_step`, `n_cached_prefixes`, `n_prefix_evictions`,
#'   `n_running`, `n_waiting`, and `determinism`: what the context's numbers
#'   repeat with (`batch_invariant`, `n_threads`, `n_batch`, `n_seq_max`, and
#'   `build`: llama-cpp-python's version and the CPU features it uses).
#' @examplesIf newrllama::newrllama_available()
#' ctx <- context_create(model_load(), n_ctx = 1024, n_seq_max = 2)
#' invisible(generate_text(ctx, "Once upon a time", max_tokens = 4))
#' engine_stats(ctx)$n_steps
#' @export
engine_stats <- function(context) {
  check_context(context)
  with_python(python_helpers()$engine_stats(context$py))
}
