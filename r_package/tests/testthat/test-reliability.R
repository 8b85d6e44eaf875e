# Reliability through the R API: bad input, long runs, injected decode
# failures and interrupts must give a classed error or a per-prompt NA, never
# a crash, a leak, or a lost or mixed-up prompt.

skip_if_no_newrllama()
model <- test_model()
ctx <- test_context(model)
countries <- c("France", "Japan", "Spain", "Egypt")
capitals <- c("Paris", "Tokyo", "Madrid", "Cairo")

# The value of `expr` and the warnings it signalled, muffled.
collect_warnings <- function(expr) {
  warnings <- list()
  value <- withCallingHandlers(expr, warning = function(w) {
    warnings[[length(warnings) + 1]] <<- w
    invokeRestart("muffleWarning")
  })
  list(value = value, warnings = warnings)
}

expect_one_failure_warning <- function(warnings, n_failed, n_total) {
  expect_length(warnings, 1)
  expect_s3_class(warnings[[1]], "newrllama_failed_prompts")
  expect_match(conditionMessage(warnings[[1]]), sprintf("%d of %d prompts failed", n_failed, n_total))
  warnings[[1]]$errors
}

used_cells <- function(context) context$py$n_used_cells()

# ---- 1. Bad input --------------------------------------------------------

test_that("no prompts, NA and empty strings: classed error or per-prompt NA", {
  expect_identical(generate_parallel(ctx, character(0), progress = FALSE), character(0))
  named_empty <- stats::setNames(character(0), character(0))
  expect_identical(generate_parallel(ctx, named_empty, progress = FALSE), named_empty)

  expect_error(generate_parallel(ctx, c(capital_prompt(), NA, capital_prompt()), max_tokens = 1),
               "position 2", class = "newrllama_invalid_argument")
  expect_error(generate_parallel(ctx, NA_character_, max_tokens = 1), "NA",
               class = "newrllama_invalid_argument")

  out <- collect_warnings(
    generate_parallel(ctx, c(a = "", b = capital_prompt(), c = ""), max_tokens = 2, progress = FALSE)
  )
  errors <- expect_one_failure_warning(out$warnings, 2, 3)
  expect_named(out$value, c("a", "b", "c"))
  expect_equal(is.na(out$value), c(a = TRUE, b = FALSE, c = TRUE))
  expect_match(out$value[["b"]], "Paris")
  expect_named(errors, c("1", "3"))
  expect_match(errors, "empty")

  # Whitespace is text like any other: answered, not an error.
  blank <- generate_parallel(ctx, c(" ", "\n", capital_prompt()), max_tokens = 1, progress = FALSE)
  expect_false(anyNA(blank))
  expect_length(blank, 3)
  expect_equal(used_cells(ctx), 0)
})

test_that("invalid UTF-8 is a clear error naming its position, never a crash", {
  # reticulate 1.28 segfaults on a string marked UTF-8 that is not, and turns
  # the bytes of an unmarked one into "<ff>" text: both are refused in R.
  marked <- "\xff\xfe"
  Encoding(marked) <- "UTF-8"
  unmarked <- "abc\xff"
  as_bytes <- "\xff\xfe"
  Encoding(as_bytes) <- "bytes"
  bads <- list(marked, as_bytes)
  if (isTRUE(l10n_info()[["UTF-8"]])) {
    bads <- c(bads, list(unmarked)) # in other locales it is valid native text
  }
  for (bad in bads) {
    expect_error(generate_parallel(ctx, c(capital_prompt(), bad, capital_prompt()), max_tokens = 1),
                 "valid UTF-8.*position 2", class = "newrllama_invalid_argument")
    expect_error(generate_text(ctx, bad, max_tokens = 1), "valid UTF-8", class = "newrllama_invalid_argument")
    expect_error(tokenize(model, bad), "valid UTF-8", class = "newrllama_invalid_argument")
  }
  expect_error(apply_chat_template(model, list(list(role = "user", content = marked))),
               "messages\\[\\[1\\]\\]\\$content.*valid UTF-8", class = "newrllama_invalid_argument")
  many <- rep(c(capital_prompt(), marked), 20)
  expect_error(generate_parallel(ctx, many, max_tokens = 1), "20 string\\(s\\).*2, 4, 6.*\\.\\.\\.",
               class = "newrllama_invalid_argument")
  # The session is intact and the context clean: the same prompts, fixed, run.
  expect_equal(used_cells(ctx), 0)
  fixed <- iconv(c(capital_prompt(), marked), from = "UTF-8", to = "UTF-8", sub = "?")
  answers <- generate_parallel(ctx, fixed, max_tokens = 2, progress = FALSE)
  expect_false(anyNA(answers))
  expect_match(answers[[1]], "Paris")
})

