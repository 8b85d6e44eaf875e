skip_if_no_newrllama()

# Labels and probabilities as llm_annotate() adds them, for a population whose model calls a third of the
# earnings stories acquisitions: no model is run here (llm_annotate() has its own tests).
labels <- c("acquisition", "crude oil", "earnings")
set.seed(3)
n <- 240
truth <- sample(labels, n, replace = TRUE, prob = c(0.5, 0.3, 0.2))
predicted <- ifelse(truth == "earnings" & runif(n) < 0.35, "acquisition", truth)
probs <- t(vapply(predicted, function(l) {
  p <- 0.2 + 0.6 * (labels == l) + runif(3, 0, 0.1)
  p / sum(p)
}, numeric(3)))
dimnames(probs) <- list(NULL, labels)
x <- data.frame(id = seq_len(n))
x$.label <- predicted
x$.probs <- lapply(seq_len(n), function(i) probs[i, ])
coded <- ifelse(seq_len(n) %% 3 == 0, truth, NA)
group <- ifelse(seq_len(n) %% 2 == 0, "wire", "paper")

python_share <- function(label, ...) {
  annotations <- lapply(seq_len(n), function(i) py_newrllama()$Annotation(predicted[[i]], as.list(probs[i, ])))
  py_newrllama()$prevalence(annotations, lapply(coded, function(v) if (is.na(v)) NULL else v), ...)$share(label)
}

test_that("prevalence() gives Python's PPI++ shares with the naive and coded-only figures beside them", {
  out <- prevalence(x, coded)
  expect_s3_class(out, "data.frame")
  expect_equal(out$label, labels)
  expect_true(all(out$estimand == "share") && all(out$n_coded == n / 3) && all(out$n == n))
  py <- python_share("earnings")
  row <- out[out$label == "earnings", ]
  expect_equal(c(row$estimate, row$conf.low, row$conf.high, row$lambda), c(py$estimate, py$lower, py$upper, py$lam))
  expect_equal(row$naive, mean(predicted == "earnings"))
  expect_equal(row$classical, mean(truth[!is.na(coded)] == "earnings"))
  expect_true(row$conf.low < mean(truth == "earnings") && mean(truth == "earnings") < row$conf.high)
  by_labels <- prevalence(x, coded, predictions = "labels")
  expect_false(isTRUE(all.equal(by_labels$estimate, out$estimate)))
})

test_that("prevalence() by group adds each group's difference from the reference", {
  out <- prevalence(x, coded, by = group)
  shares <- out[out$estimand == "share", ]
  diffs <- out[out$estimand == "difference", ]
  expect_equal(nrow(shares), 6)
  expect_equal(unique(diffs$reference), "paper")
  expect_equal(unique(diffs$group), "wire")
  crude <- shares[shares$label == "crude oil", ]
  expect_equal(diffs$estimate[diffs$label == "crude oil"],
               crude$estimate[crude$group == "wire"] - crude$estimate[crude$group == "paper"])
  expect_true(all(is.na(diffs$naive)) && all(is.na(shares$reference)))
  flipped <- prevalence(x, coded, by = group, reference = "wire")
  expect_equal(unique(flipped$reference[flipped$estimand == "difference"]), "wire")
})

test_that("prevalence() reads codes and groups from columns or vectors, and a question's columns by its label", {
  d <- x
  d$code <- coded
  d$source <- group
  expect_equal(prevalence(d, code, by = source), prevalence(x, coded, by = group))
  expect_equal(prevalence(d, "code"), prevalence(x, coded))
  q <- data.frame(id = seq_len(n))
  q$topic.label <- predicted
  q$topic.probs <- x$.probs
  expect_equal(prevalence(q, coded, label = "topic.label"), prevalence(x, coded))
  # Rows move with their figures: a shuffled table gives the same shares.
  shuffled <- sample(n)
  expect_equal(prevalence(d[shuffled, ], code)$estimate, prevalence(d, code)$estimate, tolerance = 1e-12)
  expect_error(prevalence(d, nothing), "must name a column", class = "newrllama_invalid_argument")
  expect_error(prevalence(d, code, label = "topic.label"), "list-column `topic.probs`",
               class = "newrllama_invalid_argument")
})

