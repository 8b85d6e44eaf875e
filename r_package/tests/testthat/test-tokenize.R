skip_if_no_newrllama()
model <- test_model()

test_that("tokenize() and detokenize() round-trip", {
  text <- "The capital of France is Paris."
  tokens <- tokenize(model, text)
  expect_type(tokens, "integer")
  expect_gt(length(tokens), 3)
  expect_equal(detokenize(model, tokens), text)
  plain <- tokenize(model, text, add_special = FALSE)
  expect_equal(length(plain), length(tokens) - 1) # without the beginning-of-text token
  expect_equal(detokenize(model, plain), text)
})

test_that("non-ASCII text round-trips", {
  text <- "Caf\u00e9 \u00fcber \u65e5\u672c"
  expect_equal(detokenize(model, tokenize(model, text, add_special = FALSE)), text)
})

test_that("edge cases: empty text, one token, doubles holding whole numbers", {
  expect_equal(tokenize(model, "", add_special = FALSE), integer(0))
  expect_equal(detokenize(model, integer(0)), "")
  one <- tokenize(model, "Hello", add_special = FALSE)
  expect_length(one, 1)
  expect_equal(detokenize(model, one), "Hello")
  expect_equal(detokenize(model, as.numeric(one)), "Hello")
})

test_that("tokenize() and detokenize() check their arguments", {
  expect_error(tokenize("model", "a"), "model", class = "newrllama_invalid_argument")
  expect_error(tokenize(model, NA_character_), "text", class = "newrllama_invalid_argument")
  expect_error(tokenize(model, c("a", "b")), "text", class = "newrllama_invalid_argument")
  expect_error(tokenize(model, 1), "text", class = "newrllama_invalid_argument")
  expect_error(tokenize(model, "a", add_special = NA), "add_special", class = "newrllama_invalid_argument")
  expect_error(detokenize(model, c(1L, NA)), "tokens", class = "newrllama_invalid_argument")
  expect_error(detokenize(model, "a"), "tokens", class = "newrllama_invalid_argument")
  expect_error(detokenize(model, 1.5), "tokens", class = "newrllama_invalid_argument")
})
