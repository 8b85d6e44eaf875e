# llm_annotate() and llm_vec_annotate() in tidyverse pipelines: tibbles, mutate(), grouped data; and
# llm_annotate() on a context writing its labels to a file it can resume from.

skip_if_no_newrllama()
skip_if_not_installed("dplyr")
skip_if_not_installed("tibble")
model <- test_model()
ctx <- test_context(model, n_ctx = 2048L)
labels <- c("sports", "business", "weather")
instruction <- "You sort short news texts by topic. Decide the topic of the text."
news <- tibble::tibble(
  desk = c("a", "b", "a", "b", "b"),
  text = c("The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
           "Heavy rain and strong winds are expected tomorrow.", "The brewer bought a rival for 2 billion.",
           "Snow will close the mountain roads tonight.")
)

test_that("a tibble in gives a tibble out, rows in their order", {
  out <- llm_annotate(news, text, labels, instruction, context = ctx, progress = FALSE)
  expect_s3_class(out, "tbl_df")
  expect_equal(out$text, news$text)
  expect_equal(out$.label, as.vector(llm_vec_annotate(news$text, labels, instruction, context = ctx, progress = FALSE)))
})

test_that("llm_vec_annotate() works inside mutate(), also on grouped data, one call per group on one context", {
  plain <- as.vector(llm_vec_annotate(news$text, labels, instruction, context = ctx, debias = "none", progress = FALSE))
  flat <- dplyr::mutate(news, topic = llm_vec_annotate(text, labels, instruction, context = ctx, debias = "none",
                                                    progress = FALSE))
  expect_equal(as.vector(flat$topic), plain)
  calls <- 0
  grouped <- news |>
    dplyr::group_by(desk) |>
    dplyr::mutate(topic = {
      calls <<- calls + 1
      llm_vec_annotate(text, labels, instruction, context = ctx, debias = "none", progress = FALSE)
    }) |>
    dplyr::ungroup()
  expect_equal(calls, 2)
  expect_equal(grouped$text, news$text) # row order kept
  expect_equal(as.vector(grouped$topic), plain)
})

test_that("mutate() keeps the probabilities with columns = TRUE, and the findings functions read them", {
  out <- llm_annotate(news, text, labels, instruction, context = ctx, progress = FALSE)
  spliced <- dplyr::mutate(news, llm_vec_annotate(text, labels, instruction, context = ctx, progress = FALSE,
                                                  columns = TRUE))
  expect_equal(names(spliced), names(out))
  expect_equal(spliced$.probs, out$.probs)
  expect_equal(validate_labels(spliced, out$.label)$accuracy, 1)
  named <- dplyr::mutate(news, llm_vec_annotate(text, labels, instruction, context = ctx, progress = FALSE,
                                                columns = TRUE, pred_name = "topic"))
  expect_equal(named$topic, out$.label)
})

test_that("each group of a grouped mutate() finds the instruction that the groups before it decoded", {
  # One text a group on a fresh context: a group's prompt can only find the instruction cached by an earlier call.
  fresh <- test_context(model, n_ctx = 2048L)
  cached <- integer()
  news[1:3, ] |>
    dplyr::mutate(one = dplyr::row_number()) |>
    dplyr::group_by(one) |>
    dplyr::mutate(topic = {
      out <- llm_vec_annotate(text, labels, instruction, context = fresh, debias = "none", progress = FALSE)
      cached <<- c(cached, fresh$py$last_stats$n_cached_tokens)
      out
    })
  expect_length(cached, 3)
  expect_equal(cached[1], 0)
  expect_true(all(cached[-1] >= length(tokenize(model, instruction))))
})