test_that("bad input to prevalence() is a clear error from Python's checks", {
  expect_error(prevalence(x, coded[-1]), "one value per row \\(240\\), not 239",
               class = "newrllama_invalid_argument")
  expect_error(prevalence(x, replace(coded, 4, "sport")), "truth holds 'sport'", class = "newrllama_invalid_argument")
  expect_error(prevalence(x, coded, alpha = 2), "alpha must be a number in", class = "newrllama_invalid_argument")
  expect_error(prevalence(x, coded, by = group, reference = "tv"), "reference 'tv' is not one of the groups",
               class = "newrllama_invalid_argument")
  expect_error(prevalence(x, coded, predictions = "votes"), "should be one of")
  expect_error(prevalence("acquisition", "acquisition"), "data frame from llm_annotate",
               class = "newrllama_invalid_argument")
})

test_that("regression() fits a formula with PPI++ intervals that agree with Python", {
  d <- data.frame(year = rep(1:4, length.out = n), wire = as.numeric(group == "wire"))
  d$crude <- ifelse(is.na(coded), NA, as.numeric(coded == "crude oil"))
  d$p_crude <- probs[, "crude oil"]
  out <- regression(crude ~ year + wire, d, p_crude)
  expect_equal(out$term, c("(Intercept)", "year", "wire"))
  expect_true(all(out$conf.low < out$estimate & out$estimate < out$conf.high))
  py <- py_newrllama()$regression(Map(list, d$year, d$wire), as.list(d$crude), d$p_crude,
                                  names = list("year", "wire"))
  expect_equal(out$estimate[2], py$coefficient("year")$estimate)
  expect_equal(out$conf.high[3], py$coefficient("wire")$upper)
  expect_equal(unique(out$n_coded), n / 3)
  expect_equal(regression(crude ~ year, d, "p_crude")$term, c("(Intercept)", "year"))
  logit <- regression(crude ~ year + wire, d, p_crude, family = "binomial")
  py_logit <- py_newrllama()$regression(Map(list, d$year, d$wire), as.list(d$crude), d$p_crude,
                                        names = list("year", "wire"), family = "binomial")
  expect_equal(logit$conf.low[2], py_logit$coefficient("year")$lower)
  expect_false(isTRUE(all.equal(logit$estimate, out$estimate)))
  expect_error(regression(crude ~ year, d, p_crude, family = "poisson"), "should be one of")
  d$crude_flag <- d$crude == 1
  expect_equal(regression(crude_flag ~ year, d, p_crude)$estimate, regression(crude ~ year, d, p_crude)$estimate)
  expect_error(regression(crude ~ year, d, nothing), "must name a column", class = "newrllama_invalid_argument")
  expect_error(regression(~ year, d, p_crude), "two-sided formula", class = "newrllama_invalid_argument")
  d$label <- ifelse(is.na(coded), NA, coded)
  expect_error(regression(label ~ year, d, p_crude), "the outcome must hold numbers",
               class = "newrllama_invalid_argument")
  d$year[3] <- NA
  expect_error(regression(crude ~ year, d, p_crude), "x has missing values", class = "newrllama_invalid_argument")
})

