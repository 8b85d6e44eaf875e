/* Public generation entry points; all of them run the one engine. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "newrllama_internal.h"

#define NR_MAX_PROMPTS (1 << 26)

static newrllama_sampling_params from_parallel_params(const struct newrllama_parallel_params *p) {
    return (newrllama_sampling_params){
        .max_tokens = p->max_tokens,
        .top_k = p->top_k,
        .top_p = p->top_p,
        .min_p = 0.0f,
        .temperature = p->temperature,
        .repeat_last_n = p->repeat_last_n,
        .penalty_repeat = p->penalty_repeat,
        .seed = p->seed,
        .stop = NULL,
        .n_stop = 0,
    };
}

newrllama_error_code newrllama_generate(newrllama_context_handle ctx, const int32_t *tokens, size_t n_tokens,
                                        int max_tokens, int top_k, float top_p, float temperature,
                                        int repeat_last_n, float penalty_repeat, int32_t seed,
                                        char **result_out, const char **error_message) {
    nr_clear_error(error_message);
    if (!ctx || !tokens || !result_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "ctx, tokens and result_out must not be NULL");
    }
    *result_out = NULL;
    if (n_tokens == 0 || n_tokens > (size_t)INT32_MAX) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "the prompt must have 1 to 2^31-1 tokens, got %zu", n_tokens);
    }
    if (!nr_tokens_in_vocab(ctx->model, tokens, n_tokens, error_message)) return NEWRLLAMA_ERROR_INVALID_ARGUMENT;
    struct newrllama_parallel_params pp = {max_tokens, top_k, top_p, temperature, repeat_last_n, penalty_repeat, seed};
    newrllama_sampling_params sp = from_parallel_params(&pp);
    newrllama_error_code rc = nr_check_sampling(&sp, error_message);
    if (rc != NEWRLLAMA_OK) return rc;
    newrllama_prompt prompt = {.tokens = tokens, .n_tokens = n_tokens};
    newrllama_completion result = {0};
    newrllama_parallel_stats stats;
    rc = nr_engine_run(ctx, &prompt, 1, &sp, 1, NULL, NULL, &result, &stats, error_message);
    if (rc == NEWRLLAMA_OK && result.finish_reason == NEWRLLAMA_FINISH_ERROR) {
        rc = nr_fail(error_message, NEWRLLAMA_ERROR_PROMPT, "%s", result.error ? result.error : "generation failed");
    }
    if (rc == NEWRLLAMA_OK) {
        *result_out = result.text;
        result.text = NULL;
    }
    free(result.text);
    free(result.token_ids);
    free(result.error);
    return rc;
}

newrllama_error_code newrllama_generate_parallel_ex(newrllama_context_handle ctx, const newrllama_prompt *prompts,
                                                    int32_t n_prompts,
                                                    const newrllama_sampling_params *params, int32_t n_params,
                                                    newrllama_progress_callback progress, void *user_data,
                                                    newrllama_completion **results_out,
                                                    newrllama_parallel_stats *stats_out,
                                                    const char **error_message) {
    nr_clear_error(error_message);
    if (!ctx || !params || !results_out || (n_prompts > 0 && !prompts)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "ctx, prompts, params and results_out must not be NULL");
    }
    *results_out = NULL;
    if (n_prompts < 0 || n_prompts > NR_MAX_PROMPTS) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "n_prompts must be in [0, %d], got %d",
                       NR_MAX_PROMPTS, n_prompts);
    }
    if (n_params != 1 && n_params != n_prompts) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_params must be 1 or n_prompts (%d), got %d", n_prompts, n_params);
    }
    for (int32_t i = 0; i < n_params; i++) {
        const char *why = NULL;
        if (nr_check_sampling(&params[i], &why) != NEWRLLAMA_OK) {
            return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "params[%d]: %s", i, why);
        }
    }
    newrllama_parallel_stats local_stats;
    newrllama_parallel_stats *stats = stats_out ? stats_out : &local_stats;
    newrllama_completion *results = calloc(n_prompts ? (size_t)n_prompts : 1, sizeof *results);
    if (!results) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    newrllama_error_code rc = nr_engine_run(ctx, prompts, n_prompts, params, n_params, progress, user_data,
                                            results, stats, error_message);
    if (rc != NEWRLLAMA_OK && rc != NEWRLLAMA_ERROR_CANCELLED) {
        newrllama_free_completions(results, n_prompts);
        return rc;
    }
    *results_out = results;
    return rc;
}

newrllama_error_code newrllama_generate_parallel(newrllama_context_handle ctx, const char **prompts, int n_prompts,
                                                 const struct newrllama_parallel_params *params,
                                                 char ***results_out, const char **error_message) {
    nr_clear_error(error_message);
    if (!params || !results_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "params and results_out must not be NULL");
    }
    *results_out = NULL;
    if (n_prompts < 0 || n_prompts > NR_MAX_PROMPTS || (n_prompts > 0 && !prompts)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "prompts must hold n_prompts (0 to %d) strings, got n_prompts = %d", NR_MAX_PROMPTS, n_prompts);
    }
    newrllama_prompt *items = calloc(n_prompts ? (size_t)n_prompts : 1, sizeof *items);
    if (!items) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n_prompts; i++) {
        items[i].text = prompts[i];
        items[i].text_len = prompts[i] ? strlen(prompts[i]) : 0;
    }
    newrllama_sampling_params sp = from_parallel_params(params);
    newrllama_completion *completions = NULL;
    newrllama_error_code rc = newrllama_generate_parallel_ex(ctx, items, n_prompts, &sp, 1, NULL, NULL, &completions,
                                                             NULL, error_message);
    free(items);
    if (rc != NEWRLLAMA_OK) return rc;
    char **texts = calloc(n_prompts ? (size_t)n_prompts : 1, sizeof *texts);
    if (!texts) {
        newrllama_free_completions(completions, n_prompts);
        return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    int n_failed = 0;
    const char *first_error = NULL;
    for (int i = 0; i < n_prompts; i++) {
        newrllama_completion *r = &completions[i];
        if (r->finish_reason == NEWRLLAMA_FINISH_ERROR) {
            const char *why = r->error ? r->error : "generation failed";
            size_t len = strlen(why) + sizeof "[ERROR] ";
            texts[i] = malloc(len);
            if (texts[i]) snprintf(texts[i], len, "[ERROR] %s", why);
            if (!first_error) first_error = why;
            n_failed++;
        } else {
            texts[i] = r->text;
            r->text = NULL;
        }
        if (!texts[i]) {
            newrllama_free_string_array(texts, n_prompts);
            newrllama_free_completions(completions, n_prompts);
            return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
        }
    }
    if (n_failed) {
        rc = nr_fail(error_message, NEWRLLAMA_ERROR_PROMPT, "%d of %d prompts failed; first: %s", n_failed,
                     n_prompts, first_error);
    }
    newrllama_free_completions(completions, n_prompts);
    *results_out = texts;
    return rc;
}
