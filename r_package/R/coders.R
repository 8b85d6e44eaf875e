#' Several coders: their codes, their agreement, and one truth from them
#'
#' `read_codings()` reads filled-in coding sheets of several coders: sheets
#' with a `coder` column (from `write_coding_sheet(coders = )`), or one sheet
#' per coder without it (the coder then named by the file's name).
#' `coder_agreement()` gives Krippendorff's alpha among the coders over the
#' texts two or more of them coded, overall and per label (the alpha of "is it
#' this label?"). `adjudicate()` makes one code per text: a text one coder
#' coded takes that code; one several coded takes the code most of them gave
#' (`"majority"`, a tie being a disagreement) or the code all of them gave
#' (`"unanimous"`); a disagreement takes the `tiebreak` code (a further
#' coder's, from [read_coding_sheet()]) when there is one and is otherwise left
#' out of the coded sample (`NA`), and counted.
#'
#' @param path The sheets' files (`.csv`, or `.xlsx` with openxlsx).
#' @param x The texts (a character vector; its names are the ids, else the
#'   positions), as given to [write_coding_sheet()].
#' @param labels The labels a code may be.
#' @param codings From `read_codings()`.
#' @param rule `"majority"` or `"unanimous"`.
#' @param tiebreak Optional: a further coder's codes, one per text (`NA` where
#'   not coded), that settle disagreements.
#' @return `read_codings()`: a `newrllama_codings` object (`coders`, and
#'   `codes`, a tibble of one column per coder). `coder_agreement()`: a tibble,
#'   a first row for all labels (`label` `NA`) then one per label, with `alpha`,
#'   `percent_agreement` (all labels), `n_units` and `n_coders`.
#'   `adjudicate()`: a `newrllama_adjudication` object whose `truth` (one code
#'   per text, named by id) goes to [prevalence()] and which [methods_text()]
#'   reports (`coding =`).
#' @examplesIf newrllama::newrllama_available()
#' texts <- c(s1 = "Texaco agreed to buy Getty Oil.", s2 = "OPEC cut its crude output.")
#' path <- tempfile(fileext = ".csv")
#' write_coding_sheet(texts, 1:2, path, coders = c("ana", "ben"))
#' sheet <- utils::read.csv(path)
#' sheet$code <- c("acquisition", "crude oil", "acquisition", "acquisition")
#' utils::write.csv(sheet, path, row.names = FALSE)
#' codings <- read_codings(path, texts, c("acquisition", "crude oil"))
#' coder_agreement(codings)
#' adjudicate(codings, tiebreak = c(NA, "crude oil"))$truth
#' @export
read_codings <- function(path, x, labels) {
  x <- check_sheet_texts(x)
  if (!is.character(path) || length(path) == 0 || anyNA(path)) {
    abort_invalid(sprintf("`path` must be the sheets' files, a character vector, not %s", describe(path)))
  }
  labels <- check_labels(labels, "labels")
  csv <- vapply(path, sheet_as_csv, character(1), USE.NAMES = FALSE)
  on.exit(unlink(dirname(csv[csv != path]), recursive = TRUE))
  py <- with_python(python_helpers()$read_codings(as.list(csv), as.list(sheet_ids(x)), as.list(as.character(labels))))
  new_codings(py, sheet_ids(x))
}

new_codings <- function(py, ids) {
  coders <- unlist(py$coders)
  codes <- lapply(py$codes, function(column) vapply(column, function(v) if (is.null(v)) NA_character_ else v,
                                                     character(1)))
  structure(list(py = py, coders = coders, ids = ids,
                 codes = tibble::as_tibble(stats::setNames(codes, coders))),
            class = "newrllama_codings")
}

#' @export
print.newrllama_codings <- function(x, ...) {
  n_coded <- vapply(x$codes, function(v) sum(!is.na(v)), integer(1))
  cat(sprintf("<newrllama codings: %d coders of %d texts (%s)>\n", length(x$coders), nrow(x$codes),
              paste(sprintf("%s %d", x$coders, n_coded), collapse = ", ")))
  invisible(x)
}

#' @rdname read_codings
#' @export
coder_agreement <- function(codings) {
  check_class(codings, "newrllama_codings", "codings", "read_codings")
  a <- with_python(codings$py$agreement())
  per_label <- unlist(a$per_label)
  tibble::tibble(label = c(NA_character_, names(per_label)), alpha = c(a$alpha, unname(per_label)),
                 percent_agreement = c(a$percent_agreement, rep(NA_real_, length(per_label))),
                 n_units = a$n_units, n_coders = a$n_coders)
}

#' @rdname read_codings
#' @export
adjudicate <- function(codings, rule = c("majority", "unanimous"), tiebreak = NULL) {
  check_class(codings, "newrllama_codings", "codings", "read_codings")
  rule <- match.arg(rule)
  if (!is.null(tiebreak)) tiebreak <- na_to_none(check_labels(tiebreak, "tiebreak"))
  py <- with_python(codings$py$adjudicate(rule, tiebreak))
  truth <- vapply(py$truth, function(v) if (is.null(v)) NA_character_ else v, character(1))
  structure(list(py = py, truth = stats::setNames(truth, codings$ids), rule = rule, n_coded = py$n_coded,
                 n_multiple = py$n_multiple, n_disagreed = py$n_disagreed, n_tiebroken = py$n_tiebroken,
                 n_unresolved = py$n_unresolved),
            class = "newrllama_adjudication")
}

#' @export
print.newrllama_adjudication <- function(x, ...) {
  cat(sprintf("<newrllama adjudication (%s): %d texts coded, %d by two or more, %d disagreements (%d settled by the tiebreak, %d left out)>\n",
              x$rule, x$n_coded, x$n_multiple, x$n_disagreed, x$n_tiebroken, x$n_unresolved))
  invisible(x)
}

# The Python adjudication behind `coding` (NULL: none).
python_adjudication <- function(coding, call = sys.call(-1)) {
  if (is.null(coding)) {
    return(NULL)
  }
  check_class(coding, "newrllama_adjudication", "coding", "adjudicate", call = call)
  coding$py
}
