#' Plan a labelling run before it runs
#'
#' What [llm_annotate()] with the same arguments will take: every text's
#' tokens and its longest prompt as it will run, the texts that do not fit a
#' sequence whole (cut or failing, by `too_long`), the context (its size, and
#' the memory it took when the plan made it) and a time estimate from a few
#' texts labelled on this machine.
#'
#' @inheritParams llm_annotate
#' @inheritParams annotation_options
#' @param context A context from [context_create()], or `NULL` for the
#'   session's ([llm_use()]) or, without one, the context [llm_annotate()] would make (sized for the texts, with the settings in
#'   `...`), which the plan makes, measures and closes.
#' @param sample How many texts to label (spread over the input) to time the
#'   run; `0` for no estimate.
#' @return A `newrllama_annotation_plan`: a list with `texts` (a tibble, one
#'   row per text: `text_tokens`, `prompt_tokens`, `tokens_cut`, `error`: why
#'   a text will fail before any prompt runs), `too_long_texts` (the rows that
#'   do not fit a sequence whole), `n_prompts`, `n_ctx`, `n_seq_max`,
#'   `model_bytes`, `context_bytes` (`NA` for a context given, or where the
#'   system does not say), `sample` (the rows timed), `sample_seconds` and
#'   `seconds` (the run's estimate: the sample's time scaled by the tokens each
#'   text adds to the prompts' shared start; `NA` without a sample; with a
#'   `cascade`, both stages'), `second_seconds` and `second_share` (a
#'   cascade's second model: its time, from the same sample timed on it, for
#'   the share of texts its rule sends on; `NA` without one). `print()` sums it
#'   up.
#' @param cascade A [cascade()], whose second stage the plan times too.
#' @seealso [llm_annotate()], whose `too_long` the plan follows.
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' stories <- data.frame(text = c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."))
#' plan_annotation(stories, text, c("acquisition", "crude oil"), sample = 1)
#' @export
plan_annotation <- function(.data, col, labels = NULL, instruction = "", context = NULL, ..., sample = 8L,
                            cascade = NULL,
                            # <annotation task options>
                            definitions = NULL, examples = NULL, codebook = NULL, debias = NULL, calibration = NULL,
                            examples_in = NULL, too_long = NULL
                            # </annotation task options>
                            ) {
  x <- text_column(.data, substitute(col), parent.frame())
  if (is.factor(x)) x <- as.character(x)
  if (!is.character(x)) {
    abort_invalid(sprintf("the texts must be a character vector, not %s", describe(x)))
  }
  task <- task_of_call(labels, instruction, mget(annotation_task_options), sys.call())
  sample <- check_count(sample, "sample")
  context <- session_runner(context)
  model <- if (inherits(context, "newrllama_model")) context else NULL
  if (!is.null(model)) context <- NULL
  if (!is.null(context)) check_context(context)
  if (!is.null(cascade) && !inherits(cascade, "newrllama_cascade")) {
    abort_invalid(sprintf("`cascade` must come from cascade(), not %s", describe(cascade)))
  }
  plan <- with_python(do.call(python_helpers()$plan_annotation,
                              c(list(na_to_none(x), task$py, if (is.null(context)) NULL else context$py,
                                     if (!is.null(model)) model$py else if (is.null(context)) embedded_model(),
                                     sample),
                                python_args(list(...)), list(cascade = cascade$py))))
  for (message in unlist(plan$base_model)) warn_base_model(message)
  number <- function(v) if (is.null(v)) NA_real_ else as.numeric(v)
  structure(list(
    texts = tibble::tibble(
      text_tokens = vapply(plan$text_tokens, function(v) if (is.null(v)) NA_integer_ else as.integer(v), integer(1)),
      prompt_tokens = vapply(plan$prompt_tokens, function(v) if (is.null(v)) NA_integer_ else as.integer(v),
                             integer(1)),
      tokens_cut = as.integer(unlist(plan$tokens_cut)),
      error = vapply(plan$errors, function(e) if (is.null(e)) NA_character_ else e, character(1))
    ),
    too_long_texts = as.integer(unlist(plan$too_long_texts)) + 1L, too_long = plan$too_long,
    n_prompts = as.integer(plan$n_prompts), n_ctx = as.integer(plan$n_ctx), n_seq_max = as.integer(plan$n_seq_max),
    model_bytes = number(plan$model_bytes), context_bytes = number(plan$context_bytes),
    sample = as.integer(unlist(plan$sample)) + 1L, sample_seconds = number(plan$sample_seconds),
    seconds = number(plan$seconds), second_seconds = number(plan$second_seconds),
    second_share = number(plan$second_share), summary = plan$summary
  ), class = "newrllama_annotation_plan")
}

#' @export
print.newrllama_annotation_plan <- function(x, ...) {
  cat("<newrllama_annotation_plan>\n", x$summary, "\n", sep = "")
  invisible(x)
}
