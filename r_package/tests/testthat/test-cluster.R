skip_if_no_ray()

test_that("cluster_create() checks its arguments before starting anything", {
  expect_error(cluster_create(workers = 0), "workers", class = "newrllama_invalid_argument")
  expect_error(cluster_create(threads_per_worker = "two"), "threads_per_worker", class = "newrllama_invalid_argument")
  expect_error(cluster_create(model = "/no/such/model.gguf"), "does not exist", class = "newrllama_model_load_error")
  expect_error(cluster_create(address = 1), "address", class = "newrllama_invalid_argument")
  expect_error(cluster_stop("cluster"), "newrllama_cluster", class = "newrllama_invalid_argument")
})

test_that("a cluster answers like a context, writes its results as they come and resumes", {
  cluster <- cluster_create(workers = 2L, n_seq_max = 4L)
  on.exit(cluster_stop(cluster), add = TRUE)
  expect_s3_class(cluster, "newrllama_cluster")
  expect_output(print(cluster), "2 x 1 threads")
  prompts <- c(fr = capital_prompt("France"), jp = capital_prompt("Japan"), es = capital_prompt("Spain"),
               empty = "", de = capital_prompt("Germany"), it = capital_prompt("Italy"))
  model <- test_model()
  local <- suppressWarnings(generate_parallel(test_context(model, n_ctx = 1024L, n_seq_max = 4L), prompts,
                                              max_tokens = 4L, progress = FALSE))
  out <- tempfile(fileext = ".jsonl")
  w <- expect_warning(remote <- generate_parallel(cluster, prompts, max_tokens = 4L, progress = FALSE, output = out),
                      "1 of 6 prompts failed", class = "newrllama_failed_prompts")
  expect_match(w$errors[["4"]], "empty")
  expect_equal(names(remote), names(prompts))
  expect_equal(as.vector(remote), as.vector(local))
  expect_true(is.na(remote[[4]]))
  json <- reticulate::import("json")
  lines <- lapply(readLines(out), json$loads)
  expect_setequal(vapply(lines, function(r) r$id, ""), names(prompts))
  expect_equal(lines[[which(vapply(lines, function(r) r$id, "") == "jp")]]$text, remote[["jp"]])

  again <- suppressWarnings(generate_parallel(cluster, prompts, max_tokens = 4L, progress = FALSE, output = out,
                                              resume = TRUE))
  expect_equal(as.vector(again), as.vector(remote))
  expect_equal(last_stats(cluster)$n_resumed, 6L)
  expect_length(readLines(out), 6L)
  expect_error(generate_parallel(cluster, prompts, max_tokens = 5L, progress = FALSE, output = out, resume = TRUE),
               "other settings", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(cluster, prompts, max_tokens = 4L, progress = FALSE, output = out),
               "already holds results", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(cluster, c(a = "x", a = "y"), progress = FALSE, output = tempfile()),
               "more than once", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(cluster, prompts, max_new_tokens = 4L), "unknown argument: `max_new_tokens`",
               class = "newrllama_invalid_argument")
  expect_error(generate_parallel(cluster, prompts, resume = TRUE), "needs an output file",
               class = "newrllama_invalid_argument")
  chat <- list(colour = list(list(role = "user", content = "Name a colour.")))
  expect_equal(generate_parallel(cluster, messages = chat, max_tokens = 4L, progress = FALSE),
               generate_parallel(test_context(model), messages = chat, max_tokens = 4L, progress = FALSE),
               ignore_attr = c("stats"))
  per_prompt <- generate_parallel(cluster, prompts[c("fr", "jp")], max_tokens = 4L, progress = FALSE,
                                  params = data.frame(max_tokens = c(1L, NA)))
  expect_equal(per_prompt[["jp"]], remote[["jp"]])
  expect_true(startsWith(remote[["fr"]], per_prompt[["fr"]]) && nchar(per_prompt[["fr"]]) < nchar(remote[["fr"]]))

  texts <- c(a = "Texaco agreed to buy Getty Oil for $10 billion.", b = "OPEC ministers agreed to cut crude output.")
  labels <- c("acquisition", "crude oil")
  labelled <- llm_vec_annotate(texts, labels, "Give the topic of the news story.", context = cluster, progress = FALSE)
  here <- llm_vec_annotate(texts, labels, "Give the topic of the news story.", context = test_context(model),
                       progress = FALSE)
  expect_equal(labelled, here, ignore_attr = "provenance")
  defined <- c(acquisition = "one company buys another", `crude oil` = "oil prices, output or supply")
  expect_equal(llm_vec_annotate(texts, defined, "Give the topic of the news story.", context = cluster,
                            debias = "rotations", progress = FALSE),
               llm_vec_annotate(texts, defined, "Give the topic of the news story.", context = test_context(model),
                            debias = "rotations", progress = FALSE),
               ignore_attr = "provenance")
  stories <- data.frame(text = unname(texts))
  out2 <- tempfile(fileext = ".jsonl")
  coded <- llm_annotate(stories, text, labels, "Give the topic of the news story.", context = cluster, progress = FALSE,
                    output = out2)
  expect_equal(coded$.label, as.vector(here))
  expect_length(readLines(out2), 2L)
  # The cluster's file is a context's: a run recorded on one resumes on the other, and other settings are refused.
  resumed <- llm_annotate(stories, text, labels, "Give the topic of the news story.", context = test_context(model),
                      progress = FALSE, output = out2, resume = TRUE)
  expect_equal(resumed$.probs, coded$.probs)
  expect_error(llm_annotate(stories, text, defined, "Give the topic of the news story.", context = test_context(model),
                        output = out2, resume = TRUE, progress = FALSE), "other settings",
               class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate(texts, labels, context = cluster, n_seq_max = 2L), "unknown argument",
               class = "newrllama_invalid_argument")

  cluster_stop(cluster)
  expect_output(print(cluster), "closed")
  expect_error(generate_parallel(cluster, prompts, progress = FALSE), "closed", class = "newrllama_closed_error")
})