test_that("text in other encodings is converted to UTF-8, not lost", {
  latin1 <- "Caf\xe9 au lait. The capital of France is"
  Encoding(latin1) <- "latin1"
  utf8 <- enc2utf8(latin1)
  # A "bytes" string holding valid UTF-8 was refused by reticulate before.
  bytes <- utf8
  Encoding(bytes) <- "bytes"
  answers <- generate_parallel(ctx, c(fr = latin1, utf8 = utf8, bytes = bytes), max_tokens = 2, progress = FALSE)
  expect_named(answers, c("fr", "utf8", "bytes"))
  expect_false(anyNA(answers))
  expect_equal(answers[["fr"]], answers[["utf8"]])
  expect_equal(answers[["fr"]], answers[["bytes"]])
  expect_equal(tokenize(model, latin1), tokenize(model, utf8))
})

test_that("a 1 MB prompt among valid ones is NA with a message about the context", {
  huge <- strrep("word ", 200000)
  out <- collect_warnings(
    generate_parallel(ctx, c(capital_prompt("France"), huge, capital_prompt("Japan")),
                      max_tokens = 2, progress = FALSE)
  )
  errors <- expect_one_failure_warning(out$warnings, 1, 3)
  expect_equal(is.na(out$value), c(FALSE, TRUE, FALSE))
  expect_match(out$value[[1]], "Paris")
  expect_match(out$value[[3]], "Tokyo")
  expect_named(errors, "2")
  expect_match(errors[["2"]], "n_ctx")
  expect_error(generate_text(ctx, huge, max_tokens = 1), "n_ctx", class = "newrllama_prompt_error")
  expect_equal(used_cells(ctx), 0)
})

test_that("64 prompts on n_seq_max = 4 all come back, in order, with their names", {
  # The engine's 1,500-prompt soak runs once, in pytest; here the R layer carries a named vector through
  # 16 rounds of continuous batching.
  big <- test_context(model, n_ctx = 256L, n_seq_max = 4L)
  prompts <- stats::setNames(paste("Item", 1:64), paste0("p", 1:64))
  answers <- generate_parallel(big, prompts, max_tokens = 1, progress = FALSE)
  expect_type(answers, "character")
  expect_length(answers, 64)
  expect_false(anyNA(answers))
  expect_identical(names(answers), names(prompts))
  stats <- last_stats(big)
  expect_equal(stats$n_prompts, 64)
  expect_equal(stats$n_failed, 0)
  expect_equal(stats$n_gen_tokens, 64)
  # The first and last groups of four ran as a batch of their own; run again
  # as the same batch, greedy decoding must give the same answers.
  for (group in list(1:4, 61:64)) {
    again <- generate_parallel(big, prompts[group], max_tokens = 1, progress = FALSE)
    expect_identical(as.vector(again), as.vector(answers[group]))
    expect_identical(names(again), names(prompts)[group])
  }
  expect_equal(used_cells(big), 0)
})

test_that("bad sampling arguments are classed errors before any work", {
  p <- capital_prompt()
  bad <- list(
    max_tokens = 0, max_tokens = -1, max_tokens = 1e12, max_tokens = NA,
    temperature = -1, temperature = NaN, temperature = Inf,
    top_p = -0.01, top_p = 1.01, seed = 2^40
  )
  for (i in seq_along(bad)) {
    arg <- names(bad)[i]
    args <- c(list(ctx, c(p, p)), bad[i], list(progress = FALSE))
    expect_error(do.call(generate_parallel, args), arg, class = "newrllama_invalid_argument")
    expect_error(do.call(generate_text, c(list(ctx, p), bad[i])), arg, class = "newrllama_invalid_argument")
  }
  expect_equal(used_cells(ctx), 0)
})

