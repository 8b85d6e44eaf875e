#' Generate text for many prompts at once
#'
#' Runs the prompts through the model, up to the context's `n_seq_max` at a
#' time, decoded together in batches. Each prompt is independent of the
#' others: on a context made with `batch_invariant = TRUE` (the default of
#' [context_create()]) an answer is the one [generate_text()] gives for its
#' prompt alone, bit for bit; with `FALSE` batched decoding may round
#' differently, which can change an answer where two candidate tokens are
#' nearly tied. [llm_generate()] gives each answer with its finish reason,
#' token counts and label probabilities, as columns of a data frame.
#'
#' @inheritParams generate_text
#' @param prompts A character vector of prompts; or `NULL` with `messages`.
#' @param progress Show a cli progress bar with the time left (`TRUE`, the
#'   default). It appears once a call has run `cli.progress_show_after`
#'   seconds (2), in place in interactive sessions and as lines under
#'   Rscript and knitr; `options(cli.progress_show_after = Inf)` turns bars
#'   off.
#' @param choices `NULL`, or a character vector of labels: each answer is then
#'   the most probable label, scored by the log-probability of all its tokens
#'   after the prompt (summed, not normalised by length; with a space in front
#'   when the prompt ends in a word); [llm_generate()] gives every label's
#'   probability (the softmax of the scores) in `.probs`. Sampling arguments do
#'   not apply. At most one of `choices`, `grammar` and `json_schema`.
#' @return `generate_parallel()`: a character vector with one answer per
#'   prompt, in the order of `prompts` and with its names. A prompt that could
#'   not run gives `NA`, and one warning of class `newrllama_failed_prompts`
#'   says how many failed and carries the reasons in its `errors` (named by the
#'   positions of the failed prompts). [last_stats()] gives the figures of the
#'   call.
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
#' last_stats(ctx)$tokens_per_second
#' @export
generate_parallel <- function(context, prompts = NULL, max_tokens = 100L, top_k = 40L, top_p = 1.0,
                              temperature = 0.0, repeat_last_n = 64L, penalty_repeat = 1.0, seed = 1234L,
                              progress = TRUE, choices = NULL, grammar = NULL, json_schema = NULL,
                              min_p = 0.0, stop = NULL, params = NULL, messages = NULL, output = NULL,
                              resume = FALSE, retry_errors = FALSE, ...) {
  check_dots_empty(...)
  done <- run_generation(context, prompts, messages, environment())
  warn_failed(done$errors, done$failed, "llm_generate()")
  answers <- done$text
  answers[done$failed] <- NA_character_
  stats::setNames(answers, names(done$prompts))
}

#' Generate text for a column of prompts, with what each answer came with
#'
#' [generate_parallel()] on a data frame's column: each row's answer, why it
#' ended, its token counts and, with `choices`, every label's probability, as
#' columns that survive subsetting.
#'
#' @param .data A data frame.
#' @param col The column of prompts (a bare name or a string): a character
#'   column, or a list-column of conversations as `messages` of
#'   [generate_parallel()] takes them.
#' @param context A context from [context_create()] or a cluster from
#'   [cluster_create()]; `NULL` for the session's ([llm_use()]).
#' @param ... Arguments of [generate_parallel()] (sampling settings,
#'   `choices`, `params`, `output`, `resume`, `progress`, ...); with `output`,
#'   the file names the rows by their positions.
#' @param pred_name The name of the answer column.
#' @return `.data` with the answer column (`NA` where a prompt failed),
#'   `.finish_reason` (`"stop"`: end of generation, a stop string, a chosen
#'   label or a completed grammar; `"length"`: `max_tokens` reached;
#'   `"error"`), `.n_prompt_tokens`, `.n_gen_tokens`, `.n_cached_tokens`
#'   (prompt tokens served by the prefix cache), `.error` (why a prompt failed,
#'   `NA` where it did not) and, with `choices`, `.probs` (a list-column: each
#'   prompt's label probabilities, named by label; `NULL` for a failed
#'   prompt).
#' @seealso [generate_parallel()], [last_stats()].
#' @examplesIf newrllama::newrllama_available()
#' ctx <- context_create(model_load())
#' prompts <- data.frame(prompt = c("The capital of France is", "The capital of Japan is"))
#' llm_generate(prompts, prompt, ctx, max_tokens = 4)
#' @export
llm_generate <- function(.data, col, context = NULL, ..., pred_name = ".text") {
  if (!is.data.frame(.data)) {
    abort_invalid(sprintf("`.data` must be a data frame, not %s", describe(.data)))
  }
  column <- column_or_values(.data, substitute(col), parent.frame(), "col")
  if (!is.list(column) && !is.character(column) && !is.factor(column)) {
    abort_invalid("`col` must name a column of `.data` holding prompts or conversations")
  }
  pred_name <- check_string(pred_name, "pred_name")
  settings <- list(...)
  allowed <- setdiff(names(formals(generate_parallel)), c("context", "prompts", "messages", "..."))
  unknown <- setdiff(names(settings), allowed)
  if (length(settings) && (is.null(names(settings)) || any(!nzchar(names(settings))) || length(unknown))) {
    abort_invalid(sprintf("every argument in `...` must be one of generate_parallel()'s: %s",
                          paste(allowed, collapse = ", ")))
  }
  context <- session_runner(context)
  if (is.null(context)) {
    abort_invalid("`context` is NULL and no session model is set: give a context, or set one with llm_use()")
  }
  if (inherits(context, "newrllama_model")) context <- session_generation_context(context)
  defaults <- lapply(formals(generate_parallel)[allowed], eval)
  frame <- list2env(utils::modifyList(defaults, settings, keep.null = TRUE))
  if (is.list(column)) {
    done <- run_generation(context, NULL, column, frame)
  } else {
    done <- run_generation(context, as.character(column), NULL, frame)
  }
  warn_failed(done$errors, done$failed, "llm_generate()")
  .data[[pred_name]] <- ifelse(done$failed, NA_character_, done$text)
  .data$.finish_reason <- done$finish_reason
  .data$.n_prompt_tokens <- done$n_prompt_tokens
  .data$.n_gen_tokens <- done$n_gen_tokens
  .data$.n_cached_tokens <- done$n_cached_tokens
  .data$.error <- ifelse(done$failed, done$errors, NA_character_)
  if (!is.null(frame$choices)) {
    choices <- as.character(frame$choices)
    .data$.probs <- named_number_rows(done$probs, choices)
  }
  .data
}

