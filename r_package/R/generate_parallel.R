#' Generate text for many prompts at once
#'
#' Runs the prompts through the model, up to the context's `n_seq_max` at a
#' time, decoded together in batches. Each prompt is independent of the
#' others. Batched decoding rounds floats differently from decoding one prompt
#' alone (and copies of one prompt sit in different cells of the KV cache), so
#' an answer can differ slightly from the one [generate_text()] gives, where two
#' candidate tokens are nearly tied.
#'
#' @inheritParams generate_text
#' @param prompts A character vector of prompts; or `NULL` with `messages`.
#' @param progress Show a progress bar.
#' @param choices `NULL`, or a character vector of labels: each answer is then
#'   the most probable label, scored by the log-probability of all its tokens
#'   after the prompt (summed, not normalised by length; with a space in front
#'   when the prompt ends in a word), and `attr(result, "probs")` is a numeric
#'   matrix with one row per prompt and one column per label (the softmax of
#'   the scores; `NA` for a failed prompt). Sampling arguments do not apply.
#'   At most one of `choices`, `grammar` and `json_schema`.
#' @return A character vector with one answer per prompt, in the order of
#'   `prompts` and with its names. A prompt that could not run gives
#'   `NA`; the reasons are in `attr(result, "errors")`, a character vector
#'   named by the positions of the failed prompts, and one warning of class
#'   `newrllama_warning` says how many failed. `attr(result, "finish_reason")`
#'   says why each answer ended: `"stop"` (end of generation, a stop string,
#'   a chosen label or a completed grammar), `"length"` (`max_tokens` reached)
#'   or `"error"`. `attr(result, "stats")` holds
#'   the figures of the call (a named list: `n_prompts`, `n_prompt_tokens`,
#'   `n_gen_tokens`, `n_cached_tokens` (prompt tokens served by the prefix
#'   cache, see [context_create()]), `t_prompt_s`, `t_gen_s`, `t_total_s`,
#'   `tokens_per_second`, `n_decode_calls`, `n_fallbacks`, `n_failed`).
#' @param params `NULL`, or each prompt's own sampling settings, over the
#'   call's: a data frame with one row per prompt and a column per setting
#'   (named as the arguments above, `NA` for the call's value; `stop` as a list
#'   column), or an unnamed list with one named list (or `NULL`) per prompt.
#'   `choices` are the call's alone.
#' @param messages Instead of `prompts`, a list of conversations (each a list
#'   of `list(role = , content = )` or a data frame with columns `role` and
#'   `content`), each put in the model's chat template; their names name the
#'   answers.
#' @param output,resume `NULL`, or the path of a JSON Lines file to which
#'   every answer is appended as soon as it is finished, so that a run killed
#'   half-way loses nothing; `resume = TRUE` then runs only the prompts not yet
#'   in it. The names of `prompts` (if any) identify them in the file. Each
#'   line records the SHA-256 of the model file: resuming with another model is
#'   an error. Same format and rules as on a cluster (see [cluster_create()]).
#' @param retry_errors With `resume = TRUE`: also run again the prompts whose
#'   line in `output` holds an error (their new line follows the old one, and
#'   the last line of a prompt is its answer).
#' @param context A context from [context_create()], or a cluster from
#'   [cluster_create()] (the prompts are then run on its workers).
#' @param ... An unknown argument is an error.
#' @seealso [generate_text()] for a single prompt; [cluster_create()] to run the
#'   prompts on several worker processes or machines.
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' ctx <- context_create(model)
#' prompts <- c(
#'   france = "The capital of Germany is Berlin. The capital of France is",
#'   japan = "The capital of Germany is Berlin. The capital of Japan is"
#' )
#' answers <- generate_parallel(ctx, prompts, max_tokens = 4)
#' answers
#' attr(answers, "stats")$tokens_per_second
#' @export
generate_parallel <- function(context, prompts = NULL, max_tokens = 100L, top_k = 40L, top_p = 1.0,
                              temperature = 0.0, repeat_last_n = 64L, penalty_repeat = 1.0, seed = 1234L,
                              progress = interactive(), choices = NULL, grammar = NULL, json_schema = NULL,
                              min_p = 0.0, stop = NULL, params = NULL, messages = NULL, output = NULL,
                              resume = FALSE, retry_errors = FALSE, ...) {
  check_dots_empty(...)
  check_runner(context)
  prompts <- prompts_or_messages(context, prompts, messages)
  args <- generation_args(prompts, progress, environment())
  target <- check_output(output, resume, retry_errors, names(args$prompts), "prompts")
  if (length(args$prompts) == 0) {
    return(args$prompts) # keeps the (empty) names, if any
  }
  answers_vector(run_prompts(context, as.list(unname(args$prompts)), args$params, args$progress, target),
                 args$prompts, choices)
}