test_that("a closed context is a clean error; a context outlives its closed model", {
  own_model <- model_load()
  own <- test_context(own_model, n_ctx = 256L, n_seq_max = 2L)
  before <- generate_parallel(own, capital_prompt(countries[1:2]), max_tokens = 2, progress = FALSE)

  own_model$py$close()
  expect_error(tokenize(own_model, "a"), "closed", class = "newrllama_closed_error")
  expect_error(context_create(own_model), "closed", class = "newrllama_error")
  # The C layer keeps the weights alive for the context.
  after <- generate_parallel(own, capital_prompt(countries[1:2]), max_tokens = 2, progress = FALSE)
  expect_identical(as.vector(after), as.vector(before))
  rm(own_model)
  gc()
  expect_match(generate_text(own, capital_prompt(), max_tokens = 2), "Paris")

  own$py$close()
  own$py$close() # twice is harmless
  expect_output(print(own), "state: +closed")
  expect_error(generate_text(own, capital_prompt(), max_tokens = 1), "closed.*context_create",
               class = "newrllama_closed_error")
  expect_error(generate_parallel(own, capital_prompt(countries), max_tokens = 1, progress = FALSE),
               "closed", class = "newrllama_closed_error")
})

test_that("missing, non-GGUF and truncated model files are model load errors", {
  dir <- tempfile("models")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE))

  expect_error(model_load(file.path(dir, "missing.gguf")), "does not exist",
               class = "newrllama_model_load_error")
  expect_error(model_load(dir), "GGUF", class = "newrllama_model_load_error")

  not_gguf <- file.path(dir, "text.gguf")
  writeLines("this is not a model", not_gguf)
  expect_error(model_load(not_gguf), "GGUF", class = "newrllama_model_load_error")

  empty <- file.path(dir, "empty.gguf")
  file.create(empty)
  expect_error(model_load(empty), "GGUF", class = "newrllama_model_load_error")

  source <- reticulate::import("newrllama")$default_model_path()
  head_of <- function(n_bytes, name) {
    con <- file(source, "rb")
    on.exit(close(con))
    path <- file.path(dir, name)
    writeBin(readBin(con, "raw", n_bytes), path)
    path
  }
  expect_error(model_load(head_of(2 * 1024^2, "truncated.gguf")), "truncated",
               class = "newrllama_model_load_error")
  expect_error(model_load(head_of(64, "header-only.gguf")), "truncated",
               class = "newrllama_model_load_error")
  # The session still works.
  expect_match(generate_text(ctx, capital_prompt(), max_tokens = 2), "Paris")
})

# ---- 2. Load -------------------------------------------------------------

test_that("100 calls on one context give the same answers in order and leave nothing behind", {
  skip_on_cran() # about 200 decode steps
  skip_on_fast_lane()
  loop <- test_context(model, n_ctx = 512L, n_seq_max = 4L)
  prompts <- stats::setNames(capital_prompt(countries[1:3]), countries[1:3])
  first <- generate_parallel(loop, prompts, max_tokens = 2, progress = FALSE)
  for (i in seq_along(prompts)) {
    expect_match(first[[i]], capitals[[i]])
  }
  rss_mb <- function() {
    status <- tryCatch(readLines("/proc/self/status"), error = function(e) character())
    line <- grep("^VmRSS:", status, value = TRUE)
    if (length(line) == 0) NA_real_ else as.numeric(gsub("[^0-9]", "", line)) / 1024
  }
  mismatches <- 0L
  rss <- numeric()
  for (call in 1:100) {
    answers <- generate_parallel(loop, prompts, max_tokens = 2, progress = FALSE)
    if (!identical(as.vector(answers), as.vector(first)) || !identical(names(answers), names(prompts)) ||
        anyNA(answers)) {
      mismatches <- mismatches + 1L
    }
    if (call %in% c(25, 100)) {
      gc()
      rss <- c(rss, rss_mb())
    }
  }
  expect_equal(mismatches, 0L)
  expect_equal(used_cells(loop), 0)
  # 75 calls must not grow the process by much (a leak of the prompts, the
  # results or the KV cache would; the Python tests measure the engine finer).
  if (!anyNA(rss)) {
    expect_lt(rss[2] - rss[1], 20)
  }
})

