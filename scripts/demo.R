# The main job: parallel generation from R on the embedded model.
library(newrllama)
model <- model_load()
ctx <- context_create(model, n_ctx = 2048L, n_seq_max = 8L)
prompts <- c(
  "The capital of Germany is Berlin. The capital of Italy is Rome. The capital of France is",
  "The capital of Germany is Berlin. The capital of Spain is Madrid. The capital of Japan is",
  "1, 2, 3, 4,",
  "Once upon a time, in a small village,",
  "The chemical symbol for gold is",
  "def fibonacci(n):"
)
answers <- generate_parallel(ctx, prompts, max_tokens = 32L, progress = FALSE)
for (i in seq_along(prompts)) {
  cat(sprintf("[%d] %s\n   -> %s\n", i, prompts[[i]], trimws(answers[[i]])))
}
stats <- last_stats(ctx)
cat(sprintf("\n%d prompts, %d generated tokens in %.2f s: %.1f tokens/s\n",
            length(prompts), as.integer(stats$n_gen_tokens), stats$t_total_s, stats$tokens_per_second))
