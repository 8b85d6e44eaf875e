#' Label shares with valid intervals from model labels and a coded sample
#'
#' Each label's share of the texts (overall, or within each group of `by`),
#' estimated by prediction-powered inference (PPI++): the model's predictions
#' on every text, corrected by its errors on the texts coded by hand. The
#' interval is valid whatever the model's errors, provided the coded texts are
#' a random sample (of each group) coded without looking at the model's
#' labels; it is narrower than the coded texts' own interval when the model's
#' predictions track the codes. The figures come from the Python library
#' (`newrllama.prevalence`), which agrees with the authors' `ppi-python`.
#'
#' @param x A data frame from [llm_annotate()].
#' @param truth The human codes (`NA` where the text was not coded): a column
#'   of `x` (bare or a string), or a vector with one element per text.
#' @param by Optional groups: a column of `x`, or a vector with one element
#'   per text.
#' @param alpha The intervals' level is `1 - alpha`.
#' @param predictions `"probs"` (each label's probability: narrower intervals
#'   when the probabilities carry information; calibrated on these same coded
#'   texts, use [cross_fit()]) or `"labels"` (the model's labels alone).
#' @param reference The group the others are compared with (the first in
#'   sorted order when `NULL`).
#' @param inclusion_probs When the coded texts were drawn one by one with
#'   known probabilities (an active plan: `plan_coding(active =
#'   TRUE)$inclusion_probs`), each text's probability of being coded: the
#'   coded texts are then weighted by 1 / probability and the intervals are
#'   design-based (about these texts).
#' @param design How the coded texts were drawn, from [coding_design()],
#'   `plan_coding()$design` or [read_coding_design()]: `NULL` is a simple random
#'   sample, each share estimated among these texts (the coded share of them
#'   narrows the interval), and a warning of class
#'   `newrllama_unlike_random_sample` says when the coded texts do not look like
#'   one (the model's confidence or labels on them unlike on the others, beyond
#'   what a random sample shows once in 1,000 times), as texts from
#'   [least_confident()] do not. A stratified design is estimated stratum by
#'   stratum, each weighted by its share of the texts; picked texts are refused.
#' @param label The column of labels in `x`; its companions are read beside
#'   it as [llm_annotate()] names them (`.probs`, or `<question>.probs` beside
#'   `<question>.label`).
#' @return A tibble, one row per label (and group) with `estimand =
#'   "share"`, then with `by` one row per label and other group with `estimand =
#'   "difference"` (the group's share minus the `reference` group's): `label`,
#'   `group`, `reference`, `estimate`, `std.error`, `conf.low`, `conf.high`
#'   (PPI++), `lambda` (the weight given to the predictions, 0 = the coded texts
#'   alone), `naive`, `naive.low`, `naive.high` (the share of the model's labels,
#'   with an interval that ignores its errors: for comparison only),
#'   `classical`, `classical.std.error`, `classical.conf.low`,
#'   `classical.conf.high` (the coded texts alone), `n_coded` and `n` (texts).
#'   Its class `newrllama_prevalence` (a tibble still) gives it an
#'   `autoplot()` of the three intervals side by side ([newrllama_autoplot]).
#'   Texts without a label (`.label` `NA`: too long for the context, say) are
#'   left out, and a warning of class `newrllama_failed_texts` says so: the
#'   shares are then of the labelled texts alone.
#' @seealso [regression()] for coefficients, [validate_labels()], [calibrate_labels()].
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.", "Chevron bought Gulf.",
#'            "Oil prices fell again.", "Mobil acquired Superior Oil.")
#' x <- llm_annotate(data.frame(text = texts), text, c("acquisition", "crude oil"), progress = FALSE)
#' prevalence(x, c("acquisition", "crude oil", "acquisition", NA, NA))
#' @export
prevalence <- function(x, truth, by = NULL, alpha = 0.05, predictions = c("probs", "labels"), reference = NULL,
                       inclusion_probs = NULL, design = NULL, label = ".label") {
  parts <- annotation_parts(x, label)
  truth <- check_labels(column_or_values(x, substitute(truth), parent.frame(), "truth"), "truth")
  by <- column_or_values(x, substitute(by), parent.frame(), "by")
  if (!is.null(by)) by <- check_labels(by, "by")
  predictions <- match.arg(predictions, c("probs", "labels"))
  alpha <- check_number(alpha, "alpha")
  if (!is.null(reference)) reference <- check_labels(reference, "reference")
  out <- with_python(python_helpers()$prevalence(
    parts, na_to_none(as.character(truth)), by = if (is.null(by)) NULL else na_to_none(by), alpha = alpha,
    predictions = predictions, reference = if (is.null(reference)) NULL else reference[[1]],
    inclusion_probs = if (is.null(inclusion_probs)) NULL else as.list(inclusion_probs), design = python_design(design)
  ))
  for (message in unlist(out[[2]])) warn_unlike_random(message)
  for (message in unlist(out[[3]])) warn_failed_texts(message)
  tibble::new_tibble(columns_frame(out[[1]]), class = "newrllama_prevalence")
}

