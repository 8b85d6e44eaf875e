# Runs generate_parallel from R and writes the texts as JSON (through Python's json,
# so that no other R package is needed). Arguments: prompts JSON file, output file,
# max_tokens, temperature, seed, n_seq_max.
library(newrllama)
args <- commandArgs(trailingOnly = TRUE)
model <- model_load() # first, so that reticulate starts the Python that newrllama chooses
json <- reticulate::import("json")
prompts <- unlist(json$loads(paste(readLines(args[[1]], warn = FALSE), collapse = "\n")))
ctx <- context_create(model, n_ctx = 2048L, n_threads = 2L, n_seq_max = as.integer(args[[6]]))
out <- generate_parallel(ctx, prompts, max_tokens = as.integer(args[[3]]),
                         temperature = as.numeric(args[[4]]), seed = as.integer(args[[5]]),
                         progress = FALSE)
writeLines(json$dumps(as.list(unname(out))), args[[2]])