test_that("regression() takes a model-coded regressor, as Python does, and refuses what it cannot use", {
  d <- data.frame(wire = as.numeric(group == "wire"), p_crude = probs[, "crude oil"])
  d$crude <- ifelse(is.na(coded), NA, coded == "crude oil")
  d$words <- 80 + 40 * (truth == "crude oil") + 10 * d$wire + stats::rnorm(n, sd = 15)
  out <- regression(words ~ crude + wire, d, predicted_regressors = c(crude = "p_crude"))
  expect_equal(out$term, c("(Intercept)", "crude", "wire"))
  py <- py_newrllama()$regression(Map(list, ifelse(is.na(d$crude), NA, as.numeric(d$crude)), d$wire), as.list(d$words),
                                  predicted_regressors = list(crude = d$p_crude), names = list("crude", "wire"))
  expect_equal(out$estimate[2], py$coefficient("crude")$estimate)
  expect_equal(out$conf.low[2], py$coefficient("crude")$lower)
  expect_equal(unique(out$n_coded), n / 3)
  d$earnings <- ifelse(is.na(coded), NA, coded == "earnings")
  d$p_earnings <- probs[, "earnings"]
  both <- regression(crude ~ earnings + wire, d, p_crude, predicted_regressors = c(earnings = "p_earnings"))
  py_both <- py_newrllama()$regression(Map(list, as.numeric(d$earnings), d$wire), as.list(as.numeric(d$crude)),
                                       d$p_crude, predicted_regressors = list(earnings = d$p_earnings),
                                       names = list("earnings", "wire"))
  expect_equal(both$conf.high[2], py_both$coefficient("earnings")$upper)
  expect_error(regression(words ~ crude + wire, d), "nothing is model-coded", class = "newrllama_invalid_argument")
  expect_error(regression(words ~ crude + wire, d, predicted_regressors = c(age = "p_crude")), "not a regressor",
               class = "newrllama_invalid_argument")
  expect_error(regression(words ~ crude + wire, d, predicted_regressors = c(crude = "p_oil")), "not a column",
               class = "newrllama_invalid_argument")
  expect_error(regression(words ~ crude + wire, d, predicted_regressors = "p_crude"), "named character vector",
               class = "newrllama_invalid_argument")
  d$words[1] <- NA
  expect_error(regression(words ~ crude + wire, d, predicted_regressors = c(crude = "p_crude")), "missing values",
               class = "newrllama_invalid_argument")
})

test_that("least_confident() positions go to a sheet as picked, and bare codes of them are warned about", {
  picked <- least_confident(x, 30)
  expect_s3_class(picked, "newrllama_picked")
  expect_output(print(picked), "picked by the model's doubt")
  bare <- ifelse(seq_len(n) %in% picked, truth, NA)
  expect_warning(prevalence(x, bare), "do not look like a random sample", class = "newrllama_unlike_random_sample")
  expect_warning(text <- methods_text(x, bare), class = "newrllama_unlike_random_sample")
  expect_match(text, "not a random sample")
  expect_no_warning(prevalence(x, coded))
  texts <- stats::setNames(paste("story", seq_len(n)), paste0("s", seq_len(n)))
  path <- tempfile(fileext = ".csv")
  write_coding_sheet(texts, picked, path)
  expect_error(prevalence(x, bare, design = read_coding_design(path, texts)), "picked",
               class = "newrllama_invalid_argument")
  plain <- tempfile(fileext = ".csv")
  write_coding_sheet(texts, as.integer(picked), plain)
  expect_error(read_coding_design(plain, texts), "no coding design", class = "newrllama_invalid_argument")
})

test_that("a coding sheet goes out and comes back as an Excel workbook, checked as a CSV one is", {
  skip_if_not_installed("openxlsx")
  texts <- c(s1 = "Texaco agreed to buy Getty Oil.", s2 = "OPEC cut its crude output,\n\"again\".", s3 = "Profit rose.")
  path <- tempfile(fileext = ".xlsx")
  expect_equal(write_coding_sheet(texts, c(3, 2), path), path)
  sheet <- openxlsx::read.xlsx(path)
  expect_equal(names(sheet), c("id", "text", "code"))
  expect_equal(sheet$id, c("s3", "s2"))
  expect_equal(sheet$text, unname(texts[c(3, 2)]))
  expect_true(all(is.na(sheet$code)))
  expect_equal(unname(read_coding_sheet(path, texts, labels)), rep(NA_character_, 3))
  sheet$code <- c("earnings", "crude oil")
  openxlsx::write.xlsx(sheet, path, overwrite = TRUE)
  expect_equal(read_coding_sheet(path, texts, labels), c(s1 = NA, s2 = "crude oil", s3 = "earnings"))
  sheet$code[1] <- "sport"
  openxlsx::write.xlsx(sheet, path, overwrite = TRUE)
  expect_error(read_coding_sheet(path, texts, labels), "line 2: code 'sport' is not one of the labels",
               class = "newrllama_invalid_argument")
  expect_error(read_coding_sheet(tempfile(fileext = ".xlsx"), texts, labels), "no such file",
               class = "newrllama_invalid_argument")
})

