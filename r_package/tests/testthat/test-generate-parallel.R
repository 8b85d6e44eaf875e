skip_if_no_newrllama()
model <- test_model()
ctx <- test_context(model)
countries <- c("France", "Japan", "Spain", "Egypt")
capitals <- c("Paris", "Tokyo", "Madrid", "Cairo")

test_that("answers come back in input order, with statistics", {
  answers <- generate_parallel(ctx, capital_prompt(countries), max_tokens = 3, progress = FALSE)
  expect_type(answers, "character")
  expect_length(answers, length(countries))
  expect_null(names(answers))
  for (i in seq_along(countries)) {
    expect_match(answers[[i]], capitals[[i]])
  }
  expect_null(attributes(answers))
  stats <- last_stats(ctx)
  expect_type(stats, "list")
  expect_equal(stats$n_prompts, length(countries))
  expect_equal(stats$n_failed, 0)
  expect_gt(stats$n_gen_tokens, 0)
  expect_gt(stats$tokens_per_second, 0)
})

test_that("llm_generate() gives each row's answer with its finish reason and token counts", {
  rows <- data.frame(id = 1:3, prompt = c(capital_prompt("France"), "", capital_prompt("Japan")))
  w <- expect_warning(out <- llm_generate(rows, prompt, ctx, max_tokens = 3, progress = FALSE),
                      "1 of 3 prompts failed", class = "newrllama_failed_prompts")
  expect_equal(w$errors, c(`2` = out$.error[2]))
  expect_equal(names(out), c("id", "prompt", ".text", ".finish_reason", ".n_prompt_tokens", ".n_gen_tokens",
                             ".n_cached_tokens", ".error"))
  expect_equal(out$.text[c(1, 3)], unname(generate_parallel(ctx, rows$prompt[c(1, 3)], max_tokens = 3,
                                                              progress = FALSE)))
  expect_equal(out$.finish_reason, c("length", "error", "length"))
  expect_equal(out$.n_gen_tokens[c(1, 3)], c(3L, 3L))
  expect_true(all(out$.n_prompt_tokens[c(1, 3)] > 5))
  expect_true(is.na(out$.text[2]) && grepl("empty", out$.error[2]) && all(is.na(out$.error[c(1, 3)])))
  chats <- tibble::tibble(chat = list(list(list(role = "user", content = "Say yes."))))
  expect_equal(nrow(llm_generate(chats, chat, ctx, max_tokens = 2, progress = FALSE)), 1)
  expect_error(llm_generate(rows, prompt, ctx, max_tokns = 3), "one of generate_parallel",
               class = "newrllama_invalid_argument")
  expect_error(llm_generate(rows, nope, ctx), "must name a column", class = "newrllama_invalid_argument")
  expect_error(llm_generate(rows$prompt, prompt, ctx), "data frame", class = "newrllama_invalid_argument")
  expect_error(llm_generate(rows, id, ctx), "prompts or conversations", class = "newrllama_invalid_argument")
})

test_that("identical prompts in one batch each get the answer", {
  answers <- generate_parallel(ctx, rep(capital_prompt(), 3), max_tokens = 3, progress = FALSE)
  expect_length(answers, 3)
  for (a in answers) expect_match(a, "Paris")
})

test_that("a shared instruction is decoded once and served from the prefix cache", {
  instruction <- paste(rep("Name the capital city of the last country in one word.", 4), collapse = " ")
  prompts <- paste(instruction, capital_prompt(countries))
  answers <- generate_parallel(ctx, prompts, max_tokens = 3, progress = FALSE)
  for (i in seq_along(countries)) {
    expect_match(answers[[i]], capitals[[i]])
  }
  expect_gt(last_stats(ctx)$n_cached_tokens, 4 * 40)
  plain <- context_create(model, n_ctx = 1024L, n_threads = 1L, n_seq_max = 4L, prefix_cache = FALSE)
  expect_output(print(plain), "prefix cache: off")
  off <- generate_parallel(plain, prompts, max_tokens = 3, progress = FALSE)
  expect_equal(last_stats(plain)$n_cached_tokens, 0)
  for (i in seq_along(countries)) {
    expect_match(off[[i]], capitals[[i]])
  }
})

test_that("one prompt gives what generate_text() gives", {
  # A batch of one rounds the same way as generate_text(); larger batches may not.
  one <- generate_parallel(ctx, capital_prompt("Spain"), max_tokens = 3, progress = FALSE)
  expect_equal(as.vector(one), generate_text(ctx, capital_prompt("Spain"), max_tokens = 3))
})

test_that("names of the prompts are kept", {
  prompts <- c(fr = capital_prompt("France"), jp = capital_prompt("Japan"))
  answers <- generate_parallel(ctx, prompts, max_tokens = 2, progress = FALSE)
  expect_named(answers, c("fr", "jp"))
})

test_that("a failed prompt is NA with its error and one warning, the others complete", {
  prompts <- c(capital_prompt("France"), "", capital_prompt("Japan"), paste(rep("word", 400), collapse = " "))
  warnings <- list()
  answers <- withCallingHandlers(
    generate_parallel(ctx, prompts, max_tokens = 2, progress = FALSE),
    warning = function(w) {
      warnings[[length(warnings) + 1]] <<- w
      invokeRestart("muffleWarning")
    }
  )
  expect_length(warnings, 1)
  expect_s3_class(warnings[[1]], "newrllama_failed_prompts")
  expect_match(conditionMessage(warnings[[1]]), "2 of 4 prompts failed")
  expect_equal(is.na(answers), c(FALSE, TRUE, FALSE, TRUE))
  expect_match(answers[[1]], "Paris")
  expect_match(answers[[3]], "Tokyo")
  errors <- warnings[[1]]$errors
  expect_type(errors, "character")
  expect_named(errors, c("2", "4"))
  expect_match(errors[["2"]], "empty")
  expect_match(errors[["4"]], "n_ctx")
  expect_equal(last_stats(ctx)$n_failed, 2)
})

