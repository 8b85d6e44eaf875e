# The sampling arguments of generate_text() and generate_parallel() are the fields of
# Python's SamplingParams, under the same names. R converts R values (NA,
# factors, whole doubles, UTF-8, vectors that are lists in Python) and Python
# checks them: its message names the field, which is the R argument. With a
# `params` argument in the frame that is not NULL, each prompt gets the call's
# settings under its own.
sampling_params <- function(frame, call = sys.call(-1)) {
  fields <- intersect(sampling_fields(), ls(frame))
  args <- python_args(mget(fields, envir = frame), call = call)
  per_prompt <- if (exists("params", envir = frame, inherits = FALSE)) get("params", envir = frame) else NULL
  if (is.null(per_prompt)) {
    return(with_python(do.call(python_helpers()$SamplingParams, args), call = call))
  }
  helpers <- python_helpers()
  if (is.data.frame(per_prompt)) {
    refuse_choices(names(per_prompt), call)
    columns <- lapply(names(per_prompt), function(name) column_values(per_prompt[[name]], name, call))
    names(columns) <- names(per_prompt)
    return(with_python(helpers$per_prompt_params(args, columns = columns), call = call))
  }
  if (!is.list(per_prompt) || !is.null(names(per_prompt))) {
    abort_invalid(sprintf(paste("`params` must be a data frame (a row per prompt, a column per setting) or an",
                                "unnamed list of named lists, one per prompt, not %s"), describe(per_prompt)),
                  call = call)
  }
  rows <- lapply(seq_along(per_prompt), function(i) {
    row <- per_prompt[[i]]
    if (is.null(row)) {
      return(NULL)
    }
    if (!is.list(row) || is.null(names(row)) || !all(nzchar(names(row)))) {
      abort_invalid(sprintf("`params[[%d]]` must be a named list of settings, not %s", i, describe(row)), call = call)
    }
    refuse_choices(names(row), call)
    python_args(row, call = call)
  })
  with_python(helpers$per_prompt_params(args, rows = rows), call = call)
}

# The probability matrix of generate_parallel() has one column per label of the call.
refuse_choices <- function(names, call) {
  if ("choices" %in% names) {
    abort_invalid("`params` cannot set `choices`: give them to the call, for every prompt", call = call)
  }
}

# A data frame column of per-prompt settings as a list, NA (or NULL, in a list column) for the call's value.
column_values <- function(column, name, call) {
  values <- if (is.list(column)) column else as.list(if (is.factor(column)) as.character(column) else column)
  lapply(values, function(v) {
    if (is.null(v) || (is.atomic(v) && length(v) == 1 && is.na(v))) NULL else r_to_python(v, name, call = call)
  })
}

# The names of SamplingParams' fields, from Python, so that R cannot drift from it.
sampling_fields <- function() {
  if (is.null(the$sampling_fields)) {
    the$sampling_fields <- as.character(unlist(python_helpers()$sampling_fields()))
  }
  the$sampling_fields
}