test_that("plan_coding() and a coding sheet take the next texts to a coder and their codes back", {
  first <- ifelse(seq_len(n) <= 40, truth, NA)
  plan <- plan_coding(x, first, target_width = 0.2, seed = 3)
  expect_true(plan$reachable && plan$n_more == length(plan$texts) && plan$n_more > 0)
  expect_true(all(plan$texts > 40 & plan$texts <= n))
  expect_true(all(plan$expected_widths <= 0.2) && any(plan$widths > 0.2))
  expect_named(plan$widths, labels)
  expect_s3_class(plan, "newrllama_coding_plan")
  expect_output(print(plan), sprintf("code %d more of %d texts \\(40 coded now\\)", plan$n_more, n))
  texts <- stats::setNames(paste("story", seq_len(n)), paste0("s", seq_len(n)))
  path <- tempfile(fileext = ".csv")
  expect_equal(write_coding_sheet(texts, plan$texts, path), path)
  sheet <- utils::read.csv(path, colClasses = "character")
  expect_equal(names(sheet), c("id", "text", "code"))
  expect_equal(sheet$id, names(texts)[plan$texts])
  sheet$code <- truth[plan$texts]
  utils::write.csv(sheet, path, row.names = FALSE)
  codes <- read_coding_sheet(path, texts, labels)
  expect_equal(unname(codes[plan$texts]), truth[plan$texts])
  expect_true(all(is.na(codes[-plan$texts])))
  both <- ifelse(is.na(first), codes, first)
  widths <- with(prevalence(x, both), conf.high - conf.low)
  expect_true(max(widths) < 0.2 + 0.03)
  sheet$code[1] <- "sport"
  utils::write.csv(sheet, path, row.names = FALSE)
  expect_error(read_coding_sheet(path, texts, labels), "code 'sport' is not one of the labels",
               class = "newrllama_invalid_argument")
  expect_error(plan_coding(x, first, target_width = 2), "target_width must be a number in",
               class = "newrllama_invalid_argument")
  expect_error(write_coding_sheet(texts, "a", path), "positions", class = "newrllama_invalid_argument")
})

test_that("a sheet carries its plan's design, in CSV and xlsx, and the estimates read it back", {
  first <- ifelse(seq_len(n) <= 40, truth, NA)
  plan <- plan_coding(x, first, budget = 30, active = TRUE, seed = 4)
  texts <- stats::setNames(paste("story", seq_len(n)), paste0("s", seq_len(n)))
  for (ext in c(".csv", if (requireNamespace("openxlsx", quietly = TRUE)) ".xlsx")) {
    path <- tempfile(fileext = ext)
    write_coding_sheet(texts, plan$texts, path, design = plan$design)
    expect_true(file.exists(sub("[.](csv|xlsx)$", ".design.json", path)))
    design <- read_coding_design(path, texts)
    expect_s3_class(design, "newrllama_coding_design")
    expect_equal(design$kind, "probabilities")
    coded <- ifelse(seq_len(n) %in% plan$texts, truth, NA)
    expect_equal(prevalence(x, coded, design = design), prevalence(x, coded, design = plan$design))
    # The texts in another order get their own probabilities.
    expect_equal(unlist(read_coding_design(path, rev(texts))$py$inclusion_probs),
                 rev(unlist(plan$design$py$inclusion_probs)))
  }
  expect_error(read_coding_design(tempfile(fileext = ".csv"), texts), "no coding design beside the sheet",
               class = "newrllama_invalid_argument")
  expect_error(read_coding_design(path, texts[-1]), "covers other texts", class = "newrllama_invalid_argument")
})

