skip_if_no_newrllama()
model <- test_model()
ctx <- test_context(model, n_ctx = 2048L)
labels <- c("sports", "business", "weather")
stories <- data.frame(
  id = 1:4,
  text = c("The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
           NA, "Heavy rain and strong winds are expected tomorrow."),
  stringsAsFactors = FALSE
)

test_that("llm_annotate() adds a valid label and its probability to every row", {
  expect_warning(out <- llm_annotate(stories, text, labels, "Give the topic of the news text.", context = ctx,
                                 progress = FALSE), class = "newrllama_failed_prompts")
  expect_s3_class(out, "data.frame")
  expect_equal(names(out), c("id", "text", ".label", ".prob", ".probs", ".raw_probs", ".order_free_probs",
                             ".order_flip", ".tokens_cut", ".error", ".provenance"))
  expect_null(out$.probs[[3]])
  expect_true(is.na(out$.error[1]) && nzchar(out$.error[3]))
  expect_type(out$.order_flip, "logical")
  # The columns travel with their rows: subsetting keeps each text's figures, where attributes would be lost.
  kept <- out[c(4, 1), ]
  expect_equal(kept$.probs, out$.probs[c(4, 1)])
  expect_equal(kept$.order_flip, out$.order_flip[c(4, 1)])
  expect_equal(out$.probs[[1]][[out$.label[1]]], out$.prob[1])
  expect_true(all(out$.label[-3] %in% labels))
  expect_true(is.na(out$.label[3]) && is.na(out$.prob[3]))
  expect_true(all(out$.prob[-3] > 1 / 3 & out$.prob[-3] <= 1))
  same <- suppressWarnings(llm_annotate(stories, "text", labels, "Give the topic of the news text.", context = ctx,
                                    pred_name = "topic", progress = FALSE))
  expect_equal(same$topic, out$.label)
})

test_that("llm_vec_annotate() gives the labels alone, those llm_annotate() gives with their probabilities", {
  x <- c(a = stories$text[[1]], b = stories$text[[4]])
  out <- llm_vec_annotate(x, labels, context = ctx, progress = FALSE)
  expect_named(out, c("a", "b"))
  expect_null(attributes(unname(out)))
  df <- llm_annotate(data.frame(text = unname(x)), text, labels, context = ctx, progress = FALSE)
  expect_equal(unname(out), df$.label)
  for (p in df$.probs) {
    expect_named(p, labels)
    expect_equal(sum(p), 1, tolerance = 1e-6)
  }
  expect_equal(labels[vapply(df$.probs, which.max, integer(1))], df$.label)
})

test_that("labels asked of a base model warn once per session with what to load instead; an instruct model's do not", {
  the$base_model_warned <- NULL
  expect_warning(llm_vec_annotate(stories$text[1], labels, "Give the topic.", context = ctx, progress = FALSE),
                 "no chat template: it is a base model.*qwen2.5-coder-1.5b-instruct", class = "newrllama_base_model")
  expect_no_warning(llm_vec_annotate(stories$text[1], labels, "Give the topic.", context = ctx, progress = FALSE),
                    class = "newrllama_base_model")
  the$base_model_warned <- NULL
  llm_use_none()
  expect_warning(llm_vec_annotate(stories$text[1], labels, "Give the topic.", progress = FALSE),
                 class = "newrllama_base_model") # no session: the embedded model, not without a word
  instruct <- recommended_models()
  instruct <- instruct[instruct$name == "qwen2.5-coder-0.5b-instruct", ]
  skip_if_not(instruct$cached, "the 0.5B instruct model is not in the cache (scripts/fetch_instruct_model.py)")
  small <- context_create(model_load(instruct$name), n_ctx = 512L, n_seq_max = 1L, n_threads = 1L)
  expect_no_warning(llm_vec_annotate(stories$text[1], labels, "Give the topic.", context = small, progress = FALSE),
                    class = "newrllama_base_model")
})

test_that("llm_annotate() checks its arguments", {
  expect_error(llm_annotate(stories$text, text, labels), "data frame", class = "newrllama_invalid_argument")
  expect_error(llm_annotate(stories, nope, labels), "column", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate(1:3, labels), "character vector", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", "only", context = ctx), "2 to 1024", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", c("x", NA)), "without NA", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, context = "ctx"), class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, n_seq_max = 0), "n_seq_max", class = "newrllama_invalid_argument")
})

