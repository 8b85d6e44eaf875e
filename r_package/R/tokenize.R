#' Convert between text and tokens
#'
#' `tokenize()` turns text into the model's token ids; `detokenize()` turns
#' token ids back into text.
#'
#' @param model A model from [model_load()].
#' @param text A single string.
#' @param add_special Add the model's special tokens (such as the
#'   beginning-of-text token) as for a prompt.
#' @param tokens An integer vector of token ids.
#' @return `tokenize()`: an integer vector. `detokenize()`: a single string.
#' @examplesIf newrllama::newrllama_available()
#' model <- model_load()
#' tokens <- tokenize(model, "Hello world")
#' tokens
#' detokenize(model, tokens)
#' @export
tokenize <- function(model, text, add_special = TRUE) {
  check_model(model)
  text <- check_string(text, "text")
  add_special <- check_flag(add_special, "add_special")
  tokens <- with_python(model$py$tokenize(text, add_special = add_special))
  as.integer(unlist(tokens))
}

#' @rdname tokenize
#' @export
detokenize <- function(model, tokens) {
  check_model(model)
  tokens <- check_tokens(tokens, "tokens")
  with_python(model$py$detokenize(tokens))
}