test_that("an active plan gives inclusion probabilities that prevalence() weights by", {
  first <- ifelse(seq_len(n) <= 40, truth, NA)
  plan <- plan_coding(x, first, budget = 60, active = TRUE, seed = 2)
  expect_length(plan$inclusion_probs, n)
  expect_true(all(plan$inclusion_probs > 0 & plan$inclusion_probs <= 1))
  coded_now <- ifelse(seq_len(n) %in% c(1:40, plan$texts), truth, NA)
  weighted <- prevalence(x, coded_now, inclusion_probs = plan$inclusion_probs)
  expect_false(isTRUE(all.equal(weighted$estimate, prevalence(x, coded_now)$estimate)))
  expect_equal(plan_coding(x, first, budget = 25)$n_more, 25)
  expect_error(prevalence(x, coded_now, inclusion_probs = rep(2, n)), "inclusion_probs must be",
               class = "newrllama_invalid_argument")
  expect_error(plan_coding(x, first), "target_width .* or budget", class = "newrllama_invalid_argument")
})

test_that("cross_fit() calibrates each coded text without its own code, as Python does", {
  fitted <- cross_fit(x, coded, penalty = 1)
  expect_named(fitted$.probs[[1]], labels)
  flipped <- coded
  first <- which(!is.na(coded))[1]
  flipped[first] <- setdiff(labels, coded[first])[1]
  expect_identical(cross_fit(x, flipped, penalty = 1)$.probs[[first]], fitted$.probs[[first]])
  annotations <- lapply(seq_len(n), function(i) py_newrllama()$Annotation(predicted[[i]], as.list(probs[i, ])))
  py <- py_newrllama()$cross_fit(annotations, lapply(coded, function(v) if (is.na(v)) NULL else v), penalty = 1)
  expect_equal(fitted$.probs[[2]], unlist(py[[2]]$probs[labels]))
  expect_s3_class(prevalence(fitted, coded), "data.frame")
  expect_error(cross_fit(x, coded, folds = 1), "folds", class = "newrllama_invalid_argument")
  expect_error(cross_fit(x, ifelse(seq_len(n) <= 5, truth, NA)), "cross-fitting needs at least 10",
               class = "newrllama_invalid_argument")
})

test_that("a coding design travels from plan_coding() to prevalence() and methods_text()", {
  first <- ifelse(seq_len(n) %% 12 == 0 & group == "wire", truth, NA)
  plan <- plan_coding(x, first, budget = 40, strata = group, seed = 2)
  expect_s3_class(plan$design, "newrllama_coding_design")
  expect_equal(plan$design$kind, "stratified")
  expect_output(print(plan$design), "random sample within 2 strata")
  codes <- first
  codes[plan$texts] <- truth[plan$texts]
  expect_equal(sum(group[!is.na(codes)] == "paper"), sum(!is.na(codes)) / 2)
  out <- prevalence(x, codes, design = plan$design)
  design <- coding_design("stratified", strata = group)
  py <- py_newrllama()$prevalence(
    lapply(seq_len(n), function(i) py_newrllama()$Annotation(predicted[[i]], as.list(probs[i, ]))),
    lapply(codes, function(v) if (is.na(v)) NULL else v), design = design$py)$share("earnings")
  row <- out[out$label == "earnings", ]
  expect_equal(c(row$estimate, row$conf.low, row$conf.high), c(py$estimate, py$lower, py$upper))
  expect_match(methods_text(x, codes, design = plan$design), "drawn at random within 2 strata")
})