# A column of a data frame named by a bare name or a string.
column_of <- function(data, expr, what, call = sys.call(-1)) {
  name <- if (is.character(expr) && length(expr) == 1) expr else if (is.name(expr)) as.character(expr) else NULL
  if (is.null(name) || !name %in% names(data)) {
    abort_invalid(sprintf("`%s` must name a column of the data (a bare name or a string)", what), call = call)
  }
  data[[name]]
}

# A matrix as a list of its rows (reticulate 1.28 cannot hand a matrix to NumPy 2).
matrix_rows <- function(x) {
  lapply(seq_len(nrow(x)), function(i) as.list(unname(x[i, ])))
}

# Python's columns (lists with None where a row has no value) as a tibble with NA there.
columns_frame <- function(cols) {
  tibble::as_tibble(lapply(cols, function(col) {
    values <- lapply(col, function(v) if (is.null(v)) NA else v)
    unlist(values)
  }))
}

#' Regression coefficients with valid intervals when the model codes the outcome or a regressor
#'
#' Least squares or logistic regression in which the model codes the
#' outcome, a regressor, or both for every text and a random sample of the
#' texts is coded by hand (for a label: 1 if the text has it, 0 if not, and
#' its probability from [llm_vec_annotate()]). PPI++ (power-tuned, as
#' `ppi-python`'s `ppi_ols_ci` and `ppi_logistic_ci` when only the outcome is
#' model-coded; PPI++'s M-estimation when a regressor is) gives each
#' coefficient an interval that is valid whatever the model's errors; beside
#' it, the fit on the coded texts alone with sandwich standard errors.
#'
#' @param formula A formula, `outcome ~ regressors`, as for [stats::lm()]. A
#'   model-coded variable's column holds the human codes (numbers or
#'   `TRUE`/`FALSE`), `NA` where the text was not coded.
#' @param data A data frame with one row per text.
#' @param predicted The name (bare or a string) of the column of `data`
#'   holding the model's prediction of the outcome for every text; `NULL` when
#'   the outcome is known for every text and only regressors are model-coded.
#' @param predicted_regressors A named character vector: for each model-coded
#'   regressor of the formula (its name), the column of `data` holding the
#'   model's value of it for every text, e.g. `c(oil = "p_oil")`. A text must be
#'   coded for every model-coded variable or for none.
#' @param family `"gaussian"` (least squares) or `"binomial"` (logistic: the
#'   outcome 0/1 or `TRUE`/`FALSE`, the prediction a probability).
#' @param alpha The intervals' level is `1 - alpha`.
#' @param design How the coded texts were drawn ([coding_design()]): `NULL`
#'   is a simple random sample; for a stratified sample, or texts drawn with
#'   known probabilities, each coded text is weighted by the inverse of its
#'   probability of being coded, in the estimate and in a design-based
#'   interval; picked texts are refused.
#' @return A tibble, one row per coefficient: `term`, `estimate`,
#'   `std.error`, `conf.low`, `conf.high` (PPI++), `classical`,
#'   `classical.std.error`, `classical.conf.low`, `classical.conf.high` (coded
#'   texts alone), `lambda` (the weight given to the predictions), `n_coded`,
#'   `n`.
#' @seealso [prevalence()].
#' @examplesIf newrllama::newrllama_available()
#' set.seed(1)
#' d <- data.frame(year = rep(1:4, 10), p = runif(40))
#' d$coded <- ifelse(seq_len(40) %% 3 == 0, as.numeric(d$p > 0.5), NA)
#' regression(coded ~ year, d, p)
#' # The model codes a regressor: does a story about oil run longer?
#' d$words <- 100 + 30 * (d$p > 0.5) + rnorm(40, sd = 10)
#' regression(words ~ coded, d, predicted_regressors = c(coded = "p"))
#' @export
regression <- function(formula, data, predicted = NULL, predicted_regressors = NULL,
                       family = c("gaussian", "binomial"), alpha = 0.05, design = NULL) {
  if (!inherits(formula, "formula") || length(formula) != 3) {
    abort_invalid("`formula` must be a two-sided formula, outcome ~ regressors")
  }
  if (!is.data.frame(data)) {
    abort_invalid(sprintf("`data` must be a data frame, not %s", describe(data)))
  }
  expr <- if (missing(predicted)) NULL else substitute(predicted)
  predicted <- if (is.null(expr)) NULL else numeric_values(column_of(data, expr, "predicted"), "`predicted`")
  family <- match.arg(family)
  alpha <- check_number(alpha, "alpha")
  coded_data <- model_coded_as_numbers(data, predicted_regressors, formula)
  frame <- stats::model.frame(formula, coded_data, na.action = stats::na.pass)
  outcome <- numeric_values(stats::model.response(frame), "the outcome")
  x <- stats::model.matrix(formula, frame)
  x_predicted <- NULL
  if (length(predicted_regressors) > 0) {
    predicted_data <- coded_data
    for (v in names(predicted_regressors)) {
      predicted_data[[v]] <- numeric_values(data[[predicted_regressors[[v]]]], sprintf("column `%s`", predicted_regressors[[v]]))
    }
    x_predicted <- matrix_rows(stats::model.matrix(formula, stats::model.frame(formula, predicted_data,
                                                                               na.action = stats::na.pass)))
  }
  cols <- with_python(python_helpers()$regression(matrix_rows(x), as.list(colnames(x)),
                                                  as.list(unname(outcome)),
                                                  if (is.null(predicted)) NULL else as.list(unname(predicted)),
                                                  x_predicted, family, alpha, python_design(design)))
  tibble::new_tibble(columns_frame(cols), class = "newrllama_regression")
}