#' The figures of the last call on a context or cluster
#'
#' @param context A context from [context_create()] or a cluster from
#'   [cluster_create()].
#' @return A named list (`NULL` before the first call): on a context
#'   `n_prompts`, `n_prompt_tokens`, `n_gen_tokens`, `n_cached_tokens` (prompt
#'   tokens served by the prefix cache, see [context_create()]), `t_prompt_s`,
#'   `t_gen_s`, `t_total_s`, `tokens_per_second`, `n_decode_calls`,
#'   `n_fallbacks`, `n_failed`; on a cluster `n_prompts`, `n_resumed`,
#'   `n_failed`, `n_chunks`, `n_retried_chunks`, `n_workers_replaced`,
#'   `t_total_s`, `t_driver_s`, `t_write_s`, `prompts_per_second`.
#' @seealso [engine_stats()] for the engine's figures since the context was made.
#' @examplesIf newrllama::newrllama_available()
#' ctx <- context_create(model_load())
#' generate_parallel(ctx, c("One", "Two"), max_tokens = 2)
#' last_stats(ctx)$n_gen_tokens
#' @export
last_stats <- function(context) {
  check_runner(context)
  with_python(python_helpers()$last_stats(context$py))
}

# The checked prompts (or conversations), sampling settings (read from `frame`, which holds generate_parallel()'s
# arguments) and file, run on a context or cluster: the unpacked completions, with the prompts.
run_generation <- function(context, prompts, messages, frame, call = sys.call(-1)) {
  check_runner(context, call = call)
  prompts <- prompts_or_messages(context, prompts, messages, call = call)
  args <- generation_args(prompts, frame$progress, frame, call = call)
  recording <- check_output(frame$output, frame$resume, frame$retry_errors, names(args$prompts), "prompts", call = call)
  if (length(args$prompts) == 0) {
    return(list(prompts = args$prompts, text = character(), finish_reason = character(), failed = logical(),
                errors = character(), n_prompt_tokens = integer(), n_gen_tokens = integer(),
                n_cached_tokens = integer(), probs = list()))
  }
  done <- run_prompts(context, as.list(unname(args$prompts)), args$params, args$progress, recording, call = call)
  done$prompts <- args$prompts
  done
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
       progress = progress_reporter(progress, "prompts", frame = parent.frame(), call = call))
}

# Runs prompts (a list of strings or token lists) and returns texts, finish
# reasons, failure flags, error messages and statistics. The Completion objects are unpacked in
# Python, in one call, rather than field by field through reticulate.
# `recording` (Python's Recording, from check_output(); NULL: none) names the file the answers are written to.
run_prompts <- function(context, prompts, params, progress, recording = NULL, call = sys.call(-1)) {
  force(call)
  run <- python_helpers()$run
  unpack_completions(with_python(run(context$py, prompts, params, progress, recording), call = call))
}

unpack_completions <- function(out) {
  finish_reason <- as.character(unlist(out$finish_reason))
  list(
    text = as.character(unlist(out$text)),
    finish_reason = finish_reason,
    failed = finish_reason == "error",
    errors = as.character(unlist(out$error)),
    n_prompt_tokens = as.integer(unlist(out$n_prompt_tokens)),
    n_gen_tokens = as.integer(unlist(out$n_gen_tokens)),
    n_cached_tokens = as.integer(unlist(out$n_cached_tokens)),
    probs = out$probs
  )
}