test_that("picked texts are refused for estimates, with the reason, in R's condition", {
  picked <- coding_design("picked", how = "as the least confident labels")
  codes <- ifelse(seq_along(truth) %in% least_confident(x, 30), truth, NA)
  expect_error(prevalence(x, codes, design = picked), "picked .*calibrate", class = "newrllama_invalid_argument")
  expect_match(methods_text(x, codes, design = picked), "used for calibration only")
  expect_error(coding_design("picked"), "says how", class = "newrllama_invalid_argument")
  expect_error(coding_design("stratified", strata = c("a", NA)), "missing", class = "newrllama_invalid_argument")
  expect_error(prevalence(x, coded, design = "random"), "coding_design", class = "newrllama_invalid_argument")
  finite <- prevalence(x, coded)
  published <- prevalence(x, coded, design = coding_design(finite = FALSE))
  expect_true(all(finite$conf.high - finite$conf.low < published$conf.high - published$conf.low))
})

test_that("validation and shares draw with ggplot2 and sum up with generics' tidy() and glance()", {
  skip_if_not_installed("ggplot2")
  skip_if_not_installed("generics")
  probs <- t(vapply(predicted, function(l) {
    p <- stats::setNames(rep(0.1, length(labels)), labels)
    p[[l]] <- 1 - 0.1 * (length(labels) - 1)
    p
  }, numeric(length(labels))))
  v <- validate_labels(predicted, truth, probs = probs)
  for (type in c("reliability", "confusion")) {
    plot <- ggplot2::autoplot(v, type = type)
    expect_s3_class(plot, "ggplot")
    expect_gt(nrow(ggplot2::layer_data(plot)), 0)
  }
  expect_error(ggplot2::autoplot(validate_labels(predicted, truth)), "needs the probabilities",
               class = "newrllama_invalid_argument")
  shares <- prevalence(x, coded, by = group)
  expect_s3_class(shares, c("newrllama_prevalence", "tbl_df"))
  plot <- ggplot2::autoplot(shares)
  built <- ggplot2::ggplot_build(plot)
  # three intervals (naive, coded only, PPI++) for each label in each of the two groups
  expect_equal(nrow(built$data[[1]]), 3 * length(labels) * 2)
  expect_equal(generics::tidy(v), v$per_label)
  g <- generics::glance(v)
  expect_equal(c(g$accuracy, g$kappa, g$n), c(v$accuracy, v$kappa, v$n))
})

test_that("coefficients draw with ggplot2, and every result sums up with summary(), tidy() and glance()", {
  skip_if_not_installed("ggplot2")
  skip_if_not_installed("generics")
  d <- data.frame(year = rep(1:4, length.out = n), wire = as.numeric(group == "wire"))
  d$crude <- ifelse(is.na(coded), NA, as.numeric(coded == "crude oil"))
  d$p_crude <- probs[, "crude oil"]
  fit <- regression(crude ~ year + wire, d, p_crude)
  expect_s3_class(fit, c("newrllama_regression", "tbl_df"))
  built <- ggplot2::ggplot_build(ggplot2::autoplot(fit))
  ranges <- built$data[[2]] # the zero line first, then the intervals
  # two intervals (coded only, PPI++) per term, at the estimates regression() gave
  expect_equal(nrow(ranges), 2 * 3)
  expect_setequal(ranges$x, c(fit$estimate, fit$classical))
  expect_setequal(ranges$xmax, c(fit$conf.high, fit$classical.conf.high))

  s <- summary(fit)
  expect_s3_class(s, "newrllama_summary")
  expect_equal(s$overall$n_coded, n / 3)
  expect_equal(s$table$conf.low, fit$conf.low)
  expect_output(print(s), "Coefficients from the model's codes and 80 coded texts of 240")
  expect_equal(generics::tidy(fit)$estimate, fit$estimate)
  expect_equal(generics::glance(fit)$lambda, fit$lambda[[1]])

  shares <- prevalence(x, coded)
  expect_equal(summary(shares)$table$estimate, shares$estimate)
  expect_equal(generics::glance(shares)$n, n)
  expect_output(print(summary(shares)), "Shares from the model's labels and 80 coded texts of 240")

  v <- validate_labels(predicted, truth)
  expect_equal(summary(v)$overall$kappa, v$kappa)
  expect_equal(summary(v)$table, v$per_label)
  expect_output(print(summary(v)), "Labels against human codes \\(240 texts\\)")

  plan <- plan_coding(x, coded, target_width = 0.1)
  expect_equal(summary(plan)$overall$n_more, plan$n_more)
  expect_equal(generics::tidy(plan)$expected_width, unname(plan$expected_widths[labels]))
  expect_equal(generics::tidy(plan)$label, labels)
  expect_output(print(summary(plan)), sprintf("code %d more of 240", plan$n_more))
})

