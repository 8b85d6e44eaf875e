# Progress of a long call, drawn by cli in R: Python reports (done, total) to an R function, in R's thread, as its
# prompts finish. cli shows the bar once a call has run `cli.progress_show_after` seconds (2 by default; Inf turns
# bars off), in interactive sessions in place and under Rscript and knitr as lines.

# What Python takes as `progress`: FALSE, or a function(done, total) that draws a bar ending with `frame`, the
# frame of the R call that waits on Python.
progress_reporter <- function(progress, unit, frame = parent.frame(), call = sys.call(-1)) {
  if (!check_flag(progress, "progress", call = call)) {
    return(FALSE)
  }
  state <- new.env(parent = emptyenv())
  function(done, total) {
    if (is.null(state$id)) {
      state$id <- cli::cli_progress_bar(
        name = "newrllama", total = total, .envir = frame,
        format = paste0("{cli::pb_name} {cli::pb_bar} {cli::pb_current}/{cli::pb_total} ", unit,
                        " | {cli::pb_elapsed} | ETA {cli::pb_eta}")
      )
    }
    cli::cli_progress_update(id = state$id, set = done, .envir = frame)
    invisible(NULL)
  }
}