test_that("all prompts failing still returns a vector", {
  expect_warning(answers <- generate_parallel(ctx, c("", ""), max_tokens = 2, progress = FALSE),
                 class = "newrllama_warning")
  expect_equal(as.vector(answers), c(NA_character_, NA_character_))
})

test_that("empty prompts give an empty result", {
  expect_identical(generate_parallel(ctx, character(0), progress = FALSE), character(0))
})

test_that("more prompts than n_seq_max are all answered", {
  small <- test_context(model, n_ctx = 256, n_seq_max = 2)
  answers <- generate_parallel(small, rep(capital_prompt(), 5), max_tokens = 1, progress = FALSE)
  expect_length(answers, 5)
  expect_false(anyNA(answers))
  expect_equal(length(unique(as.vector(answers))), 1)
})

test_that("generate_parallel() checks its arguments", {
  expect_error(generate_parallel(ctx, c("a", NA)), "NA", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, list("a")), "prompts", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, 1:3), "prompts", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(model, "a"), "context", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", max_tokens = 0), "max_tokens", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", temperature = NaN), "temperature",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", top_p = 2), "top_p", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", seed = 2^40), "seed", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", progress = NA), "progress", class = "newrllama_invalid_argument")
})

test_that("choices give one of the labels for every prompt, and llm_generate() each label's probability", {
  labels <- c("Paris", "Tokyo", "Madrid", "Cairo", "Berlin")
  prompts <- c(fr = capital_prompt("France"), jp = capital_prompt("Japan"), free = "Once upon a time")
  answers <- generate_parallel(ctx, prompts[1:2], choices = labels, progress = FALSE)
  expect_equal(as.vector(unname(answers)), c("Paris", "Tokyo"))
  expect_named(answers, c("fr", "jp"))
  out <- llm_generate(data.frame(prompt = unname(prompts[1:2])), prompt, ctx, choices = labels, progress = FALSE)
  expect_equal(out$.text, unname(answers))
  for (p in out$.probs) {
    expect_named(p, labels)
    expect_equal(sum(p), 1, tolerance = 1e-6)
  }
  expect_equal(labels[vapply(out$.probs, which.max, integer(1))], unname(answers))
  expect_error(generate_parallel(ctx, prompts, choices = "Paris"), "2 to 1024", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, prompts, choices = c("a", NA)), "choices.*NA.*position 2", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, prompts, choices = c("a", "a")), "more than once",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, prompts, choices = paste("label", 1:10000)), "2 to 1024",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, prompts, choices = character(0)), "2 to 1024",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, prompts, choices = c("a", " ")), "blank", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, prompts, choices = list("a", "b")), "character vector",
               class = "newrllama_invalid_argument")
  expect_equal(out$.finish_reason, c("stop", "stop"))
})

test_that("grammar and json_schema constrain every answer; bad ones are clear errors", {
  answers <- generate_parallel(ctx, c("Is the sky blue? Answer:", "Is fire cold? Answer:"), max_tokens = 10,
                               grammar = 'root ::= ("yes" | "no") "."', progress = FALSE)
  expect_true(all(answers %in% c("yes.", "no.")))
  schema <- list(type = "object", properties = list(label = list(enum = list("acq", "crude"))), required = list("label"))
  json <- generate_parallel(ctx, "Story: Texaco agreed to buy Getty Oil.\nJSON:", max_tokens = 40,
                            json_schema = schema, progress = FALSE)
  expect_match(json, '^\\{ ?"label": ?"(acq|crude)" ?\\}')
  expect_error(generate_parallel(ctx, "a", grammar = 'x ::= "a"'), "prompt 0", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", grammar = c("a", "b")), "grammar must be", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", json_schema = '{"type": "nonsense"}'), "cannot be converted",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", choices = c("a", "b"), grammar = "root ::= \"a\""), "at most one",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", grammar = 'root ::= ("a" | '), "prompt 0",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", grammar = ""), "grammar", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", json_schema = "{"), "json_schema", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, "a", json_schema = 42), "json_schema", class = "newrllama_invalid_argument")
  expect_true(generate_text(ctx, "Is the sky blue? Answer:", max_tokens = 5, grammar = 'root ::= ("yes" | "no") "."') %in%
                c("yes.", "no."))
})

test_that("max_tokens cuts a grammar short: finish_reason 'length', and the context goes on", {
  cut <- llm_generate(data.frame(p = c("Digits:", "More digits:")), p, ctx, max_tokens = 3,
                      grammar = "root ::= [0-9]+", progress = FALSE)
  expect_equal(cut$.finish_reason, c("length", "length"))
  expect_true(all(grepl("^[0-9]+$", cut$.text)))
  done <- llm_generate(data.frame(p = "Is fire cold? Answer:"), p, ctx, max_tokens = 10,
                       grammar = 'root ::= ("yes" | "no") "."', progress = FALSE)
  expect_equal(done$.finish_reason, "stop")
  expect_true(done$.text %in% c("yes.", "no."))
})
