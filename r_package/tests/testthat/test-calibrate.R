skip_if_no_newrllama()
model <- test_model()
ctx <- test_context(model, n_ctx = 4096L)
labels <- c("sports", "business")
texts <- c("The striker scored twice and the team won the cup final.", "Shares of the bank fell after weak profits.",
           "The champion retired after twenty seasons.", "The company bought a rival for two billion dollars.",
           "The coach was sacked after five defeats.", "Profits at the carmaker doubled this year.")
truth <- c("sports", "business", "sports", "business", "sports", "business")
annotated <- function(texts, labels, ...) {
  llm_annotate(data.frame(text = texts), text, labels, context = ctx, progress = FALSE, ...)
}

test_that("calibrate_labels() fits on coded texts, predict() and llm_annotate() apply it, least_confident() picks", {
  coded <- annotated(texts, labels, calibration = "pending")
  cal <- calibrate_labels(coded, truth, folds = 3)
  expect_s3_class(cal, "newrllama_calibration")
  if (requireNamespace("generics", quietly = TRUE)) {
    g <- generics::glance(cal)
    expect_equal(c(g$n, g$cv_kappa, g$penalty), c(cal$n, cal$cv_kappa, cal$penalty))
    expect_equal(g$calibrated, isTRUE(cal$calibrated))
    expect_equal(summary(cal)$overall, g)
  }
  expect_equal(sort(names(cal$offsets)), sort(labels))
  expect_equal(cal$n, 6)
  expect_true(cal$cv_accuracy >= 0 && cal$cv_accuracy <= 1)
  expect_output(print(cal), "fitted on 6 coded texts")
  expect_true(cal$balanced && cal$penalty > 0)
  expect_identical(cal$calibrated, is.finite(cal$penalty))
  expect_output(print(cal), if (cal$calibrated) "penalty" else "no calibration chosen [(]by cross-validated kappa[)]")
  by_loss <- calibrate_labels(coded, truth, folds = 3, criterion = "log-loss")
  expect_equal(c(cal$criterion, by_loss$criterion), c("kappa", "log-loss"))
  expect_error(calibrate_labels(coded, truth, criterion = "accuracy"), "criterion must be one of",
               class = "newrllama_invalid_argument")
  expect_equal(calibrate_labels(coded, truth, penalty = 2, balanced = FALSE)[c("penalty", "balanced")],
               list(penalty = 2, balanced = FALSE))
  coded$code <- truth
  expect_equal(calibrate_labels(coded, code, folds = 3)[c("scale", "offsets")], cal[c("scale", "offsets")])
  applied <- predict(cal, coded)
  expect_true(all(applied$.label %in% labels))
  expect_equal(applied$.raw_probs, coded$.raw_probs)
  expect_equal(applied$.order_free_probs, coded$.order_free_probs)
  expect_equal(applied$.order_flip, coded$.order_flip)
  direct <- annotated(texts, labels, calibration = cal)
  expect_equal(direct$.label, applied$.label)
  # Python's own calibrated probabilities, from the same order-free ones.
  py <- cal$py$probs(as.list(coded$.order_free_probs[[1]]))
  expect_equal(unlist(py)[labels], applied$.probs[[1]][labels], tolerance = 1e-9)
  margins <- vapply(coded$.probs, function(p) diff(sort(p, decreasing = TRUE)[2:1]), numeric(1))
  expect_equal(as.integer(least_confident(coded, 2)), order(margins)[1:2])
  # The rows carry their figures: after reordering, the least confident are the same texts.
  reordered <- coded[6:1, ]
  expect_equal(reordered$text[least_confident(reordered, 2)], coded$text[least_confident(coded, 2)])
})

test_that("with the default debias method, labels to be calibrated take two orders and keep to their calibration", {
  pending <- annotated(texts, labels, calibration = "pending")
  reverse <- annotated(texts, labels, debias = "reverse")
  expect_equal(pending$.probs, reverse$.probs)
  expect_false(anyNA(pending$.order_flip))
  cal <- calibrate_labels(pending, truth, folds = 3, penalty = 1)
  direct <- annotated(texts, labels, calibration = cal)
  expect_equal(direct$.probs, predict(cal, pending)$.probs)
  one_order <- annotated(texts, labels)
  expect_true(all(is.na(one_order$.order_flip)))
  expect_error(predict(cal, one_order), "two orders for calibration here, in one there",
               class = "newrllama_invalid_argument")
  expect_error(annotated(texts, labels, calibration = "later"), "or be 'pending'", class = "newrllama_invalid_argument")
})

