#' Does a finding survive the choices that should not matter?
#'
#' Labels the texts again under each choice that should not change a
#' finding, one at a time around the baseline: each further wording of the
#' instruction, each further model, scoring both listing orders of the labels
#' (`debias = "reverse"`), and no debiasing (`debias = "none"`) with the labels
#' listed as given and reversed. Each time `finding` re-estimates the finding from the labelled
#' data with its interval; the result says whether the estimate stays within
#' the baseline's interval, and whether its sign and its significance against
#' `null` hold. [methods_text()] reports it with `robustness =`. Python decides
#' the variants and the verdict (`newrllama.robustness`). Each variant labels
#' every text again: it costs as much as the first labelling, so on a large
#' corpus plan its time with [plan_annotation()].
#'
#' @param .data A data frame with a column of texts.
#' @param col The column of texts: a bare name, a string, or a variable
#'   holding a column's name.
#' @param labels The labels (a character vector, or named: label =
#'   definition).
#' @param instruction The instruction, or several wordings of it (the first is
#'   the baseline's).
#' @param finding A function of the labelled data frame (as [llm_annotate()]
#'   returns it) giving the finding as one row with `estimate`, `conf.low` and
#'   `conf.high`, such as a row of [prevalence()] or [regression()].
#' @param name What the finding is, for the methods paragraph.
#' @param null The value the sign and significance are judged against
#'   (`NULL`: not judged, as for a share).
#' @param models Further models (recommended names or GGUF paths), each a
#'   variant labelled on a context like `context`.
#' @param debias_variants The debias methods and listing orders tried: any of
#'   `"reverse"`, `"as given"` and `"reversed"`.
#' @param debias The baseline's debias method (`NULL`: the default).
#' @param context The baseline's context (`NULL`: the session's, see
#'   [llm_use()]).
#' @param progress Show progress for each labelling.
#' @param ... Further arguments of [llm_annotate()] for every labelling.
#' @param cures The old name of `debias_variants`: still works, with a warning of class `newrllama_deprecated`.
#' @return A tibble of class `newrllama_robustness`, one row per variant (the
#'   baseline first): `name`, `changed`, `estimate`, `conf.low`, `conf.high`,
#'   `within_baseline`, `same_sign`, `same_significance`, `finding`, `null`.
#'   `glance()` gives the verdict; `autoplot()` draws the intervals.
#' @examplesIf newrllama::newrllama_available() && newrllama::recommended_models()$cached[[1]]
#' llm_use("qwen2.5-coder-1.5b-instruct", .silent = TRUE)
#' d <- data.frame(text = c("Texaco agreed to buy Getty Oil.", "OPEC cut its crude output.",
#'                          "Chevron bought Gulf.", "Oil prices fell again."),
#'                 truth = c("acquisition", "crude oil", NA, NA))
#' r <- robustness(d, text, c("acquisition", "crude oil"),
#'                 c("Give the topic of the news story.", "What is this story about?"),
#'                 function(x) prevalence(x, truth)[2, ], null = NULL, debias_variants = "reversed",
#'                 progress = FALSE)
#' r[, c("name", "estimate", "within_baseline")]
#' @export
robustness <- function(.data, col, labels, instruction, finding, name = "the finding", null = 0, models = NULL,
                       debias_variants = c("reverse", "as given", "reversed"), debias = NULL, context = NULL,
                       progress = TRUE, ..., cures = NULL) {
  column <- text_column_name(.data, substitute(col), parent.frame())
  if (!is.function(finding)) {
    abort_invalid("`finding` must be a function of the labelled data frame giving one row with estimate, conf.low and conf.high")
  }
  what <- check_string(name, "name") # not `name` inside tibble(), which would read its own column of that name
  if (!is.null(null)) null <- check_number(null, "null")
  instruction <- as.list(vapply(instruction, check_string, character(1), name = "instruction", USE.NAMES = FALSE))
  models <- as.list(as.character(models))
  if (!is.null(cures)) {
    warn_deprecated("cures", "debias_variants")
    debias_variants <- cures
  }
  debias_variants <- as.list(as.character(debias_variants))
  if (!is.null(debias)) debias <- check_string(debias, "debias")
  runs <- with_python(python_helpers()$robustness_variants(instruction, debias, models, debias_variants))
  base <- session_runner(context)
  estimates <- lapply(runs, function(v) {
    listed <- if (isTRUE(v$reverse_labels)) rev(labels) else labels
    on <- if (is.null(v$model)) base else variant_context(v$model, base)
    labelled <- llm_annotate(.data, column, listed, v$instruction, context = on, debias = v$debias,
                             progress = progress, ...)
    finding_interval(finding(labelled), v$name)
  })
  cols <- with_python(python_helpers()$judge_robustness(what, instruction, debias, models, debias_variants,
                                                          estimates, null))
  cols$sentence <- NULL
  out <- tibble::tibble(name = unlist(cols$name), changed = unlist(cols$changed), estimate = unlist(cols$estimate),
                        conf.low = unlist(cols$lower), conf.high = unlist(cols$upper),
                        within_baseline = unlist(cols$within_baseline),
                        same_sign = vapply(cols$same_sign, function(v) if (is.null(v)) NA else v, logical(1)),
                        same_significance = vapply(cols$same_significance, function(v) if (is.null(v)) NA else v,
                                                   logical(1)),
                        finding = what, null = if (is.null(null)) NA_real_ else null)
  tibble::new_tibble(out, class = "newrllama_robustness")
}