# Numbers from numbers or TRUE/FALSE; anything else is the caller's mistake.
numeric_values <- function(values, what, call = sys.call(-1)) {
  if (is.logical(values)) values <- as.numeric(values)
  if (!is.numeric(values)) {
    abort_invalid(sprintf("%s must hold numbers or TRUE/FALSE (for a label: 1 if the text has it, 0 if not), not %s",
                          what, describe(values)), call = call)
  }
  as.numeric(values)
}

# The data with each model-coded regressor's human codes as numbers, after checking that
# predicted_regressors names regressors of the formula and columns of the data.
model_coded_as_numbers <- function(data, predicted_regressors, formula, call = sys.call(-1)) {
  if (is.null(predicted_regressors)) return(data)
  regressors <- all.vars(formula[[3]])
  if (!is.character(predicted_regressors) || is.null(names(predicted_regressors)) ||
      any(names(predicted_regressors) == "")) {
    abort_invalid("`predicted_regressors` must be a named character vector: regressor = column of its predictions",
                  call = call)
  }
  unknown <- setdiff(names(predicted_regressors), regressors)
  if (length(unknown)) {
    abort_invalid(sprintf("`predicted_regressors` names %s, not a regressor of the formula (%s)",
                          paste0("`", unknown, "`", collapse = ", "), paste(regressors, collapse = ", ")), call = call)
  }
  missing_columns <- setdiff(unname(predicted_regressors), names(data))
  if (length(missing_columns)) {
    abort_invalid(sprintf("`predicted_regressors` refers to %s, not a column of the data",
                          paste0("`", missing_columns, "`", collapse = ", ")), call = call)
  }
  for (v in names(predicted_regressors)) {
    data[[v]] <- numeric_values(data[[v]], sprintf("the model-coded regressor `%s`", v), call = call)
  }
  data
}

