skip_if_no_newrllama()
model <- test_model()
small <- test_context(model, n_ctx = 2048L)
labels <- c("acquisition", "crude oil")
stories <- data.frame(text = c("Texaco agreed to buy Getty Oil for $10 billion.", "OPEC ministers agreed to cut output.",
                               "The bank bought a stake in the insurer.", "Saudi Arabia raised its oil exports.",
                               "Chevron will merge with Gulf in a stock deal.", "Crude stocks in Cushing rose."))

test_that("a cascade sends the least sure texts to the second model, and each row says which model labelled it", {
  cached <- file.path(Sys.getenv("NEWRLLAMA_CACHE_DIR", path.expand("~/.cache/newrllama")),
                      "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
  skip_if_not(file.exists(cached), "the 0.5B instruct model is not in the cache (scripts/fetch_instruct_model.py)")
  large <- context_create(model_load(cached), n_ctx = 2048L, n_seq_max = 4L)
  first <- llm_annotate(stories, text, labels, "Give the topic.", context = small, progress = FALSE)
  margins <- vapply(first$.probs, function(p) diff(sort(p, decreasing = TRUE)[2:1]), numeric(1))
  sent <- sort(order(margins)[1:2])
  rule <- cascade(large, share = 1 / 3)
  expect_s3_class(rule, "newrllama_cascade")
  expect_output(print(rule), "the 33.3333% of texts with the smallest margin")
  out <- llm_annotate(stories, text, labels, "Give the topic.", context = small, progress = FALSE, cascade = rule)
  again <- llm_annotate(stories[sent, , drop = FALSE], text, labels, "Give the topic.", context = large,
                        progress = FALSE)
  expect_equal(out$.probs[sent], again$.probs)
  expect_equal(out$.probs[-sent], first$.probs[-sent])
  files <- sub(".*\"model_file\": \"([^\"]+)\".*", "\\1", out$.provenance)
  expect_equal(unique(files[sent]), basename(cached))
  expect_equal(unique(files[-sent]), "gemma-3-270m-q4_k_m.gguf")
  plan <- plan_annotation(stories, text, labels, "Give the topic.", context = small, sample = 2L, cascade = rule)
  expect_equal(plan$second_share, 1 / 3)
  expect_true(plan$second_seconds > 0 && plan$seconds > plan$second_seconds)
  expect_output(print(plan), "of which the cascade's second model")
  text <- methods_text(out)
  expect_match(text, "A cascade then labelled", fixed = TRUE)
  expect_match(text, basename(cached), fixed = TRUE)
  expect_error(llm_annotate(stories, text, labels, context = small, progress = FALSE, cascade = large),
               "must come from cascade", class = "newrllama_invalid_argument")
  expect_error(cascade(large, share = 2), "share must be a number in \\(0, 1\\]", class = "newrllama_invalid_argument")
  expect_error(llm_annotate(stories, text, labels, context = small, progress = FALSE, cascade = rule,
                            calibration = "pending"), "leave calibration out", class = "newrllama_invalid_argument")
})

test_that("choose_cascade_share() gives Python's choice from the coded texts of both models", {
  x <- data.frame(.label = c("a", "a", "b", "b", "a", "b"))
  margins <- c(0.05, 0.1, 0.6, 0.7, 0.8, 0.9)
  x$.probs <- lapply(seq_len(6), function(i) {
    top <- (1 + margins[i]) / 2
    if (x$.label[i] == "a") c(a = top, b = 1 - top) else c(a = 1 - top, b = top)
  })
  code <- c("b", "b", "b", "b", "a", NA)  # the first model is wrong on its two least sure texts
  second <- data.frame(.label = c("b", "b", "b", "b", "a"))
  second$.probs <- lapply(second$.label, function(l) if (l == "a") c(a = 0.9, b = 0.1) else c(a = 0.1, b = 0.9))
  out <- choose_cascade_share(x, code, second, shares = c(1 / 6, 1 / 3, 1))
  expect_equal(out$share[out$chosen], 1 / 3)
  expect_equal(out$kappa[out$share == 1], 1)
  expect_error(choose_cascade_share(x, code, second[1:2, ]), "second has 2 annotations for the 5 coded texts",
               class = "newrllama_invalid_argument")
})