# A context for a model variant, sized as the baseline's context when there is one.
variant_context <- function(model, base) {
  loaded <- model_load(model, progress = FALSE)
  if (is.null(base) || !inherits(base, "newrllama_context")) {
    return(context_create(loaded))
  }
  context_create(loaded, n_ctx = base$n_ctx, n_seq_max = base$n_seq_max, n_threads = base$n_threads)
}

# The finding's one row as Python's estimate with its interval.
finding_interval <- function(row, variant) {
  if (!is.data.frame(row) || nrow(row) != 1 || !all(c("estimate", "conf.low", "conf.high") %in% names(row))) {
    abort_invalid(sprintf(paste("`finding` gave %s under the variant '%s': it must give one row with estimate,",
                                "conf.low and conf.high (a row of prevalence() or regression())"),
                          describe(row), variant))
  }
  list(estimate = as.numeric(row$estimate), lower = as.numeric(row$conf.low), upper = as.numeric(row$conf.high))
}

#' @export
print.newrllama_robustness <- function(x, ...) {
  # A subset of the columns (x[, c("name", "estimate")]) keeps the class but not what the verdict reads.
  if (!all(c("name", "estimate", "conf.low", "conf.high", "within_baseline", "same_sign", "same_significance",
             "finding") %in% names(x))) {
    return(NextMethod())
  }
  verdict <- glance.newrllama_robustness(x)
  cat(sprintf("<newrllama_robustness> %s under %d variants: estimate %s%s\n", x$finding[[1]], nrow(x) - 1L,
              if (verdict$estimate_holds) "held" else "moved",
              if (is.na(verdict$sign_holds)) "" else sprintf(", sign %s, significance %s",
                                                           if (verdict$sign_holds) "held" else "flipped",
                                                           if (verdict$significance_holds) "held" else "changed")))
  print(tibble::as_tibble(unclass(x))[, c("name", "estimate", "conf.low", "conf.high", "within_baseline")], n = Inf)
  invisible(x)
}

#' @rdname robustness
#' @param x A result of `robustness()`.
#' @exportS3Method generics::glance
glance.newrllama_robustness <- function(x, ...) {
  tibble::tibble(finding = x$finding[[1]], variants = nrow(x) - 1L, estimate_holds = all(x$within_baseline),
                 sign_holds = if (all(is.na(x$same_sign))) NA else all(x$same_sign),
                 significance_holds = if (all(is.na(x$same_significance))) NA else all(x$same_significance))
}

#' @rdname robustness
#' @param object A result of `robustness()`.
#' @exportS3Method ggplot2::autoplot
autoplot.newrllama_robustness <- function(object, ...) {
  shown <- as.data.frame(object)
  shown$name <- factor(shown$name, levels = rev(shown$name))
  shown$baseline <- shown$changed == "baseline"
  base <- shown[shown$baseline, ]
  plot <- ggplot2::ggplot(shown, ggplot2::aes(x = .data$estimate, y = .data$name, xmin = .data$conf.low,
                                              xmax = .data$conf.high, colour = .data$within_baseline)) +
    ggplot2::annotate("rect", xmin = base$conf.low, xmax = base$conf.high, ymin = -Inf, ymax = Inf, alpha = 0.1) +
    ggplot2::geom_pointrange() +
    ggplot2::labs(x = object$finding[[1]], y = NULL, colour = "within the\nbaseline's interval")
  if (!is.na(object$null[[1]])) plot <- plot + ggplot2::geom_vline(xintercept = object$null[[1]], linetype = 2)
  plot
}

# The Python Robustness of R's tibble (for methods_text()).
python_robustness_rows <- function(x) {
  if (is.null(x)) return(NULL)
  if (!inherits(x, "newrllama_robustness")) {
    abort_invalid(sprintf("`robustness` must be a result of robustness(), not %s", describe(x)))
  }
  list(name = as.list(x$name), changed = as.list(x$changed), estimate = as.list(x$estimate),
       lower = as.list(x$conf.low), upper = as.list(x$conf.high), within_baseline = as.list(x$within_baseline),
       same_sign = lapply(x$same_sign, function(v) if (is.na(v)) NULL else v),
       same_significance = lapply(x$same_significance, function(v) if (is.na(v)) NULL else v),
       finding = as.list(x$finding), null = lapply(x$null, function(v) if (is.na(v)) NULL else v))
}
