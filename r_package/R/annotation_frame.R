# Labels as columns of a data frame: what llm_annotate() adds, and what calibrate_labels(), cross_fit(), predict(),
# least_confident(), prevalence(), plan_coding(), methods_text() and validate_labels() read back. Everything about a
# text sits in its row, so it survives filter(), arrange() and [.

# The columns that go with a label column: `<q>.probs` beside `<q>.label` (a codebook's question), `.probs` beside
# any other name (one question, whatever its `pred_name`).
companion_prefix <- function(label) {
  if (grepl("[.]label$", label)) sub("[.]label$", "", label) else ""
}

# `.data` with one question's labels (Python's named columns from annotate) in `label` and its companions: the
# chosen label's probability, every label's probabilities before and after debiasing and calibration
# (list-columns of named numbers, NULL for a text that failed), whether the label changed with the listing order,
# why a text failed, and what made the labels (provenance, as JSON).
put_annotation_columns <- function(.data, out, labels, label) {
  prefix <- companion_prefix(label)
  named_rows <- function(rows) named_number_rows(rows, labels)
  chosen <- chosen_labels(out)
  probs <- named_rows(out$probs)
  .data[[label]] <- chosen
  .data[[paste0(prefix, ".prob")]] <- vapply(seq_along(chosen), function(i) {
    if (is.na(chosen[[i]])) NA_real_ else probs[[i]][[chosen[[i]]]]
  }, numeric(1))
  .data[[paste0(prefix, ".probs")]] <- probs
  .data[[paste0(prefix, ".raw_probs")]] <- named_rows(out$raw_probs)
  .data[[paste0(prefix, ".order_free_probs")]] <- named_rows(out$order_free_probs)
  .data[[paste0(prefix, ".order_flip")]] <- vapply(out$order_flip, function(f) if (is.null(f)) NA else isTRUE(f),
                                                   logical(1), USE.NAMES = FALSE)
  .data[[paste0(prefix, ".tokens_cut")]] <- as.integer(unlist(out$tokens_cut))
  .data[[paste0(prefix, ".error")]] <- ifelse(is.na(chosen), vapply(out$error, function(e) {
    if (is.null(e)) "unknown error" else as.character(e)
  }, character(1), USE.NAMES = FALSE), NA_character_)
  made <- if (is.null(out$provenance)) rep(list(NULL), length(chosen)) else out$provenance
  .data[[paste0(prefix, ".provenance")]] <- vapply(made, function(p) if (is.null(p)) NA_character_ else p,
                                                   character(1), USE.NAMES = FALSE)
  .data
}

# Each text's label from Python's columns, NA for a text that failed.
chosen_labels <- function(out) {
  vapply(out$label, function(l) if (is.null(l)) NA_character_ else l, character(1), USE.NAMES = FALSE)
}

# One question's annotations in a data frame from llm_annotate(), as the one named list in which annotations cross to
# Python (its annotations_of()): labels, label names, each list-column's rows (plain numbers, NULL for a failed
# text), errors, each row's provenance, order flips and tokens cut.
annotation_parts <- function(x, label, name = "x", call = sys.call(-1)) {
  if (!is.data.frame(x)) {
    abort_invalid(sprintf("`%s` must be a data frame from llm_annotate(), not %s", name, describe(x)), call = call)
  }
  label <- check_string(label, "label", call = call)
  prefix <- companion_prefix(label)
  probs <- x[[paste0(prefix, ".probs")]]
  first <- if (is.list(probs)) Find(Negate(is.null), probs) else NULL
  if (!label %in% names(x) || is.null(first) || is.null(names(first))) {
    abort_invalid(sprintf(paste0("`%s` must hold the column `%s` and its list-column `%s.probs` of named ",
                                 "probabilities, as llm_annotate() adds them (and not every text failed)"),
                          name, label, prefix), call = call)
  }
  labels <- as.character(x[[label]])
  rows <- function(column) {
    values <- x[[paste0(prefix, column)]]
    if (is.null(values)) values <- probs
    lapply(values, function(p) if (is.null(p) || anyNA(p)) NULL else as.list(unname(as.numeric(p[names(first)]))))
  }
  error <- x[[paste0(prefix, ".error")]]
  errors <- lapply(seq_along(labels), function(i) {
    if (!is.na(labels[[i]])) NULL else if (!is.null(error) && !is.na(error[[i]])) error[[i]] else "failed"
  })
  provenance <- x[[paste0(prefix, ".provenance")]]
  flips <- x[[paste0(prefix, ".order_flip")]]
  cut <- x[[paste0(prefix, ".tokens_cut")]]
  list(labels = na_to_none(labels), names = as.list(names(first)), probs = rows(".probs"),
       raw_probs = rows(".raw_probs"), order_free_probs = rows(".order_free_probs"), errors = errors,
       provenance = if (is.null(provenance)) NULL else na_to_none(as.character(provenance)),
       flips = if (is.null(flips)) rep(list(NULL), length(labels)) else na_to_none(as.logical(flips)),
       tokens_cut = as.list(if (is.null(cut)) integer(length(labels)) else as.integer(cut)))
}

# An argument that is either a column of `data` (a bare name, or a string naming one) or a vector with one value
# per row. `expr` is the argument's unevaluated expression, `env` the caller's frame.
column_or_values <- function(data, expr, env, what, call = sys.call(-1)) {
  if (is.name(expr) && as.character(expr) %in% names(data)) {
    return(data[[as.character(expr)]])
  }
  value <- tryCatch(eval(expr, env), error = function(e) {
    abort_invalid(sprintf("`%s` must name a column of the data or be a vector with one value per row: %s", what,
                          conditionMessage(e)), call = call)
  })
  if (is.character(value) && length(value) == 1 && !is.na(value) && value %in% names(data)) {
    return(data[[value]])
  }
  if (!is.null(value) && length(value) != nrow(data)) {
    abort_invalid(sprintf("`%s` must be a column of the data or have one value per row (%d), not %d values", what,
                          nrow(data), length(value)), call = call)
  }
  value
}