test_that("llm_vec_annotate() takes a codebook: definitions, coded examples, a debiasing choice", {
  codebook <- c(sports = "games, matches and athletes", business = "companies, markets and money",
                weather = "")
  examples <- data.frame(text = "The goalkeeper saved a penalty.", label = "sports")
  x <- c(stories$text[[1]], stories$text[[2]])
  frame <- data.frame(text = x)
  out <- llm_annotate(frame, text, codebook, "Give the topic.", context = ctx, examples = examples,
                      debias = "rotations", progress = FALSE)
  expect_true(all(out$.label %in% labels))
  for (m in c(".probs", ".raw_probs", ".order_free_probs")) {
    expect_named(out[[m]][[1]], labels)
    expect_equal(vapply(out[[m]], sum, numeric(1)), c(1, 1), tolerance = 1e-6)
  }
  expect_equal(out$.probs, out$.order_free_probs)
  # The examples as earlier chat turns instead of in the system turn: another prompt, other scores.
  turns <- llm_annotate(frame, text, codebook, "Give the topic.", context = ctx, examples = examples,
                        debias = "rotations", examples_in = "turns", progress = FALSE)
  expect_false(isTRUE(all.equal(turns$.probs, out$.probs)))
  none <- llm_annotate(frame, text, labels, context = ctx, debias = "none", progress = FALSE)
  expect_equal(none$.probs, none$.raw_probs)
  df <- llm_annotate(stories[c(1, 2, 4), ], text, labels, context = ctx, definitions = c(weather = "rain and wind"),
                 debias = "batch", progress = FALSE)
  expect_true(all(df$.label %in% labels))
})

test_that("a bad codebook is a classed error naming what is wrong", {
  bad_example <- data.frame(text = "a text", label = "politics")
  expect_error(llm_vec_annotate("a", labels, context = ctx, examples = bad_example, progress = FALSE),
               "'politics', which is not one of", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, context = ctx, examples = list("a"), progress = FALSE),
               "data frame with columns", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", c("Sports", "sports "), context = ctx, progress = FALSE),
               "case or spacing", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, context = ctx, definitions = c(politics = "x"), progress = FALSE),
               "not one of the labels", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, context = ctx, debias = "sometimes", progress = FALSE),
               "debias must be one of", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, context = ctx, examples_in = "user", progress = FALSE),
               "examples_in must be", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, context = ctx, calibration = list(), progress = FALSE),
               "calibrate", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", c(sports = "x", "y"), context = ctx, progress = FALSE),
               "name every label", class = "newrllama_invalid_argument")
})

test_that("a codebook asks several questions about each text", {
  questions <- list(topic = labels, tone = c("good news" = "something went well", "bad news" = ""))
  out <- llm_annotate(stories[c(1, 2, 4), ], text, codebook = questions, context = ctx, progress = FALSE)
  columns <- c(".label", ".prob", ".probs", ".raw_probs", ".order_free_probs", ".order_flip", ".tokens_cut",
               ".error", ".provenance")
  expect_equal(names(out), c("id", "text", paste0("topic", columns), paste0("tone", columns)))
  expect_true(all(out$topic.label %in% labels) && all(out$tone.label %in% c("good news", "bad news")))
  expect_named(out$tone.probs[[1]], c("good news", "bad news"))
  # Each question's columns are what the findings functions read, by naming its label column.
  expect_equal(validate_labels(out, out$tone.label, label = "tone.label")$accuracy, 1)
  vec <- suppressWarnings(llm_vec_annotate(stories$text, codebook = questions, context = ctx, progress = FALSE))
  expect_s3_class(vec, "tbl_df")
  expect_named(vec, c("topic", "tone"))
  expect_equal(vec$tone[-3], out$tone.label)
  expect_true(is.na(vec$topic[3]) && is.na(vec$tone[3]))
  expect_error(llm_vec_annotate("a", codebook = list(labels), context = ctx), "named list",
               class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", labels, codebook = questions, context = ctx), "not both",
               class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate("a", codebook = list(topic = "one"), context = ctx), "topic",
               class = "newrllama_invalid_argument")
})

test_that("llm_vec_annotate() says which labels changed with the listing order, and validate_labels() reports the share", {
  x <- llm_annotate(stories[c(1, 2, 4), ], text, labels, context = ctx, debias = "reverse", progress = FALSE)
  flips <- x$.order_flip
  expect_type(flips, "logical")
  expect_length(flips, 3)
  expect_false(anyNA(flips))
  v <- validate_labels(x, c("sports", "business", "weather"))
  expect_equal(v$order_flip_share, mean(flips))
  expect_true(is.na(validate_labels(x$.label, c("sports", "business", "weather"))$order_flip_share))
  none <- llm_annotate(stories[c(1, 2), ], text, labels, context = ctx, debias = "none", progress = FALSE)
  expect_true(all(is.na(none$.order_flip)))
  # The default scores a text this short once (contextual calibration): no second order to flip from.
  auto <- llm_annotate(stories[c(1, 2), ], text, labels, context = ctx, progress = FALSE)
  expect_true(all(is.na(auto$.order_flip)))
  expect_match(auto$.provenance[1], "\"debias\": \"auto\"")
  expect_error(validate_labels(x$.label, c("sports", "business", "weather"), order_flip = 1:3), "order_flip",
               class = "newrllama_invalid_argument")
})

