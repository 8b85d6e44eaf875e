#' Generate text for one prompt
#'
#' Runs one prompt through the model. With the default `temperature = 0`
#' decoding is greedy and the answer is the same each time.
#'
#' @param context A context from [context_create()].
#' @param prompt A single string, or an integer vector of token ids (see
#'   [tokenize()]).
#' @param max_tokens Maximum number of tokens to generate.
#' @param top_k Sample from the `top_k` most likely tokens (0 = all).
#' @param top_p Sample from the smallest set of tokens whose probability
#'   reaches `top_p` (1 = all).
#' @param temperature Sampling temperature; 0 is greedy decoding.
#' @param repeat_last_n Number of recent tokens the repetition penalty looks at
#'   (0 = none, -1 = the whole context).
#' @param penalty_repeat Repetition penalty (1 = none).
#' @param seed Random seed, a whole number up to 2^32 - 1; a negative seed
#'   draws a random one. Each prompt's random stream comes from the seed, the
#'   prompt's tokens and how many identical prompts came before it in the call,
#'   not from its position: re-running a subset of prompts gives the same answers.
#' @param grammar `NULL`, or a GBNF grammar (one string, with a rule named
#'   `root`) that every answer follows; `max_tokens` may still cut it short.
#' @param json_schema `NULL`, or a JSON schema (a JSON string, or a named list)
#'   that every answer follows, converted to a grammar by llama-cpp-python's
#'   converter. At most one of `grammar` and `json_schema`.
#' @return The generated text, a single string. A prompt that cannot run (for
#'   example one too long for its share of the context) signals an error of
#'   class `newrllama_error`.
#' @seealso [generate_parallel()] for many prompts at once.
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' ctx <- context_create(model)
#' generate(ctx, "The capital of Germany is Berlin. The capital of France is",
#'          max_tokens = 4)
#' @export
generate <- function(context, prompt, max_tokens = 100L, top_k = 40L, top_p = 1.0,
                     temperature = 0.0, repeat_last_n = 0L, penalty_repeat = 1.0, seed = 1234L,
                     grammar = NULL, json_schema = NULL) {
  check_context(context)
  prompt <- check_prompt(prompt)
  params <- sampling_params(max_tokens, top_k, top_p, temperature, repeat_last_n, penalty_repeat, seed,
                            grammar = grammar, json_schema = json_schema)
  result <- run_prompts(context, list(prompt), params, progress = FALSE)
  if (result$failed[1]) {
    abort(sprintf("the prompt could not be run: %s", result$errors[1]), "newrllama_prompt_error",
          call = sys.call())
  }
  result$text[1]
}

# A prompt is a single string or a vector of token ids; tokens go to Python as
# a list.
check_prompt <- function(prompt, call = sys.call(-1)) {
  if (is.character(prompt)) {
    return(check_string(prompt, "prompt", call = call))
  }
  if (is.numeric(prompt)) {
    return(check_tokens(prompt, "prompt", call = call))
  }
  abort_invalid(sprintf("`prompt` must be a single string or an integer vector of token ids, not %s",
                        describe(prompt)), call = call)
}
