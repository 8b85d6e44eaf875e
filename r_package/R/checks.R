# Argument checks done in R before any call into Python, so that mistakes are
# reported with the R argument name. All fail with `newrllama_invalid_argument`.

is_whole_number <- function(x) {
  is.numeric(x) && length(x) == 1 && !is.na(x) && is.finite(x) && x == trunc(x)
}

check_count <- function(x, name, min = 0, max = .Machine$integer.max, call = sys.call(-1)) {
  if (!is_whole_number(x) || x < min || x > max) {
    abort_invalid(sprintf("`%s` must be a whole number in [%s, %s], not %s",
                          name, format(min, scientific = FALSE), format(max, scientific = FALSE),
                          describe(x)), call = call)
  }
  as.integer(x)
}

check_number <- function(x, name, min = 0, max = Inf, min_open = FALSE, call = sys.call(-1)) {
  ok <- is.numeric(x) && length(x) == 1 && !is.na(x) && is.finite(x) &&
    x <= max && (if (min_open) x > min else x >= min)
  if (!ok) {
    range <- sprintf("%s%s, %s]", if (min_open) "(" else "[", min, max)
    abort_invalid(sprintf("`%s` must be a finite number in %s, not %s", name, range, describe(x)),
                  call = call)
  }
  as.numeric(x)
}

check_flag <- function(x, name, call = sys.call(-1)) {
  if (!is.logical(x) || length(x) != 1 || is.na(x)) {
    abort_invalid(sprintf("`%s` must be TRUE or FALSE, not %s", name, describe(x)), call = call)
  }
  x
}

check_string <- function(x, name, call = sys.call(-1)) {
  if (!is.character(x) || length(x) != 1 || is.na(x)) {
    abort_invalid(sprintf("`%s` must be a single string, not %s", name, describe(x)), call = call)
  }
  check_utf8(x, name, call = call)
}

# Strings as valid UTF-8 for Python. reticulate (1.28) crashes the R session
# (segfault) on a string marked UTF-8 that is not valid UTF-8, silently turns
# invalid bytes of an unmarked string into "<ff>" text, and refuses strings
# marked "bytes"; so strings are converted here and invalid ones rejected.
check_utf8 <- function(x, name, call = sys.call(-1)) {
  # Bytes are checked before enc2utf8(), which turns invalid bytes of a
  # native string into "<ff>" text. Native strings are UTF-8 only in a UTF-8
  # locale; elsewhere enc2utf8() converts them.
  enc <- Encoding(x)
  as_utf8 <- enc %in% c("UTF-8", "bytes") | (enc == "unknown" & isTRUE(l10n_info()[["UTF-8"]]))
  valid <- is.na(x) | !as_utf8 | validUTF8(x)
  x[valid] <- enc2utf8(x[valid])
  valid <- valid & (is.na(x) | validUTF8(x))
  if (!all(valid)) {
    where <- which(!valid)
    shown <- paste(where[seq_len(min(length(where), 10))], collapse = ", ")
    if (length(where) > 10) shown <- paste0(shown, ", ...")
    abort_invalid(sprintf(paste0(
      "`%s` must be valid UTF-8 text; %d string(s) are not (at position %s). ",
      "Convert them with iconv(), e.g. iconv(x, from = \"latin1\", to = \"UTF-8\") ",
      "or iconv(x, to = \"UTF-8\", sub = \"?\")"
    ), name, length(where), shown), call = call)
  }
  # enc2utf8() leaves "bytes" strings as they are; valid ones are UTF-8 text.
  bytes <- !is.na(x) & Encoding(x) == "bytes"
  if (any(bytes)) {
    Encoding(x[bytes]) <- "UTF-8"
  }
  x
}

# Token ids: whole numbers that fit a 32-bit int, no NA. Returned as a list so
# that reticulate passes a Python list even for one token.
check_tokens <- function(x, name, call = sys.call(-1)) {
  ok <- is.numeric(x) && !anyNA(x) && all(is.finite(x)) && all(x == trunc(x)) &&
    all(x >= -.Machine$integer.max & x <= .Machine$integer.max)
  if (!ok) {
    abort_invalid(sprintf("`%s` must be an integer vector of token ids without NA, not %s",
                          name, describe(x)), call = call)
  }
  as.list(as.integer(x))
}

check_prompts <- function(x, name = "prompts", call = sys.call(-1)) {
  if (is.factor(x)) {
    x <- stats::setNames(as.character(x), names(x))
  }
  if (!is.character(x)) {
    abort_invalid(sprintf("`%s` must be a character vector, not %s", name, describe(x)), call = call)
  }
  if (anyNA(x)) {
    abort_invalid(sprintf("`%s` must not contain NA (found at position %s)",
                          name, paste(which(is.na(x)), collapse = ", ")), call = call)
  }
  check_utf8(x, name, call = call)
}

check_class <- function(x, class, name, maker, call = sys.call(-1)) {
  if (!inherits(x, class)) {
    abort_invalid(sprintf("`%s` must be a %s object made by %s(), not %s",
                          name, class, maker, describe(x)), call = call)
  }
  # saveRDS() keeps the R object but not the Python one behind it.
  if (reticulate::py_is_null_xptr(x$py)) {
    abort(sprintf(paste0("`%s` comes from a previous R session (for example via saveRDS()); ",
                         "its Python object no longer exists. Create it again with %s()."),
                  name, maker),
          "newrllama_stale_object", call = call)
  }
  x
}

check_model <- function(x, name = "model", call = sys.call(-1)) {
  check_class(x, "newrllama_model", name, "model_load", call = call)
}

check_context <- function(x, name = "context", call = sys.call(-1)) {
  check_class(x, "newrllama_context", name, "context_create", call = call)
}

# A short description of a bad value for error messages.
describe <- function(x) {
  if (is.null(x)) {
    return("NULL")
  }
  if (is.atomic(x) && length(x) == 1) {
    value <- if (is.character(x) && !is.na(x)) encodeString(x, quote = "\"") else format(x)
    return(sprintf("%s (%s)", value, class(x)[1]))
  }
  sprintf("an object of class %s and length %d", paste(class(x), collapse = "/"), length(x))
}

# Methods of a generic take `...`; an argument they do not know (a misspelled
# one) must be an error, not silently ignored.
check_dots_empty <- function(..., call = sys.call(-1)) {
  if (...length() == 0) {
    return(invisible())
  }
  given <- names(list(...))
  given <- if (is.null(given)) rep("", ...length()) else given
  shown <- ifelse(nzchar(given), paste0("`", given, "`"), "an unnamed argument")
  abort_invalid(sprintf("unknown argument%s: %s", if (length(shown) > 1) "s" else "",
                        paste(shown, collapse = ", ")), call = call)
}

# One of a fixed set of strings; the default (the whole set, as in match.arg()) means the first.
check_choice <- function(x, choices, name, call = sys.call(-1)) {
  if (identical(x, choices)) {
    return(choices[1])
  }
  if (!is.character(x) || length(x) != 1 || is.na(x) || !x %in% choices) {
    abort_invalid(sprintf("`%s` must be one of %s, not %s", name, paste0("\"", choices, "\"", collapse = ", "),
                          describe(x)), call = call)
  }
  x
}
