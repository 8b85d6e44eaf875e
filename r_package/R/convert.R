# R values as Python's checks take them: R converts what R alone knows (NA, factors, whole
# doubles, UTF-8, vectors that are lists in Python) and Python checks the rest, naming the argument.

# Named arguments for a Python call; NULL ones are left out (Python's default).
python_args <- function(values, call = sys.call(-1)) {
  values <- values[!vapply(values, is.null, logical(1))]
  # Not Map(): it would splice `call` into the calls it makes, and so evaluate it.
  for (name in names(values)) {
    values[[name]] <- r_to_python(values[[name]], name, call = call)
  }
  values
}

# Fields that Python takes as lists, even of one element.
list_fields <- c("stop", "choices")

r_to_python <- function(x, name, call = sys.call(-1)) {
  if (is.factor(x)) {
    x <- as.character(x)
  }
  if (is.atomic(x) && anyNA(x)) {
    where <- if (length(x) > 1) sprintf(" (found at position %s)", paste(which(is.na(x)), collapse = ", ")) else ""
    abort_invalid(sprintf("`%s` must not be NA or NaN%s", name, where), call = call)
  }
  if (is.character(x)) {
    x <- check_utf8(x, name, call = call)
  }
  if (name %in% list_fields) {
    if (!is.character(x)) {
      abort_invalid(sprintf("`%s` must be a character vector, not %s", name, describe(x)), call = call)
    }
    return(as.list(unname(x)))
  }
  if (is.numeric(x) && length(x) == 1 && is.finite(x) && x == trunc(x)) {
    # Python checks ints as ints: a whole double goes as one, a big one as Python's own int.
    return(if (abs(x) <= .Machine$integer.max) as.integer(x) else py_int(x))
  }
  x
}

# Python's per-text rows of numbers as a list-column: each row a numeric vector named by `names`, NULL for a
# text that has none (it failed).
named_number_rows <- function(rows, names) {
  lapply(rows, function(r) if (is.null(r)) NULL else stats::setNames(as.numeric(unlist(r)), names))
}