#' How many more texts to code, and which
#'
#' From the texts coded so far (a random sample), the number of further
#' texts to code so that every label's interval from [prevalence()] is at most
#' `target_width` wide, and a uniform random draw of that many uncoded texts to
#' code next (the coded texts stay a random sample, so the intervals stay
#' valid).
#'
#' @inheritParams prevalence
#' @param target_width The widest interval wanted, a share in (0, 1).
#' @param budget Instead of `target_width`: how many texts to code.
#' @param seed The draw's seed.
#' @param active Draw the texts one by one with probabilities that favour
#'   those the model is least sure of (`n_more` is then the expected number),
#'   and give every text's probability of being coded (`inclusion_probs`, for
#'   [prevalence()]).
#' @param strata One stratum per text (a column of `x` or a vector): the texts
#'   are drawn at random within each stratum, towards each stratum's share of
#'   the texts.
#' @return A `newrllama_coding_plan` (a list, printed as a summary):
#'   `n_more`, `texts` (positions in `x`), `widths` and `expected_widths`
#'   (per label, now and after coding them), `reachable` (`FALSE` when no
#'   number of coded texts reaches the target: `texts` is then every uncoded
#'   text), `n_coded`, `n`, `design` (the coded sample's
#'   [coding_design()] once these texts are coded, for [prevalence()] and
#'   [methods_text()]), and for an active plan `inclusion_probs`.
#' @seealso [write_coding_sheet()] to hand the texts to a coder.
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.", "Chevron bought Gulf.",
#'            "Oil prices fell again.", "Mobil acquired Superior Oil.")
#' x <- llm_annotate(data.frame(text = texts), text, c("acquisition", "crude oil"), progress = FALSE)
#' plan_coding(x, c("acquisition", "crude oil", "acquisition", NA, NA), target_width = 0.5)
#' @export
plan_coding <- function(x, truth, target_width = NULL, budget = NULL, alpha = 0.05,
                        predictions = c("probs", "labels"), seed = 0L, active = FALSE, strata = NULL,
                        label = ".label") {
  parts <- annotation_parts(x, label)
  truth <- check_labels(column_or_values(x, substitute(truth), parent.frame(), "truth"), "truth")
  predictions <- match.arg(predictions)
  if (!is.null(target_width)) target_width <- check_number(target_width, "target_width")
  if (!is.null(budget)) budget <- check_count(budget, "budget")
  alpha <- check_number(alpha, "alpha")
  seed <- check_count(seed, "seed")
  active <- check_flag(active, "active")
  strata <- column_or_values(x, substitute(strata), parent.frame(), "strata")
  if (!is.null(strata)) strata <- na_to_none(check_labels(strata, "strata"))
  plan <- with_python(python_helpers()$plan_coding(parts, na_to_none(as.character(truth)), target_width,
                                                   budget = budget, alpha = alpha, predictions = predictions,
                                                   seed = seed, active = active, strata = strata))
  out <- list(n_more = plan$n_more, texts = as.integer(unlist(plan$texts)) + 1L, widths = unlist(plan$widths),
              expected_widths = unlist(plan$expected_widths), reachable = plan$reachable, n_coded = plan$n_coded,
              n = plan$n_texts, design = new_coding_design(plan$design))
  if (active) out$inclusion_probs <- unlist(plan$inclusion_probs)
  structure(out, class = "newrllama_coding_plan")
}

#' @export
print.newrllama_coding_plan <- function(x, ...) {
  cat(sprintf("<newrllama_coding_plan> code %d more of %d texts (%d coded now)%s\n", x$n_more, x$n, x$n_coded,
              if (isTRUE(x$reachable)) "" else ": the target width is out of reach, so every uncoded text"))
  widths <- sprintf("%s %.3f -> %.3f", names(x$widths), x$widths, x$expected_widths[names(x$widths)])
  cat("  interval widths now -> expected:", paste(widths, collapse = "; "), "\n")
  cat("  texts:", utils::head(x$texts, 10), if (length(x$texts) > 10) "...", "\n")
  print(x$design)
  invisible(x)
}

