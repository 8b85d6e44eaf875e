skip_if_no_newrllama()

# Five-point codes with an "unclear" code, as llm_annotate() would give them: no model is run here.
scale <- c("1" = 1, "2" = 2, "3" = 3, "4" = 4, "5" = 5)
labels <- c(names(scale), "unclear")
set.seed(5)
n <- 200
truth <- sample(labels, n, replace = TRUE, prob = c(0.1, 0.2, 0.3, 0.2, 0.1, 0.1))
probs <- t(vapply(truth, function(t) {
  p <- stats::runif(length(labels)) + 2 * (labels == t)
  stats::setNames(p / sum(p), labels)
}, numeric(length(labels))))
x <- data.frame(id = seq_len(n))
x$.label <- labels[apply(probs, 1, which.max)]
x$.probs <- lapply(seq_len(n), function(i) probs[i, ])
coded <- ifelse(seq_len(n) %% 4 == 0, truth, NA)

test_that("mean_score() gives Python's mean over the texts on the scale, unclear texts left out", {
  m <- mean_score(x, coded, scale, unclear = "unclear")
  expect_s3_class(m, "tbl_df")
  expect_equal(nrow(m), 1)
  py <- py_newrllama()$mean_score(lapply(seq_len(n), function(i) py_newrllama()$Annotation(x$.label[[i]],
                                                                                             as.list(probs[i, ]))),
                                  na_to_none(coded), as.list(scale), unclear = list("unclear"))
  expect_equal(c(m$estimate, m$conf.low, m$conf.high), c(py$estimate, py$lower, py$upper))
  on_scale <- coded[!is.na(coded) & coded != "unclear"]
  expect_equal(m$classical, mean(scale[on_scale]))
  expect_equal(m$n_unclear, sum(coded == "unclear", na.rm = TRUE))
  expect_error(mean_score(x, coded, scale), "no score and are not unclear", class = "newrllama_invalid_argument")
  expect_error(mean_score(x, coded, c(1, 2)), "named numeric", class = "newrllama_invalid_argument")
})

test_that("weighted_kappa() counts near misses", {
  exact <- weighted_kappa(truth, truth, names(scale))
  expect_equal(exact$kappa, 1)
  near <- ifelse(truth == "3", "4", truth)
  far <- ifelse(truth == "3", "1", truth)
  expect_gt(weighted_kappa(near, truth, names(scale))$kappa, weighted_kappa(far, truth, names(scale))$kappa)
  expect_error(weighted_kappa(truth, truth, names(scale), weights = "cubic"), class = "error")
})

test_that("label_shares() estimates each label's share from yes/no questions and coders' sets of labels", {
  questions <- c("acquisition", "crude oil")
  m <- 120
  carries <- lapply(seq_len(m), function(i) questions[stats::runif(2) < c(0.4, 0.3)])
  d <- data.frame(id = seq_len(m))
  for (q in questions) {
    p_yes <- vapply(carries, function(c) if (q %in% c) 0.8 else 0.2, 1) + stats::runif(m, -0.1, 0.1)
    d[[paste0(q, ".label")]] <- ifelse(p_yes > 0.5, "yes", "no")
    d[[paste0(q, ".probs")]] <- lapply(p_yes, function(p) c(yes = p, no = 1 - p))
  }
  d$coded <- lapply(seq_len(m), function(i) if (i %% 3 == 0) carries[[i]] else NA)
  shares <- label_shares(d, coded)
  expect_s3_class(shares, "newrllama_prevalence")
  expect_equal(shares$label, questions)
  crude <- prevalence(d, vapply(d$coded, function(t) if (length(t) == 1 && is.na(t)) NA_character_ else
    if ("crude oil" %in% t) "yes" else "no", ""), label = "crude oil.label")
  expect_equal(shares$estimate[[2]], crude$estimate[crude$label == "yes"])
  expect_error(label_shares(d, id), "must be a list", class = "newrllama_invalid_argument")
})
