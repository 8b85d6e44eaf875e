skip_if_no_newrllama()

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 coders x 12 units.
krippendorff_example <- rbind(
  c(1, 2, 3, 3, 2, 1, 4, 1, 2, NA, NA, NA),
  c(1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NA, 3),
  c(NA, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NA),
  c(1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NA)
)

test_that("agreement() matches Krippendorff's published example", {
  expect_equal(round(agreement(krippendorff_example)$alpha, 3), 0.743)
  expect_equal(round(agreement(krippendorff_example, "ordinal")$alpha, 3), 0.815)
  a <- agreement(krippendorff_example, "interval")
  expect_equal(round(a$alpha, 3), 0.849)
  expect_equal(a$n_units, 11)
  expect_equal(a$n_coders, 4)
  expect_output(print(a), "Krippendorff's alpha \\(interval\\) 0.849")
})

test_that("agreement() takes labels with NA and data frames", {
  coders <- data.frame(u1 = c("acq", "acq", NA), u2 = c("crude", "crude", "crude"), u3 = c("acq", NA, "acq"))
  a <- agreement(coders)
  expect_equal(a$alpha, 1)
  expect_equal(a$percent_agreement, 1)
  expect_error(agreement(krippendorff_example, "ratio"), "should be one of")
  expect_error(agreement(1:3), "coders x units", class = "newrllama_invalid_argument")
  expect_error(agreement(rbind(c("a", "b"), c("a", "c")), "interval"), "numbers", class = "newrllama_invalid_argument")
})

test_that("validate_labels() gives accuracy, kappa, macro-F1, per-label scores and the confusion table", {
  v <- validate_labels(c("a", "b", "a", NA, "c"), c("a", "b", "b", "a", NA))
  expect_s3_class(v, "newrllama_validation")
  expect_equal(v$n, 4)
  expect_equal(v$n_missing, 1)
  expect_equal(v$accuracy, 0.5)
  expect_equal(v$kappa, (0.5 - 6 / 16) / (1 - 6 / 16))
  expect_equal(v$macro_f1, (0.5 + 2 / 3) / 2)
  expect_equal(v$per_label$label, c("a", "b"))
  expect_equal(v$per_label$recall, c(0.5, 0.5))
  expect_equal(v$per_label$support, c(2L, 2L))
  expect_equal(sum(v$confusion), 4)
  expect_equal(unname(v$confusion["b", "a"]), 1)
  expect_output(print(v), "accuracy 0.500")
})

test_that("validate_labels() agrees with Python on numeric labels and factors", {
  truth <- factor(c(1, 2, 2, 3, 3, 3))
  v <- validate_labels(c(1, 2, 3, 3, 3, 1), truth)
  expect_equal(v$accuracy, 4 / 6)
  expect_equal(v$per_label$label, c("1", "2", "3"))
  py <- reticulate::import("newrllama")$validate(list("1", "2", "3", "3", "3", "1"), list("1", "2", "2", "3", "3", "3"))
  expect_equal(v$kappa, py$kappa)
})

test_that("validate_labels() checks its arguments", {
  expect_error(validate_labels(c("a", "b"), "a"), "has 2 labels", class = "newrllama_invalid_argument")
  expect_error(validate_labels(list("a"), "a"), "vector of labels", class = "newrllama_invalid_argument")
  expect_error(validate_labels(NA, NA), "known truth", class = "newrllama_invalid_argument")
})

test_that("validate_labels() gives 95% intervals and, with probabilities, Brier, ECE and a reliability plot", {
  v <- validate_labels(c(rep("a", 8), "b", "b"), rep("a", 10))
  expect_equal(v$accuracy_ci, c(0.4902, 0.9433), tolerance = 1e-4)
  expect_length(v$kappa_ci, 2)
  expect_true(is.na(v$brier))
  probs <- rbind(c(a = 0.9, b = 0.1), c(a = 0.6, b = 0.4), c(a = 0.3, b = 0.7), c(a = NA, b = NA))
  w <- validate_labels(c("a", "a", "b", NA), c("a", "b", "b", "a"), probs)
  expect_equal(w$brier, (0.02 + 0.72 + 0.18) / 3)
  expect_equal(w$ece, (0.6 + 0.3 + 0.1) / 3)
  expect_equal(w$reliability$n, c(1L, 1L, 1L))
  expect_output(print(w), "Brier score 0.307")
  file <- tempfile(fileext = ".png")
  grDevices::png(file)
  plot(w)
  grDevices::dev.off()
  expect_gt(file.size(file), 1000)
  expect_error(plot(v), "probabilities", class = "newrllama_invalid_argument")
  expect_error(validate_labels("a", "a", probs), "4 rows", class = "newrllama_invalid_argument")
  expect_error(validate_labels("a", "a", matrix(0.5)), "column names", class = "newrllama_invalid_argument")
})