# What runs prompts: a context, or a cluster of them.
check_runner <- function(x, call = sys.call(-1)) {
  if (inherits(x, "newrllama_cluster")) {
    return(check_cluster(x, "context", call = call))
  }
  if (!inherits(x, "newrllama_context")) {
    abort_invalid(sprintf(paste0("`context` must be a newrllama_context object made by context_create() or a ",
                                 "newrllama_cluster made by cluster_create(), not %s"), describe(x)), call = call)
  }
  check_context(x, call = call)
}

# The checked prompts, sampling parameters (the method's arguments named as SamplingParams' fields, in
# its frame) and progress flag of a generate_parallel() method.
generation_args <- function(prompts, progress, frame, call = sys.call(-1)) {
  list(prompts = check_prompts(prompts, call = call),
       params = sampling_params(frame, call = call),
       progress = check_flag(progress, "progress", call = call))
}

# The character vector generate_parallel() returns, from the unpacked completions of run_prompts().
answers_vector <- function(result, prompts, choices) {
  text <- result$text
  text[result$failed] <- NA_character_
  names(text) <- names(prompts)
  attr(text, "finish_reason") <- result$finish_reason
  attr(text, "stats") <- result$stats
  if (!is.null(choices)) {
    attr(text, "probs") <- probability_matrix(result$probs, choices, names(prompts))
  }
  with_errors(text, result$failed, result$errors)
}

# A matrix of one row per item and one column per label, from Python's rows (NULL: a failed item, NA).
probability_matrix <- function(rows, labels, names) {
  m <- matrix(NA_real_, length(rows), length(labels), dimnames = list(names, labels))
  for (i in seq_along(rows)) {
    if (!is.null(rows[[i]])) {
      m[i, ] <- as.numeric(unlist(rows[[i]]))
    }
  }
  m
}

# `result` with attr(, "errors") (the reasons, named by position) and one warning, when items failed.
with_errors <- function(result, failed, errors, warn = TRUE) {
  if (any(failed)) {
    errors <- errors[failed]
    names(errors) <- which(failed)
    attr(result, "errors") <- errors
    if (warn) {
      warn_failed_prompts(sum(failed), length(result))
    }
  }
  result
}

# Runs prompts (a list of strings or token lists) and returns texts, finish
# reasons, failure flags, error messages and statistics. The Completion objects are unpacked in
# Python, in one call, rather than field by field through reticulate.
# `target` (output, resume, retry_errors, ids) from check_output(): the file the answers are written to.
run_prompts <- function(context, prompts, params, progress,
                        target = check_output(NULL, FALSE, FALSE, NULL, "prompts"), call = sys.call(-1)) {
  force(call)
  run <- python_helpers()$run
  unpack_completions(with_python(run(context$py, prompts, params, progress, target$ids, target$output,
                                     target$resume, target$retry_errors), call = call))
}

unpack_completions <- function(out) {
  finish_reason <- as.character(unlist(out$finish_reason))
  list(
    text = as.character(unlist(out$text)),
    finish_reason = finish_reason,
    failed = finish_reason == "error",
    errors = as.character(unlist(out$error)),
    stats = out$stats,
    probs = out$probs
  )
}

# The Python side of the R package: functions that unpack results in one call
# (rather than field by field through reticulate), in newrllama._r_helpers.
python_helpers <- function() {
  if (is.null(the$helpers)) {
    py_newrllama()
    the$helpers <- with_python(reticulate::import("newrllama._r_helpers", delay_load = FALSE))
  }
  the$helpers
}