test_that("human codes as the calibration give what pending labels calibrated on them give, in one call", {
  one_order <- annotated(texts, labels)
  expect_warning(calibrate_labels(one_order, truth, folds = 3), "6 of the 6 coded texts were scored in one order",
                 class = "newrllama_one_order_scores")
  pending <- annotated(texts, labels, calibration = "pending")
  by_one_coder <- factor(c("business", "business", "business", "business", NA, NA), levels = labels)
  fitted <- calibrate_labels(pending, by_one_coder)
  expect_true(fitted$calibrated)
  natural <- annotated(texts, labels, calibration = by_one_coder)
  expect_equal(natural$.label, predict(fitted, pending)$.label)
  expect_equal(natural$.probs, predict(fitted, pending)$.probs)
  expect_false(identical(natural$.label, pending$.label))
  expect_error(annotated(texts, labels, calibration = c("sports", NA)), "holds 2 codes for 6 texts",
               class = "newrllama_invalid_argument")
  expect_error(annotated(texts, labels, calibration = c("politics", rep(NA, 5))), "not among the labels",
               class = "newrllama_invalid_argument")
})

test_that("calibrate_labels() and least_confident() refuse what they cannot use", {
  coded <- annotated(texts[1:2], labels, calibration = "pending")
  expect_error(calibrate_labels(coded, "sports"), "one value per row", class = "newrllama_invalid_argument")
  expect_error(calibrate_labels(coded, c("sports", "politics")), "not one of the labels",
               class = "newrllama_invalid_argument")
  expect_error(calibrate_labels(c("sports", "business"), truth[1:2]), "data frame from llm_annotate",
               class = "newrllama_invalid_argument")
  expect_error(calibrate_labels(coded, truth[1:2], label = "topic"), "column `topic`",
               class = "newrllama_invalid_argument")
  expect_error(calibrate_labels(coded, truth[1:2], penalty = 0), "penalty", class = "newrllama_invalid_argument")
  expect_error(calibrate_labels(coded, truth[1:2], balanced = NA), "balanced", class = "newrllama_invalid_argument")
  cal <- calibrate_labels(coded, truth[1:2], folds = 2)
  other <- annotated(texts[1:2], c("sports", "business", "weather"))
  expect_error(predict(cal, other), "fitted on the labels", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate(texts[1], c("a", "b"), context = ctx, calibration = cal, progress = FALSE),
               "fitted on the labels", class = "newrllama_invalid_argument")
  expect_error(least_confident(coded, -1), "n", class = "newrllama_invalid_argument")
})

test_that("a calibration survives saveRDS() and a JSON file, and refuses labels made otherwise", {
  coded <- annotated(texts, labels, calibration = "pending")
  expect_match(coded$.provenance[1], "\"debias\": \"auto\"")
  cal <- calibrate_labels(coded, truth, folds = 3)
  old <- from_previous_session(cal)
  expect_true(reticulate::py_is_null_xptr(old$py))
  expect_equal(predict(old, coded)$.probs, predict(cal, coded)$.probs)
  path <- tempfile(fileext = ".json")
  expect_equal(write_calibration(cal, path), path)
  back <- read_calibration(path)
  expect_s3_class(back, "newrllama_calibration")
  expect_equal(back[c("labels", "scale", "offsets", "n")], cal[c("labels", "scale", "offsets", "n")])
  expect_equal(predict(back, coded)$.label, predict(cal, coded)$.label)
  plain <- annotated(texts, labels, debias = "none")
  expect_error(predict(cal, plain), "debias 'auto' here, 'none' there", class = "newrllama_invalid_argument")
  expect_error(llm_vec_annotate(texts, labels, context = ctx, debias = "none", calibration = cal, progress = FALSE),
               "fitted on labels made otherwise", class = "newrllama_invalid_argument")
  writeLines("{}", path)
  expect_error(read_calibration(path), "not a newrllama calibration", class = "newrllama_invalid_argument")
})

test_that("methods_text() writes Python's paragraph from the labels' provenance", {
  coded <- annotated(texts, labels)
  text <- methods_text(coded, ifelse(seq_along(texts) %% 2 == 1, truth, NA))
  expect_type(text, "character")
  expect_match(text, "gemma-3-270m-q4_k_m.gguf (SHA-256", fixed = TRUE)
  expect_match(text, "A simple random sample of 3 of the 6 texts", fixed = TRUE)
  expect_match(text, "(contextual calibration; Zhao et al. 2021), and for longer texts", fixed = TRUE)
  coded <- annotated(texts, labels, calibration = "pending")
  cal <- calibrate_labels(coded, truth, folds = 3, penalty = 1)  # a fit, whatever the coded texts say
  expect_match(methods_text(predict(cal, coded), calibration = cal), "calibrated on 6 hand-coded texts", fixed = TRUE)
  declined <- calibrate_labels(coded, truth, folds = 3)
  expect_match(methods_text(predict(declined, coded), calibration = declined),
               if (declined$calibrated) "calibrated on 6 hand-coded texts" else "considered and not applied", fixed = TRUE)
})
