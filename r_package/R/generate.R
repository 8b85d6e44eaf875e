#' Generate text for one prompt
#'
#' Runs one prompt through the model. With the default `temperature = 0`
#' decoding is greedy and the answer is the same each time.
#'
#' @param context A context from [context_create()].
#' @param prompt A single string, or an integer vector of token ids (see
#'   [tokenize()]); or `NULL` with `messages`.
#' @param max_tokens Maximum number of tokens to generate.
#' @param top_k Sample from the `top_k` most likely tokens (0 = all).
#' @param top_p Sample from the smallest set of tokens whose probability
#'   reaches `top_p` (1 = all).
#' @param temperature Sampling temperature; 0 is greedy decoding.
#' @param repeat_last_n Number of recent tokens the repetition penalty looks at
#'   (0 = none, -1 = the whole context; 64, as llama.cpp, so that a penalty
#'   given alone takes effect).
#' @param penalty_repeat Repetition penalty (1 = none).
#' @param seed Random seed, a whole number up to 2^32 - 1; -1 draws a
#'   random one. Each prompt's random stream comes from the seed, the
#'   prompt's tokens and how many identical prompts came before it in the call,
#'   not from its position: re-running a subset of prompts gives the same answers.
#' @param grammar `NULL`, or a GBNF grammar (one string, with a rule named
#'   `root`) that every answer follows; `max_tokens` may still cut it short.
#' @param json_schema `NULL`, or a JSON schema (a JSON string, or a named list)
#'   that every answer follows, converted to a grammar by llama-cpp-python's
#'   converter. At most one of `grammar` and `json_schema`.
#' @param min_p Drop tokens less probable than `min_p` times the most probable
#'   one (0 = none).
#' @param stop `NULL`, or a character vector of strings that end the answer
#'   where they first appear; they are left out of the text.
#' @param messages Instead of `prompt`, a conversation: a list of
#'   `list(role = , content = )` or a data frame with columns `role` and
#'   `content`, put in the model's chat template (see [apply_chat_template()])
#'   so that the model answers as the assistant.
#' @param stream `NULL`, or a function called with each piece of the answer as
#'   soon as it is generated (for example `function(piece) cat(piece)`). It
#'   returns `TRUE` or `NULL` to go on, `FALSE` to end the answer there. An error
#'   in it, any other value, or Ctrl-C ends the answer, frees its sequence and
#'   signals a classed error. Someone reads a streamed answer as it comes, so on a
#'   context that other callers keep busy its prompt goes ahead of theirs, and
#'   every step carries its next token.
#' @return The generated text, a single string (with `stream`, what was
#'   generated until the answer ended or the callback returned `FALSE`). A prompt
#'   that cannot run (for example one too long for its share of the context)
#'   signals an error of class `newrllama_error`.
#' @seealso [generate_parallel()] for many prompts at once.
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' ctx <- context_create(model)
#' generate_text(ctx, "The capital of Germany is Berlin. The capital of France is",
#'          max_tokens = 4)
#' generate_text(ctx, "Once upon a time", max_tokens = 8, stream = function(piece) cat(piece))
#' @export
generate_text <- function(context, prompt = NULL, max_tokens = 100L, top_k = 40L, top_p = 1.0,
                          temperature = 0.0, repeat_last_n = 64L, penalty_repeat = 1.0, seed = 1234L,
                          grammar = NULL, json_schema = NULL, min_p = 0.0, stop = NULL, messages = NULL,
                          stream = NULL) {
  check_context(context)
  if (is.null(messages)) {
    prompt <- check_prompt(prompt)
  } else if (is.null(prompt)) {
    prompt <- chat_prompts(context, list(messages))
  } else {
    abort_invalid("give `prompt` or `messages`, not both", call = sys.call())
  }
  params <- sampling_params(environment())
  if (!is.null(stream)) {
    return(stream_answer(context, prompt, params, stream))
  }
  result <- run_prompts(context, list(prompt), params, progress = FALSE)
  if (result$failed[1]) {
    abort(sprintf("the prompt could not be run: %s", result$errors[1]), "newrllama_prompt_error",
          call = sys.call())
  }
  result$text[1]
}

#' newrllama4's `generate()`, as a method of `generics::generate()`
#'
#' With the generics package loaded, `generate(ctx, prompt, ...)` runs one
#' prompt on a context, as [generate_text()] does (newrllama4 called it
#' `generate()`; newrllama does not export a `generate` of its own, which would
#' mask generics').
#'
#' @param x A context from [context_create()].
#' @param ... [generate_text()]'s arguments: `prompt`, `max_tokens`, ...
#' @return The generated text, a single string.
#' @examplesIf newrllama::newrllama_available() && requireNamespace("generics", quietly = TRUE)
#' ctx <- context_create(model_load())
#' generics::generate(ctx, "The capital of France is", max_tokens = 4)
#' @exportS3Method generics::generate
generate.newrllama_context <- function(x, ...) {
  generate_text(x, ...)
}

# The answer to one prompt, its pieces handed to `callback` as they come. Leaving early (the
# callback returns FALSE or fails, or Ctrl-C) closes the stream, which frees the prompt's sequence.
stream_answer <- function(context, prompt, params, callback, call = sys.call(-1)) {
  if (!is.function(callback)) {
    abort_invalid(sprintf("`stream` must be a function of one argument (a piece of text), not %s",
                          describe(callback)), call = call)
  }
  pieces <- with_python(context$py$stream(prompt, params), call = call)
  on.exit(pieces$close())
  text <- character()
  repeat {
    piece <- with_python(reticulate::iter_next(pieces, completed = NULL), call = call)
    if (is.null(piece)) {
      break
    }
    text <- c(text, piece)
    go_on <- tryCatch(callback(piece), error = function(e) {
      abort(sprintf("`stream` failed: %s", conditionMessage(e)), "newrllama_callback_error", call = call,
            parent = e)
    })
    if (isFALSE(go_on)) {
      break
    }
    if (!is.null(go_on) && !isTRUE(go_on)) {
      abort_invalid(sprintf("`stream` must return TRUE or NULL (go on) or FALSE (stop), not %s", describe(go_on)),
                    call = call)
    }
  }
  paste(text, collapse = "")
}

# Conversations (each a list of messages or a data frame) as prompts in the chat template of the model of
# `context` (a context, or a cluster's workers).
chat_prompts <- function(context, conversations, call = sys.call(-1)) {
  checked <- lapply(conversations, check_messages, call = call)
  with_python(as.character(unlist(python_helpers()$chat_prompts(context$py, unname(checked)))), call = call)
}

# `prompts`, or the prompts made from `messages` (a list of conversations, named as the answers will be).
prompts_or_messages <- function(context, prompts, messages, call = sys.call(-1)) {
  if (is.null(messages)) {
    return(prompts)
  }
  if (!is.null(prompts)) {
    abort_invalid("give `prompts` or `messages`, not both", call = call)
  }
  if (!is.list(messages) || is.data.frame(messages)) {
    abort_invalid(sprintf("`messages` must be a list of conversations, not %s", describe(messages)), call = call)
  }
  stats::setNames(chat_prompts(context, messages, call = call), names(messages))
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
