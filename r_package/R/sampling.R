# Builds the Python SamplingParams from the newrllama4-style arguments, checking
# each one in R first. SamplingParams insists on Python ints, hence as.integer().
sampling_params <- function(max_tokens, top_k, top_p, temperature, repeat_last_n,
                            penalty_repeat, seed, choices = NULL, grammar = NULL, json_schema = NULL,
                            call = sys.call(-1)) {
  max_tokens <- check_count(max_tokens, "max_tokens", min = 1, call = call)
  top_k <- check_count(top_k, "top_k", min = 0, call = call)
  top_p <- check_number(top_p, "top_p", min = 0, max = 1, call = call)
  temperature <- check_number(temperature, "temperature", min = 0, call = call)
  repeat_last_n <- check_count(repeat_last_n, "repeat_last_n", min = -1, call = call)
  penalty_repeat <- check_number(penalty_repeat, "penalty_repeat", min = 0, min_open = TRUE, call = call)
  seed <- check_seed(seed, call = call)
  if (!is.null(choices)) {
    if (!is.character(choices) || anyNA(choices)) {
      abort_invalid(sprintf("`choices` must be a character vector of labels without NA, not %s", describe(choices)),
                    call = call)
    }
    choices <- as.list(unname(choices)) # a Python list even for one label, so Python's check names the problem
  }
  if (!is.null(grammar)) {
    grammar <- check_string(grammar, "grammar", call = call)
  }
  if (!is.null(json_schema) && !(is.list(json_schema) && !is.null(names(json_schema)))) {
    json_schema <- check_string(json_schema, "json_schema", call = call)
  }
  nl <- py_newrllama()
  if (!is.integer(seed)) {
    seed <- py_int(seed)
  }
  with_python(nl$SamplingParams(
    max_tokens = max_tokens, temperature = temperature, top_k = top_k, top_p = top_p,
    repeat_last_n = repeat_last_n, penalty_repeat = penalty_repeat, seed = seed, choices = choices,
    grammar = grammar, json_schema = json_schema
  ), call = call)
}

# Seeds go up to 2^32 - 1 (negative = random); values past R's integer range
# are handed over as Python ints.
check_seed <- function(seed, call = sys.call(-1)) {
  if (!is_whole_number(seed) || seed < -2^31 || seed > 2^32 - 1) {
    abort_invalid(sprintf("`seed` must be a whole number in [-2^31, 2^32 - 1], not %s", describe(seed)),
                  call = call)
  }
  if (abs(seed) <= .Machine$integer.max) as.integer(seed) else as.numeric(seed)
}