#' Coding sheets: texts to code by hand, and their codes read back
#'
#' `write_coding_sheet()` writes the texts to code (for example
#' `plan_coding()$texts`) to a CSV file, or an Excel workbook when `path` ends
#' in `.xlsx` (with the openxlsx package), with the columns `id`, `text` and an
#' empty `code`; `read_coding_sheet()` reads the filled-in sheet back as one
#' code per text, refusing codes that are not labels and ids it does not know.
#'
#' @param x The texts (a character vector; its names are the ids, else the
#'   positions).
#' @param which Positions in `x` of the texts to write.
#' @param path The sheet's file: `.csv`, or `.xlsx` for a workbook.
#' @param labels The labels a code may be.
#' @param coders Names of several coders: every text goes to each of them,
#'   coder by coder, in a `coder` column (one call per coder gives each a sheet
#'   of their own); [read_codings()] reads such sheets back.
#' @param design How the texts to code were drawn ([coding_design()], for
#'   example `plan_coding()$design`), written beside the sheet as
#'   `<sheet>.design.json`; `read_coding_design()` gives it back for the
#'   estimates ([prevalence()], [regression()], [methods_text()]). Positions
#'   from [least_confident()] are written as picked when no design is given.
#' @return `write_coding_sheet()`: `path`, invisibly. `read_coding_sheet()`: a
#'   character vector of codes, one per text of `x` (`NA` where the sheet has
#'   none), to use as `truth`. `read_coding_design()`: the design written
#'   beside the sheet, for the texts of `x` (in any order).
#' @examplesIf newrllama::newrllama_available()
#' texts <- c(s1 = "Texaco agreed to buy Getty Oil.", s2 = "OPEC cut its crude output.")
#' path <- tempfile(fileext = ".csv")
#' write_coding_sheet(texts, 2, path)
#' read_coding_sheet(path, texts, c("acquisition", "crude oil"))
#' @export
write_coding_sheet <- function(x, which, path, coders = NULL, design = NULL) {
  x <- check_sheet_texts(x)
  path <- check_string(path, "path")
  if (!is.null(design)) {
    with_python(python_helpers()$write_coding_design(path, python_design(design), as.list(sheet_ids(x))))
  }
  if (!is.numeric(which) || anyNA(which) || any(which != round(which))) {
    abort_invalid(sprintf("`which` must be positions in `x`, not %s", describe(which)))
  }
  csv <- if (is_xlsx(path)) tempfile(fileext = ".csv") else path
  with_python(python_helpers()$write_coding_sheet(as.list(unname(x)), as.list(as.integer(which) - 1L), csv,
                                                  ids = as.list(sheet_ids(x)),
                                                  coders = if (is.null(coders)) NULL else as.list(coders),
                                                  picked = is.null(design) && inherits(which, "newrllama_picked")))
  if (is_xlsx(path)) {
    on.exit(unlink(csv))
    sheet <- utils::read.csv(csv, colClasses = "character", encoding = "UTF-8")
    sheet$code <- NA_character_  # an empty cell, not an empty string, for the coder to fill
    openxlsx::write.xlsx(sheet, path, sheetName = "to code", overwrite = TRUE)
  }
  invisible(path)
}

#' @rdname write_coding_sheet
#' @export
read_coding_design <- function(path, x) {
  x <- check_sheet_texts(x)
  path <- check_string(path, "path")
  new_coding_design(with_python(python_helpers()$read_coding_design(path, as.list(sheet_ids(x)))))
}

#' @rdname write_coding_sheet
#' @export
read_coding_sheet <- function(path, x, labels) {
  x <- check_sheet_texts(x)
  path <- check_string(path, "path")
  labels <- check_labels(labels, "labels")
  csv <- sheet_as_csv(path)
  on.exit(if (csv != path) unlink(dirname(csv), recursive = TRUE))
  codes <- with_python(python_helpers()$read_coding_sheet(csv, as.list(sheet_ids(x)), as.list(as.character(labels))))
  stats::setNames(vapply(codes, function(code) if (is.null(code)) NA_character_ else code, character(1)), names(x))
}

# A sheet as a CSV file Python reads: the path itself, or a workbook's first sheet written to a CSV file of the same
# name in a directory of its own (the name names the coder of a sheet without a coder column).
sheet_as_csv <- function(path, call = sys.call(-1)) {
  if (!is_xlsx(path)) {
    return(path)
  }
  if (!file.exists(path)) abort_invalid(sprintf("cannot read the coding sheet %s: no such file", path), call = call)
  dir <- tempfile("sheet")
  dir.create(dir)
  csv <- file.path(dir, sub("[.]xlsx$", ".csv", basename(path), ignore.case = TRUE))
  sheet <- openxlsx::read.xlsx(path, sheet = 1, colNames = TRUE, skipEmptyRows = FALSE, na.strings = character())
  utils::write.csv(sheet, csv, row.names = FALSE, na = "", fileEncoding = "UTF-8")
  csv
}