test_that("regression() takes a stratified design and drawn probabilities, as Python weights them", {
  d <- data.frame(year = rep(1:4, length.out = n), wire = as.numeric(group == "wire"))
  d$crude <- ifelse(is.na(coded), NA, as.numeric(coded == "crude oil"))
  d$p_crude <- probs[, "crude oil"]
  stratified <- regression(crude ~ year, d, p_crude, design = coding_design("stratified", strata = group))
  py <- py_newrllama()$regression(Map(list, d$year), as.list(d$crude), d$p_crude, names = list("year"),
                                  design = py_newrllama()$CodingDesign$stratified(as.list(group)))
  expect_equal(stratified$estimate[2], py$coefficient("year")$estimate)
  expect_equal(stratified$conf.low[2], py$coefficient("year")$lower)
  pi <- ifelse(group == "wire", 0.5, 0.2)
  weighted <- regression(crude ~ year, d, p_crude, design = coding_design("probabilities", inclusion_probs = pi))
  simple <- regression(crude ~ year, d, p_crude)
  expect_false(isTRUE(all.equal(weighted$estimate, simple$estimate)))
  expect_error(regression(crude ~ year, d, p_crude, design = coding_design("picked", how = "by hand")), "picked",
               class = "newrllama_invalid_argument")
})

test_that("texts without a label are left out of an estimate with a classed warning, and the paragraph says so", {
  short <- x
  short$.label[c(2, 3, 5)] <- NA
  short$.probs[c(2, 3, 5)] <- list(NULL)
  short$.error <- ifelse(seq_len(n) %in% c(2, 3, 5), "text too long for a sequence", NA)
  expect_warning(out <- prevalence(short, coded), "3 of 240 texts have no label and are left out .*1 of them coded",
                 class = "newrllama_failed_texts")
  expect_true(all(out$n == n - 3))
  expect_warning(mean_score(short, coded, c(acquisition = 1, `crude oil` = 2, earnings = 3)),
                 class = "newrllama_failed_texts")
  expect_match(methods_text(short, coded), "The other 3 \\(3 text too long for a sequence\\) are in none of the estimates")
})

test_that("methods_text() reports the whole study: agreement with the coders, groups and the regression", {
  d <- data.frame(wire = group, crude = ifelse(is.na(coded), NA, as.numeric(coded == "crude oil")),
                  p_crude = probs[, "crude oil"])
  fit <- regression(crude ~ wire, d, p_crude)
  text <- methods_text(x, coded, by = group, regression = fit)
  expect_match(text, "On the 80 coded texts the model's labels matched the human codes for")
  shares <- prevalence(x, coded, by = group)
  paper <- shares[shares$estimand == "share" & shares$group %in% "paper" & shares$label == "earnings", ]
  expect_match(text, sprintf("paper: acquisition [0-9.]+ \\[[0-9., ]+\\], crude oil [0-9.]+ \\[[0-9., ]+\\], earnings %.3f",
                             paper$estimate))
  expect_match(text, "Differences from group paper")
  expect_match(text, sprintf("wirewire %.3f \\[%.3f, %.3f\\]", fit$estimate[2], fit$conf.low[2], fit$conf.high[2]))
  expect_match(text, "Unlike the shares, which are of these texts, the coefficients are of the process")
  expect_error(methods_text(x, coded, regression = shares), "must be a result of regression", class = "newrllama_invalid_argument")
})
