# Per-prompt sampling settings, chat messages instead of prompts, and streaming with a callback.

skip_if_no_newrllama()
model <- test_model()
ctx <- test_context(model)

test_that("params gives each prompt its own settings over the call's, as a data frame or a list", {
  p <- capital_prompt()
  short <- generate_text(ctx, p, max_tokens = 2)
  long <- generate_text(ctx, p, max_tokens = 6)
  out <- generate_parallel(ctx, c(p, p, p), max_tokens = 6, progress = FALSE,
                           params = data.frame(max_tokens = c(2, NA, 2)))
  expect_equal(as.vector(out), c(short, long, short))
  expect_equal(llm_generate(data.frame(p = c(p, p, p)), p, ctx, max_tokens = 6, progress = FALSE,
                            params = data.frame(max_tokens = c(2, NA, 2)))$.finish_reason, rep("length", 3))
  first <- strsplit(trimws(long), " ")[[1]][1]
  cut <- generate_text(ctx, p, max_tokens = 6, stop = first)
  frame <- data.frame(max_tokens = c(6L, 2L))
  frame$stop <- list(first, NULL)
  expect_equal(as.vector(generate_parallel(ctx, c(p, p), params = frame, progress = FALSE)), c(cut, short))
  listed <- generate_parallel(ctx, c(p, p), max_tokens = 6, params = list(list(max_tokens = 2), NULL),
                              progress = FALSE)
  expect_equal(as.vector(listed), c(short, long))
})

test_that("bad per-prompt settings name the setting and the prompt; the context stays usable", {
  p <- capital_prompt()
  run <- function(params) generate_parallel(ctx, c(p, p), max_tokens = 2, params = params, progress = FALSE)
  expect_error(run(data.frame(tempreature = c(1, 1))), "tempreature", class = "newrllama_invalid_argument")
  expect_error(run(data.frame(temperature = c(1, -1))), "prompt 2.*temperature",
               class = "newrllama_invalid_argument")
  expect_error(run(data.frame(max_tokens = 2)), "1 entries for 2 prompts", class = "newrllama_invalid_argument")
  expect_error(run(list(list(2), NULL)), "params\\[\\[1\\]\\]", class = "newrllama_invalid_argument")
  expect_error(run(list(max_tokens = 2)), "params", class = "newrllama_invalid_argument")
  expect_error(run("fast"), "params", class = "newrllama_invalid_argument")
  expect_error(run(data.frame(choices = c("a", "b"))), "choices", class = "newrllama_invalid_argument")
  expect_error(run(data.frame(seed = c(1, NaN), max_tokens = c(NaN, 2))[0, ]), "0 entries",
               class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, stop = rep("x", 10000)), "stop.*at most", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, stop = list("x")), "stop.*character vector", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, stop = "caf\xe9"), "stop", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, max_tokens = NULL, top_k = list(3)), "top_k", class = "newrllama_invalid_argument")
  expect_equal(as.vector(generate_parallel(ctx, factor(c(p, p)), max_tokens = 2, progress = FALSE)),
               rep(generate_text(ctx, p, max_tokens = 2), 2))
  expect_equal(engine_stats(ctx)$n_running, 0L)
  expect_equal(generate_text(ctx, p, max_tokens = 2), generate_text(ctx, p, max_tokens = 2))
})

conversation <- list(list(role = "user", content = "What is the capital of France?"))

test_that("messages go through the model's chat template, in generate_text() and generate_parallel()", {
  prompt <- apply_chat_template(model, conversation)
  expected <- generate_text(ctx, prompt, max_tokens = 4)
  expect_equal(generate_text(ctx, messages = conversation, max_tokens = 4), expected)
  as_frame <- data.frame(role = "user", content = "What is the capital of France?")
  expect_equal(generate_text(ctx, messages = as_frame, max_tokens = 4), expected)
  other <- list(list(role = "user", content = "Name a colour."))
  out <- generate_parallel(ctx, messages = list(france = conversation, colour = other), max_tokens = 4,
                           progress = FALSE)
  direct <- generate_parallel(ctx, c(prompt, apply_chat_template(model, other)), max_tokens = 4, progress = FALSE)
  expect_equal(as.vector(out), as.vector(direct))
  expect_named(out, c("france", "colour"))
})

test_that("bad messages are refused with the argument's name", {
  expect_error(generate_text(ctx, "a", messages = conversation), "prompt.*messages", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, messages = list(list(role = "user"))), "messages", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, messages = "hello"), "messages", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, messages = conversation[[1]], progress = FALSE), "messages",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", messages = list(conversation), progress = FALSE), "messages",
               class = "newrllama_invalid_argument")
})

test_that("stream hands over the answer piece by piece; the pieces make generate_text()'s text", {
  p <- capital_prompt()
  pieces <- character()
  text <- generate_text(ctx, p, max_tokens = 8, stream = function(piece) {
    pieces <<- c(pieces, piece)
    NULL
  })
  expect_equal(text, generate_text(ctx, p, max_tokens = 8))
  expect_gt(length(pieces), 1)
  expect_equal(paste(pieces, collapse = ""), text)
  chat <- generate_text(ctx, messages = conversation, max_tokens = 4, stream = function(piece) TRUE)
  expect_equal(chat, generate_text(ctx, messages = conversation, max_tokens = 4))
})

test_that("a callback that returns FALSE ends the answer; one that fails or returns junk is an error", {
  p <- capital_prompt()
  full <- generate_text(ctx, p, max_tokens = 30)
  calls <- 0
  first <- generate_text(ctx, p, max_tokens = 30, stream = function(piece) {
    calls <<- calls + 1
    FALSE
  })
  expect_equal(calls, 1)
  expect_true(startsWith(full, first))
  expect_lt(nchar(first), nchar(full))
  expect_error(generate_text(ctx, p, max_tokens = 30, stream = function(piece) stop("disk full")), "stream.*disk full",
               class = "newrllama_callback_error")
  expect_error(generate_text(ctx, p, max_tokens = 30, stream = function(piece) piece), "stream.*TRUE",
               class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, p, stream = "cat"), "stream", class = "newrllama_invalid_argument")
  expect_error(generate_text(ctx, strrep("word ", 2000), stream = function(piece) NULL), "tokens",
               class = "newrllama_error")
  expect_equal(engine_stats(ctx)$n_running, 0L)
  expect_equal(generate_text(ctx, p, max_tokens = 30), full)
})
