## ----setup, include = FALSE---------------------------------------------------
ready <- newrllama::newrllama_available() && requireNamespace("tm", quietly = TRUE)
knitr::opts_chunk$set(eval = ready, comment = "#>")

## ----stories------------------------------------------------------------------
library(newrllama)
data("acq", package = "tm")
data("crude", package = "tm")
story <- function(doc) substr(paste(doc$content, collapse = " "), 1, 600)
stories <- data.frame(
  text = c(vapply(acq$content[1:10], story, ""), vapply(crude$content[1:10], story, "")),
  truth = rep(c("acquisition", "crude oil"), each = 10)
)
nrow(stories)

## ----model--------------------------------------------------------------------
recommended_models()[, c("name", "size", "licence")]
model <- model_load("qwen2.5-coder-0.5b-instruct")
ctx <- context_create(model, n_ctx = 8192, n_seq_max = 8)
ctx

## ----annotate-----------------------------------------------------------------
codebook <- c("acquisition" = "mainly about a company buying, merging with or taking a stake in another",
              "crude oil" = "mainly about oil prices, oil production or the oil industry")
instruction <- "You are coding Reuters news stories for a content analysis. Decide the topic of the story."
coded <- llm_annotate(stories, text, codebook, instruction, context = ctx, progress = FALSE)
head(coded[, c("truth", ".label", ".prob")])

## ----validate-----------------------------------------------------------------
v <- validate_labels(coded, truth)
v

## ----resume-------------------------------------------------------------------
out <- tempfile(fileext = ".jsonl")
first <- llm_annotate(stories[1:8, ], text, codebook, instruction, context = ctx, output = out, progress = FALSE)
all <- llm_annotate(stories, text, codebook, instruction, context = ctx, output = out, resume = TRUE,
                    progress = FALSE)
length(readLines(out))

## ----findings-----------------------------------------------------------------
texts <- stats::setNames(stories$text, paste0("story", seq_len(nrow(stories))))
length_of <- function(doc) nchar(paste(doc$content, collapse = " "))
full_length <- c(vapply(acq$content[1:10], length_of, 1), vapply(crude$content[1:10], length_of, 1))
size <- ifelse(full_length > stats::median(full_length), "long", "short")
set.seed(4)
drawn <- unlist(lapply(split(seq_along(size), size), sample, 5))
sheet <- tempfile(fileext = ".csv")
write_coding_sheet(texts, drawn, sheet, coders = c("ana", "ben"),
                   design = coding_design("stratified", strata = size))
# The coders fill in the `code` column; the stories' own human codes stand in for them here, with one
# disagreement.
filled <- read.csv(sheet, colClasses = "character")
filled$code <- stories$truth[match(filled$id, names(texts))]
first_ben <- which(filled$coder == "ben")[1]
filled$code[first_ben] <- setdiff(names(codebook), filled$code[first_ben])
write.csv(filled, sheet, row.names = FALSE)
codings <- read_codings(sheet, texts, names(codebook))
coder_agreement(codings)
third <- ifelse(seq_along(texts) %in% drawn, stories$truth, NA)  # a third coder, for the disagreements
adjudicated <- adjudicate(codings, tiebreak = third)
adjudicated
human <- adjudicated$truth
design <- read_coding_design(sheet, texts)
all$human <- human
all$size <- size
shares <- prevalence(all, human, by = size, design = design)
shares[, c("estimand", "label", "group", "estimate", "conf.low", "conf.high", "naive", "classical")]

## ----regression---------------------------------------------------------------
d <- data.frame(log_length = log(full_length), oil = human == "crude oil",
                p_oil = vapply(all$.probs, `[[`, 1, "crude oil"))
fit <- regression(log_length ~ oil, d, predicted_regressors = c(oil = "p_oil"), design = design)
fit

## ----plan---------------------------------------------------------------------
plan <- plan_coding(all, human, target_width = 0.45, strata = size)
plan[c("n_more", "reachable", "widths", "expected_widths", "texts")]

## ----robustness---------------------------------------------------------------
crude_share <- function(d) {
  s <- prevalence(d, human, design = design)
  s[s$label == "crude oil", ]
}
checked <- robustness(all, text, codebook,
                      c(instruction, "Read the news story and say which topic it is mainly about."),
                      crude_share, name = "the share of crude-oil stories", null = NULL, debias_variants = "reversed",
                      context = ctx, progress = FALSE)
checked

## ----methods------------------------------------------------------------------
cal <- calibrate_labels(all, human, folds = 3)
cal
cat(strwrap(methods_text(all, human, design = design, coding = adjudicated, robustness = checked, by = size,
                         regression = fit)), sep = "\n")

## ----cluster, eval = ready && reticulate::py_module_available("ray")----------
cl <- cluster_create(workers = 2, model = model$path, threads_per_worker = 1, n_seq_max = 8, n_ctx = 8192)
on_cluster <- llm_vec_annotate(stories$text, codebook, instruction, context = cl, progress = FALSE)
cluster_stop(cl)
identical(unname(on_cluster), coded$.label)

## ----serve, eval = ready && requireNamespace("httr2", quietly = TRUE) && requireNamespace("processx", quietly = TRUE)----
server <- newrllama_serve(model = model$path, n_seq_max = 4, n_ctx = 8192)
answer <- httr2::request(server$base_url) |>
  httr2::req_url_path_append("chat", "completions") |>
  httr2::req_body_json(list(
    model = server$model, max_tokens = 16, temperature = 0,
    messages = list(list(role = "user", content = paste("In one sentence, what is this story about?",
                                                        stories$text[[11]]))))) |>
  httr2::req_perform() |>
  httr2::resp_body_json()
answer$choices[[1]]$message$content
server$stop()