# ---- 3. Faults -------------------------------------------------------------

test_that("an injected decode failure on one sequence fails only that prompt", {
  faults <- test_context(model, n_ctx = 1024L, n_seq_max = 4L)
  prompts <- capital_prompt(countries)
  reference <- generate_parallel(faults, prompts, max_tokens = 3, progress = FALSE)

  # The 2nd decode (the first generation step) fails for batches holding sequence 1.
  faults$py$`_inject_decode_failure`(2L, seq_id = 1L)
  out <- collect_warnings(generate_parallel(faults, prompts, max_tokens = 3, progress = FALSE))
  errors <- expect_one_failure_warning(out$warnings, 1, 4)
  expect_equal(is.na(out$value), c(FALSE, TRUE, FALSE, FALSE))
  expect_named(errors, "2")
  expect_match(errors[["2"]], "llama_decode")
  for (i in c(1, 3, 4)) {
    expect_match(out$value[[i]], capitals[[i]])
  }
  expect_equal(last_stats(faults)$n_failed, 1)
  expect_equal(used_cells(faults), 0)

  # The next call is whole again.
  expect_no_warning(again <- generate_parallel(faults, prompts, max_tokens = 3, progress = FALSE))
  expect_identical(as.vector(again), as.vector(reference))

  # generate_text() reports the failure of its one prompt as an error.
  faults$py$`_inject_decode_failure`(1L, seq_id = 0L)
  expect_error(generate_text(faults, capital_prompt(), max_tokens = 2), "llama_decode",
               class = "newrllama_prompt_error")
  expect_equal(used_cells(faults), 0)
  expect_match(generate_text(faults, capital_prompt(), max_tokens = 2), "Paris")
})

test_that("a one-off decode failure is retried and every prompt completes", {
  faults <- test_context(model, n_ctx = 1024L, n_seq_max = 4L)
  prompts <- capital_prompt(countries)
  reference <- generate_parallel(faults, prompts, max_tokens = 3, progress = FALSE)
  for (when in 1:2) { # in the prompt batch, then in a generation step
    faults$py$`_inject_decode_failure`(when, seq_id = -1L)
    out <- collect_warnings(generate_parallel(faults, prompts, max_tokens = 3, progress = FALSE))
    expect_length(out$warnings, 0)
    expect_false(anyNA(out$value))
    for (i in seq_along(capitals)) {
      expect_match(out$value[[i]], capitals[[i]])
    }
    expect_gte(last_stats(faults)$n_fallbacks, 1)
    expect_equal(used_cells(faults), 0)
  }
  expect_identical(as.vector(generate_parallel(faults, prompts, max_tokens = 3, progress = FALSE)),
                   as.vector(reference))
})

# ---- 4. Interrupt ------------------------------------------------------------

