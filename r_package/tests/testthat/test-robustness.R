skip_if_no_newrllama()

# Plumbing on the embedded model (the Python tests run the same call on the Reuters stories with the instruct
# model): each variant is the labelling it names, the verdict reads the intervals, the methods paragraph cites it.
stories <- data.frame(
  text = c("Texaco agreed to buy Getty Oil for ten billion dollars.", "OPEC ministers agreed to cut crude output.",
           "Chevron will acquire Gulf Oil in a record merger.", "Oil prices fell as Saudi production rose.",
           "Mobil bought a stake in Superior Oil.", "Crude futures rose on supply fears.",
           "The bank took over its smaller rival.", "Refiners paid more for crude this week."),
  truth = c("acquisition", "crude oil", "acquisition", "crude oil", NA, NA, NA, NA)
)
labels <- c("acquisition", "crude oil")
wordings <- c("Give the topic of the news story.", "What is this news story about?")

test_that("robustness() labels again under each variant and judges the finding against the baseline", {
  model <- test_model()
  ctx <- test_context(model, n_ctx = 2048L, n_seq_max = 4L)
  share <- function(d) prevalence(d, truth)[2, ]
  r <- robustness(stories, text, labels, wordings, share, name = "the share of crude oil", null = NULL,
                  context = ctx, progress = FALSE)
  expect_s3_class(r, c("newrllama_robustness", "tbl_df"))
  expect_equal(r$name, c("baseline", "instruction 2", "debias 'reverse' (both listing orders)",
                         "debias 'none', labels listed as given", "debias 'none', labels listed reversed"))
  reversed <- llm_annotate(stories, text, rev(labels), wordings[[1]], context = ctx, debias = "none",
                           progress = FALSE)
  expect_equal(r$estimate[[5]], share(reversed)$estimate)
  expect_equal(r$within_baseline, r$estimate >= r$conf.low[[1]] & r$estimate <= r$conf.high[[1]])
  expect_true(all(is.na(r$same_sign)))
  verdict <- generics::glance(r)
  expect_equal(verdict$variants, 4L)
  expect_equal(verdict$estimate_holds, all(r$within_baseline))
  expect_output(print(r), "the share of crude oil under 4 variants")
  expect_output(print(r[, c("name", "estimate")]), "baseline") # a subset prints as the tibble it is
  if (requireNamespace("ggplot2", quietly = TRUE)) {
    built <- ggplot2::ggplot_build(ggplot2::autoplot(r))
    expect_equal(nrow(built$data[[2]]), 5)
  }
  base <- llm_annotate(stories, text, labels, wordings[[1]], context = ctx, progress = FALSE)
  text <- methods_text(base, truth, robustness = r)
  expect_match(text, "labelled again under 4 variants, one choice at a time \\(debias, instruction, listing order\\)")

  expect_error(robustness(stories, text, labels, wordings, function(d) 0.5, context = ctx,
                          debias_variants = character(), progress = FALSE),
               "must give one row with estimate, conf.low and conf.high", class = "newrllama_invalid_argument")
  expect_error(robustness(stories, text, labels, wordings, "share"), "`finding` must be a function",
               class = "newrllama_invalid_argument")
  expect_error(robustness(stories, text, labels, wordings, share, debias_variants = "rotations", context = ctx),
               "debias_variants must be among", class = "newrllama_invalid_argument")
  expect_warning(
    expect_error(robustness(stories, text, labels, wordings, share, cures = "rotations", context = ctx),
                 "debias_variants must be among", class = "newrllama_invalid_argument"),
    class = "newrllama_deprecated"
  )
  expect_error(methods_text(base, truth, robustness = "held"), "must be a result of robustness",
               class = "newrllama_invalid_argument")
})
