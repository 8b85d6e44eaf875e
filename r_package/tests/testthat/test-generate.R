skip_if_no_newrllama()
model <- test_model()
ctx <- test_context(model)

test_that("generate_text() answers a factual prompt", {
  answer <- generate_text(ctx, capital_prompt(), max_tokens = 4)
  expect_type(answer, "character")
  expect_length(answer, 1)
  expect_match(answer, "Paris")
})

test_that("a prompt given as tokens gives the same answer as the text", {
  tokens <- tokenize(model, capital_prompt())
  expect_equal(generate_text(ctx, tokens, max_tokens = 4), generate_text(ctx, capital_prompt(), max_tokens = 4))
})

test_that("sampling with a fixed seed is reproducible, including seeds above 2^31", {
  a <- generate_text(ctx, capital_prompt(), max_tokens = 4, temperature = 0.8, seed = 2^32 - 1)
  b <- generate_text(ctx, capital_prompt(), max_tokens = 4, temperature = 0.8, seed = 2^32 - 1)
  expect_equal(a, b)
  expect_type(generate_text(ctx, capital_prompt(), max_tokens = 2, temperature = 0.8, seed = -1), "character")
})

test_that("a prompt that cannot run is a newrllama_error", {
  expect_error(generate_text(ctx, "", max_tokens = 2), "empty", class = "newrllama_error")
  long <- paste(rep("word", 400), collapse = " ")
  expect_error(generate_text(ctx, long, max_tokens = 2), "n_ctx", class = "newrllama_prompt_error")
})

test_that("generate_text() checks the prompt", {
  expect_error(generate_text(ctx, NA_character_), "prompt", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, c("a", "b")), "prompt", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, c(2L, NA)), "prompt", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, list("a")), "prompt", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, NULL), "prompt", class = "newrllama_invalid_argument")
  expect_error(generate_text(model, "a"), "context", class = "newrllama_invalid_argument")
})

test_that("generate_text() checks the sampling arguments", {
  p <- capital_prompt()
  bad <- function(...) expect_error(generate_text(ctx, p, ...), class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, max_tokens = 0), "max_tokens", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, max_tokens = -1), "max_tokens", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, max_tokens = 1e12), "max_tokens", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, max_tokens = NA), "max_tokens", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, max_tokens = "a"), "max_tokens", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, max_tokens = 1:2), "max_tokens", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, temperature = -1), "temperature", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, temperature = NaN), "temperature", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, temperature = Inf), "temperature", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, top_p = 2), "top_p", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, top_p = -0.1), "top_p", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, top_k = -1), "top_k", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, repeat_last_n = -2), "repeat_last_n", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, penalty_repeat = 0), "penalty_repeat", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, penalty_repeat = Inf), "penalty_repeat", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, seed = 2^40), "seed", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, seed = -2^64), "seed", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, min_p = 1.5), "min_p", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, stop = NA_character_), "stop", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, stop = ""), "stop", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, stop = list(1)), "stop", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, seed = 1.5), "seed", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, seed = NA), "seed", class = "newrllama_invalid_argument")
})

test_that("argument errors name the function the user called", {
  e <- tryCatch(generate_text(ctx, capital_prompt(), max_tokens = 0), error = function(e) e)
  expect_equal(conditionCall(e)[[1]], quote(generate_text))
})

test_that("every field of Python's SamplingParams is an argument of generate_text() and generate_parallel()", {
  fields <- newrllama:::sampling_fields()
  expect_true(all(c("max_tokens", "min_p", "stop", "grammar") %in% fields))
  expect_setequal(setdiff(fields, names(formals(generate_parallel))), character())
  expect_setequal(setdiff(fields, names(formals(generate_text))), "choices") # one prompt: choices are generate_parallel()'s
})

test_that("stop strings and min_p reach the sampler, with the same rules as in Python", {
  p <- capital_prompt()
  plain <- generate_text(ctx, p, max_tokens = 8)
  first <- strsplit(trimws(plain), " ")[[1]][1]
  cut <- generate_text(ctx, p, max_tokens = 8, stop = factor(first))
  expect_false(grepl(first, cut, fixed = TRUE))
  expect_true(startsWith(plain, cut))
  expect_equal(generate_text(ctx, p, max_tokens = 8, stop = c("zzz", "qqq")), plain)
  # min_p = 1 keeps only the most probable token: sampling at any temperature is then greedy.
  expect_equal(generate_text(ctx, p, max_tokens = 8, temperature = 2, min_p = 1, seed = 7), plain)
  expect_equal(generate_text(ctx, p, max_tokens = 8, seed = -1), plain) # a random seed: greedy all the same
  many <- generate_parallel(ctx, c(a = p, b = p), max_tokens = 8, stop = first, progress = FALSE)
  expect_equal(as.vector(many), rep(cut, 2))
})

test_that("generics::generate() runs a prompt on a context, as newrllama4's generate() did", {
  skip_if_not_installed("generics")
  prompt <- "The capital of Germany is Berlin. The capital of France is"
  expect_identical(generics::generate(ctx, prompt, max_tokens = 4L), generate_text(ctx, prompt, max_tokens = 4L))
  expect_false("generate" %in% getNamespaceExports("newrllama"))
  expect_error(generics::generate(ctx, prompt, max_tokns = 4L), class = "error")
})