test_that("grouped calls without a context load the model once, and a text's labels do not depend on its group", {
  newrllama:::embedded_model()
  loads <- reticulate::py_run_string(paste(
    "def counting():", "    import newrllama", "    calls = []", "    plain = newrllama.Model.__init__",
    "    def counted(self, *args, **kwargs):", "        calls.append(1)", "        plain(self, *args, **kwargs)",
    "    newrllama.Model.__init__ = counted", "    return calls, plain",
    "loads, plain_init = counting()", sep = "\n"), local = TRUE)
  on.exit(reticulate::py_set_attr(py_newrllama()$Model, "__init__", loads$plain_init))
  grouped <- news |>
    dplyr::group_by(desk) |>
    dplyr::mutate(topic = llm_vec_annotate(text, labels, instruction, progress = FALSE)) |>
    dplyr::ungroup()
  expect_length(loads$loads, 0)
  flat <- llm_annotate(news, text, labels, instruction, progress = FALSE)
  expect_equal(grouped$topic, flat$.label)
  for (desk in unique(news$desk)) {
    rows <- which(news$desk == desk)
    alone <- llm_annotate(news[rows, ], text, labels, instruction, progress = FALSE)
    expect_identical(alone$.probs, flat$.probs[rows])
  }
  seen <- character()
  withCallingHandlers(
    news |>
      dplyr::group_by(desk) |>
      dplyr::mutate(topic = llm_vec_annotate(text, labels, instruction, debias = "batch", progress = FALSE)),
    newrllama_group_dependent_labels = function(w) {
      seen <<- c(seen, conditionMessage(w))
      invokeRestart("muffleWarning")
    }
  )
  expect_length(seen, 2) # one per group
  expect_match(seen[1], "depend on which texts share it")
  expect_no_warning(llm_vec_annotate(news$text, labels, instruction, debias = "batch", progress = FALSE),
                    class = "newrllama_group_dependent_labels")
})

test_that("a resume finds each row's labels by its text after the rows are read back in another order", {
  out <- tempfile(fileext = ".jsonl")
  on.exit(unlink(out))
  first <- llm_annotate(news, text, labels, instruction, context = ctx, output = out, progress = FALSE)
  steps <- engine_stats(ctx)$n_steps
  shuffled <- news[c(4, 1, 5, 3, 2), ]
  again <- llm_annotate(shuffled, text, labels, instruction, context = ctx, output = out, resume = TRUE,
                        progress = FALSE)
  expect_equal(engine_stats(ctx)$n_steps, steps) # nothing ran again
  expect_equal(again$.label, first$.label[c(4, 1, 5, 3, 2)])
  expect_equal(again$.probs, first$.probs[c(4, 1, 5, 3, 2)])
  expect_length(readLines(out), nrow(news))
})

test_that("llm_annotate() on a context writes its labels and resumes only the missing texts", {
  out <- tempfile(fileext = ".jsonl")
  on.exit(unlink(out))
  texts <- stats::setNames(news$text, paste0("story-", seq_along(news$text)))
  first <- llm_vec_annotate(texts[1:2], labels, instruction, context = ctx, output = out, progress = FALSE)
  expect_length(readLines(out), 2)
  steps <- engine_stats(ctx)$n_steps
  all <- llm_vec_annotate(texts, labels, instruction, context = ctx, output = out, resume = TRUE, progress = FALSE)
  expect_length(readLines(out), 5)
  expect_equal(all[1:2], first[1:2])
  expect_gt(engine_stats(ctx)$n_steps, steps)
  steps <- engine_stats(ctx)$n_steps
  again <- llm_vec_annotate(texts, labels, instruction, context = ctx, output = out, resume = TRUE, progress = FALSE)
  expect_equal(engine_stats(ctx)$n_steps, steps)
  expect_equal(as.vector(again), as.vector(all))
  expect_error(llm_vec_annotate(texts, labels, "Another instruction.", context = ctx, output = out, resume = TRUE,
                            progress = FALSE), "other settings", class = "newrllama_invalid_argument")
  # A codebook and a whole-call debias method are recorded too (five texts: one group, as a call without a file).
  book <- list(topic = labels, tone = c("good news", "bad news"))
  path <- tempfile(fileext = ".jsonl")
  recorded <- llm_vec_annotate(texts, codebook = book, instruction = instruction, context = ctx, output = path,
                           debias = "batch", progress = FALSE)
  expect_length(readLines(path), 5)
  expect_equal(recorded, llm_vec_annotate(texts, codebook = book, instruction = instruction, context = ctx,
                                      debias = "batch", progress = FALSE))
  expect_equal(llm_vec_annotate(texts, codebook = book, instruction = instruction, context = ctx, output = path,
                            resume = TRUE, debias = "batch", progress = FALSE),
               recorded)
})