test_that("labels that look wrong as a whole warn with their own class", {
  out <- list(label = list("a", "a"), probs = list(c(0.6, 0.4), c(0.7, 0.3)), raw_probs = list(NULL, NULL),
              order_free_probs = list(NULL, NULL), error = list(NULL, NULL), order_flip = list(FALSE, NULL),
              tokens_cut = list(0L, 0L), suspect = list("20 of 20 texts got the label 'a'"))
  expect_warning(warn_annotations(list(out)), "20 of 20 texts", class = "newrllama_suspect_labels")
  x <- put_annotation_columns(data.frame(id = 1:2), out, c("a", "b"), ".label")
  expect_equal(x$.order_flip, c(FALSE, NA))
  expect_equal(x$.prob, c(0.6, 0.7))
  out$suspect <- list()
  expect_silent(warn_annotations(list(out)))
  out$label[2] <- list(NULL)
  out$error[2] <- list("text is missing or empty")
  w <- expect_warning(warn_annotations(list(out)), "1 of 2 texts failed", class = "newrllama_failed_prompts")
  expect_equal(w$errors, c(`2` = "text is missing or empty"))
})

test_that("too_long cuts a text longer than a sequence, counts the cut and the methods paragraph says so", {
  small <- test_context(model, n_ctx = 512L, n_seq_max = 2L)
  long <- paste0("The striker scored twice and the home team won the cup final.",
                 strrep(" The report went on with more details of the day.", 60))
  d <- data.frame(text = c(long, "Shares of the bank fell after weak profits."))
  expect_warning(failed <- llm_annotate(d, text, labels, context = small, debias = "reverse", progress = FALSE),
                 "too_long='truncate_end'", class = "newrllama_failed_prompts")
  expect_true(is.na(failed$.label[1]) && !is.na(failed$.label[2]))
  out <- llm_annotate(d, text, labels, context = small, debias = "reverse", too_long = "truncate_end",
                      progress = FALSE)
  expect_type(out$.tokens_cut, "integer")
  expect_true(out$.tokens_cut[1] > 0 && out$.tokens_cut[2] == 0)
  expect_true(all(out$.label %in% labels))
  expect_match(out$.provenance[1], "\"too_long\": \"truncate_end\"")
  expect_match(methods_text(out), "were cut to fit, by tokens (their ends were left out): 1 of 2 texts", fixed = TRUE)
  expect_error(llm_vec_annotate(long, labels, context = small, too_long = "cut"), "too_long must be one of",
               class = "newrllama_invalid_argument")
})

test_that("plan_annotation() counts tokens as the tokenizer does and names the texts that will not fit", {
  small <- test_context(model, n_ctx = 512L, n_seq_max = 2L)
  long <- paste0("The striker scored twice and the home team won the cup final.",
                 strrep(" The report went on with more details of the day.", 60))
  d <- data.frame(text = c(long, NA, "Shares of the bank fell after weak profits."))
  column <- "text"  # a column named in a variable, as tidy evaluation takes it
  plan <- plan_annotation(d, column, labels, context = small, debias = "reverse", too_long = "truncate_start",
                          sample = 1L)
  expect_s3_class(plan, "newrllama_annotation_plan")
  expect_s3_class(plan$texts, "tbl_df")
  expect_equal(plan$texts$text_tokens[c(1, 3)], c(length(tokenize(model, long, add_special = FALSE)),
                                                  length(tokenize(model, d$text[3], add_special = FALSE))))
  expect_true(is.na(plan$texts$text_tokens[2]) && !is.na(plan$texts$error[2]))
  expect_equal(plan$too_long_texts, 1L)
  out <- llm_annotate(d[c(1, 3), , drop = FALSE], text, labels, context = small, debias = "reverse", too_long = "truncate_start",
                      progress = FALSE)
  expect_equal(plan$texts$tokens_cut[c(1, 3)], out$.tokens_cut)
  expect_equal(c(plan$n_ctx, plan$n_seq_max), c(512L, 2L))
  expect_true(plan$seconds > 0 && length(plan$sample) == 1L)
  expect_output(print(plan), "which will be cut \\(truncate_start\\)")
  overall <- summary(plan)$overall
  expect_equal(c(overall$texts, overall$too_long, overall$failing, overall$tokens_cut),
               c(3, 1, 1, sum(plan$texts$tokens_cut)))
  expect_equal(overall$max_tokens, plan$texts$text_tokens[[1]])
  expect_identical(summary(plan)$table, plan$texts)
  expect_output(print(summary(plan)), "Annotation plan \\(3 texts\\)")
  expect_error(plan_annotation(d, text, labels, context = small, sample = -1), "sample",
               class = "newrllama_invalid_argument")
  expect_error(llm_annotate(d, nope, labels, context = small), "must name a column of `.data`",
               class = "newrllama_invalid_argument")
})