# A workbook's sheet goes through a CSV, so that Python alone checks it.
is_xlsx <- function(path) {
  if (!grepl("[.]xlsx$", path, ignore.case = TRUE)) return(FALSE)
  if (!requireNamespace("openxlsx", quietly = TRUE)) {
    abort_invalid("an .xlsx coding sheet needs the openxlsx package (Debian: r-cran-openxlsx); or use a .csv path",
                  call = sys.call(-2))
  }
  TRUE
}

check_sheet_texts <- function(x, call = sys.call(-1)) {
  if (!is.character(x)) {
    abort_invalid(sprintf("`x` must be the texts, a character vector, not %s", describe(x)), call = call)
  }
  x
}

# The ids a sheet names the texts by: their names, else their positions (from 1).
sheet_ids <- function(x) {
  if (is.null(names(x))) as.character(seq_along(x)) else names(x)
}

#' A paragraph for a methods section
#'
#' What labelled the texts and how, in words a methods section can cite: the
#' model file and its SHA-256, the prompt (instruction, labels, examples, its
#' digest), how the labels' listing order was taken out of the scores, the
#' determinism held, how often the label changed with the order, the
#' calibration and its cross-validated figures, and with `truth` the coded
#' sample and each label's share estimated by PPI++ with its interval.
#'
#' @param x A data frame from [llm_annotate()] (calibrated or not).
#' @param truth Optional human codes, `NA` where a text was not coded.
#' @inheritParams prevalence
#' @param calibration Optional: the calibration from [calibrate_labels()] applied to
#'   `x`.
#' @param alpha The intervals' level is `1 - alpha`.
#' @param coding Several coders' codes made one by [adjudicate()]: the paragraph
#'   reports the coders, their agreement and the rule, and `truth` defaults to
#'   the adjudicated codes.
#' @param robustness A result of [robustness()]: the paragraph says what was
#'   varied and whether the finding held.
#' @param by Optional groups (a column of `x` or a vector, as [prevalence()]
#'   takes them): each group's shares and each group's difference from the
#'   first.
#' @param regression A result of [regression()]: its coefficients with their
#'   intervals, said to be of the process the texts come from (the shares are
#'   of these texts, with the default design).
#' @return A string. With `truth` it also gives the model's agreement with the
#'   coders on the coded texts (accuracy and Cohen's kappa).
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' texts <- c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.", "Chevron bought Gulf.")
#' x <- llm_annotate(data.frame(text = texts), text, c("acquisition", "crude oil"), progress = FALSE)
#' cat(methods_text(x, c("acquisition", "crude oil", NA)))
#' @export
methods_text <- function(x, truth = NULL, calibration = NULL, alpha = 0.05, design = NULL, coding = NULL,
                         label = ".label", robustness = NULL, by = NULL, regression = NULL) {
  parts <- annotation_parts(x, label)
  truth <- column_or_values(x, substitute(truth), parent.frame(), "truth")
  if (!is.null(truth)) truth <- na_to_none(as.character(check_labels(truth, "truth")))
  by <- column_or_values(x, substitute(by), parent.frame(), "by")
  if (!is.null(by)) by <- na_to_none(check_labels(by, "by"))
  if (!is.null(regression) && !inherits(regression, "newrllama_regression")) {
    abort_invalid(sprintf("`regression` must be a result of regression(), not %s", describe(regression)))
  }
  cal <- if (is.null(calibration)) NULL else check_calibration(calibration)$py
  alpha <- check_number(alpha, "alpha")
  out <- with_python(python_helpers()$methods_text(parts, truth, python_robustness_rows(robustness),
                                                   if (is.null(regression)) NULL else lapply(regression, as.list),
                                                   calibration = cal, alpha = alpha, design = python_design(design),
                                                   coding = python_adjudication(coding), by = by))
  for (message in unlist(out[[2]])) warn_unlike_random(message)
  out[[1]]
}