# Runs `long_call` (R code) in another R process, sends it SIGINT 3 s in, and checks that the call stopped
# and that the session and its context keep working.
expect_interruptible <- function(long_call) {
  # reticulate before 1.36 unwinds only R's stack when Ctrl-C lands in a call into Python
  # (rstudio/reticulate#1601): the session may then crash at a later call into Python, depending on where the
  # interrupt landed. Fresh-clone CI runs on Debian's 1.28 crashed in 1 of these 2 tests, a different one each
  # run, with newrllama's autoflush mitigation (zzz.R) or without; local runs of the same child passed.
  skip_if(utils::packageVersion("reticulate") < "1.36",
          "reticulate < 1.36 cannot unwind Python's stack after an R interrupt (rstudio/reticulate#1601)")
  # Needs another R process: the test sends it SIGINT in the middle of a call.
  dir <- tempfile("interrupt")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  script <- file.path(dir, "child.R")
  pid_file <- file.path(dir, "pid")
  out_file <- file.path(dir, "out")
  writeLines(c(
    "library(newrllama)",
    "say <- function(...) { cat(..., '\\n', sep = ''); flush(stdout()) }",
    sprintf("writeLines(as.character(Sys.getpid()), %s)", deparse(pid_file)),
    "model <- model_load()",
    "ctx <- context_create(model, n_ctx = 4096L, n_threads = 1L, n_seq_max = 4L)",
    "say('READY')",
    "start <- Sys.time()",
    "result <- tryCatch({",
    paste0("  ", long_call),
    "  'COMPLETED'",
    "}, interrupt = function(i) 'INTERRUPTED',",
    "   newrllama_interrupted = function(e) 'INTERRUPTED (newrllama_interrupted)',",
    "   error = function(e) paste('ERROR', class(e)[1], conditionMessage(e)))",
    "say('RESULT: ', result)",
    "say('SECONDS: ', round(as.numeric(Sys.time() - start, units = 'secs'), 1))",
    "say('USED: ', ctx$py$n_used_cells())",
    "answer <- generate_text(ctx, 'The capital of Germany is Berlin. The capital of France is', max_tokens = 2)",
    "say('AFTER: ', answer)",
    "say('USED AFTER: ', ctx$py$n_used_cells())",
    "say('MARKER-DONE')"
  ), script)

  env <- c(
    paste0("NEWRLLAMA_PYTHON=", shQuote(Sys.getenv("NEWRLLAMA_PYTHON"))),
    paste0("R_LIBS=", shQuote(paste(.libPaths(), collapse = .Platform$path.sep)))
  )
  system2(file.path(R.home("bin"), "Rscript"), shQuote(script), stdout = out_file,
          stderr = file.path(dir, "err"), env = env, wait = FALSE)
  output <- function() if (file.exists(out_file)) readLines(out_file, warn = FALSE) else character()
  wait_for <- function(marker, seconds) {
    deadline <- Sys.time() + seconds
    while (Sys.time() < deadline) {
      if (any(grepl(marker, output(), fixed = TRUE))) return(TRUE)
      Sys.sleep(0.2)
    }
    FALSE
  }
  ready <- wait_for("READY", 120)
  pid <- if (file.exists(pid_file)) as.integer(readLines(pid_file, warn = FALSE)) else NA_integer_
  # Never leave the child running, whatever happens below.
  finished <- FALSE
  on.exit(if (!finished && !is.na(pid)) tools::pskill(pid, tools::SIGKILL), add = TRUE)
  expect_true(ready)
  expect_false(is.na(pid))
  skip_if(!ready || is.na(pid), "the child R process did not start")

  Sys.sleep(3) # well inside the call: 64 prompts of 200 tokens take minutes
  expect_true(tools::pskill(pid, tools::SIGINT))
  finished <- wait_for("MARKER-DONE", 120)
  if (finished) Sys.sleep(0.5) # let it exit
  out <- output()
  info <- paste(c(out, readLines(file.path(dir, "err"), warn = FALSE)), collapse = "\n")
  expect_true(finished, label = info)
  expect_true(any(grepl("^RESULT: INTERRUPTED", out)), label = info)
  seconds <- as.numeric(sub("SECONDS: ", "", grep("^SECONDS: ", out, value = TRUE)))
  expect_lt(seconds, 60) # stopped, not run to the end
  expect_true("USED: 0" %in% out, label = info)
  expect_true(any(grepl("^AFTER: .*Paris", out)), label = info)
  expect_true("USED AFTER: 0" %in% out, label = info)
}

test_that("an interrupt stops a long call; the session and the context keep working", {
  skip_on_cran()
  skip_on_fast_lane()  # an R process of its own
  skip_if(.Platform$OS.type != "unix", "sends SIGINT")
  expect_interruptible("generate_parallel(ctx, paste('Tell a long story about item', 1:64), max_tokens = 200, progress = FALSE)")
})

test_that("an interrupt stops a streamed answer; the session and the context keep working", {
  skip_on_cran()
  skip_on_fast_lane()  # an R process of its own
  skip_if(.Platform$OS.type != "unix", "sends SIGINT")
  expect_interruptible("generate_text(ctx, 'Tell a long story:', max_tokens = 2000, stream = function(piece) NULL)")
})