test_that("llm_use() sets the model every verb given no context runs on", {
  on.exit(llm_use_none())
  expect_null(llm_session())
  expect_message(session <- llm_use(model, n_ctx = 1024L, n_seq_max = 2L, n_threads = 1L), "n_ctx 1024, n_seq_max 2")
  expect_identical(llm_session(), session)
  d <- data.frame(text = c("The striker scored twice.", "Shares of the bank fell."))
  expect_null(last_stats(session))
  out <- llm_annotate(d, text, labels, progress = FALSE)
  expect_true(last_stats(session)$n_prompts > 0)  # the verb ran on the session's context
  on_session <- llm_annotate(d, text, labels, context = session, progress = FALSE)
  expect_equal(out$.probs, on_session$.probs)
  generated <- llm_generate(data.frame(p = "The capital of France is"), p, max_tokens = 2L)
  expect_equal(last_stats(session)$n_prompts, 1)
  llm_use_none()
  expect_null(llm_session())
  expect_error(llm_generate(data.frame(p = "x"), p), "llm_use", class = "newrllama_invalid_argument")
  expect_error(llm_use(model, n_ctx = "big"), class = "newrllama_invalid_argument")
})

test_that("llm_use() given a model alone sizes a context for each call's texts, so no text fails for its length", {
  on.exit(llm_use_none())
  long <- paste(rep("The striker scored twice and the team won the cup final after extra time.", 60), collapse = " ")
  d <- data.frame(text = c(long, "Shares of the bank fell."))
  fixed <- llm_use(model, n_ctx = 512L, n_seq_max = 2L, n_threads = 1L, .silent = TRUE)
  expect_warning(cut <- llm_annotate(d, text, labels, progress = FALSE), class = "newrllama_failed_prompts")
  expect_true(is.na(cut$.label[1]))  # 256 cells a sequence: the long text does not fit
  expect_message(session <- llm_use(model), "with a context sized for each call")
  expect_identical(session, model)
  sized <- llm_annotate(d, text, labels, progress = FALSE)
  expect_true(all(sized$.label %in% labels))
  plan <- plan_annotation(d, text, labels, sample = 0L)
  expect_true(plan$n_ctx / plan$n_seq_max >= max(plan$texts$prompt_tokens))
  generated <- llm_generate(data.frame(p = "The capital of France is"), p, max_tokens = 2L)
  expect_equal(generated$.finish_reason, "length")
})

test_that("the verbs take every option of the options' table, with its R default", {
  # The table is Python's (labels/annotation_options.py); scripts/write_annotation_options.py writes these formals.
  table <- newrllama:::python_helpers()$annotation_options()
  defaults <- stats::setNames(unlist(table$r_default), unlist(table$name))
  task_options <- unlist(table$name)[unlist(table$owner) == "task"]
  expect_true(all(c("debias", "too_long", "output") %in% names(defaults)))
  for (verb in list(llm_annotate, llm_vec_annotate, plan_annotation, annotation_task)) {
    args <- formals(verb)
    expected <- if (identical(verb, llm_annotate) || identical(verb, llm_vec_annotate)) names(defaults) else task_options
    expect_setequal(intersect(names(args), names(defaults)), expected)
    expect_identical(vapply(expected, function(name) deparse(args[[name]]), character(1)), defaults[expected])
    expect_identical(args$instruction, "")
  }
  expect_identical(newrllama:::annotation_task_options, task_options)
})

test_that("annotation_task() makes a task once that the verbs take in the place of the labels", {
  stories <- data.frame(text = c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output."))
  labels <- c("acquisition", "crude oil")
  task <- annotation_task(labels, "Give the topic of the news story.", debias = "reverse")
  expect_s3_class(task, "newrllama_annotation_task")
  expect_output(print(task), "2 labels: acquisition, crude oil")
  expect_output(print(task), "debias: reverse")
  expect_identical(llm_vec_annotate(stories$text, task, progress = FALSE),
                   llm_vec_annotate(stories$text, labels, "Give the topic of the news story.", debias = "reverse",
                                    progress = FALSE))
  expect_identical(llm_annotate(stories, text, task, progress = FALSE)$.label,
                   unname(llm_vec_annotate(stories$text, task, progress = FALSE)))
  expect_s3_class(plan_annotation(stories, text, task, sample = 0), "newrllama_annotation_plan")
  expect_error(llm_vec_annotate(stories$text, task, debias = "none"), "not both", class = "newrllama_invalid_argument")
  expect_error(annotation_task(labels, too_long = "sometimes"), "too_long", class = "newrllama_invalid_argument")
})
