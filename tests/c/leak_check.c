/* Exercises the shim's C API end to end, error paths included, for
 * AddressSanitizer/LeakSanitizer: no invalid access and no leak may be reported.
 * Usage: leak_check MODEL.gguf SCRATCH_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "newrllama_capi.h"
#include "newrllama_internal.h"

static int failures = 0;

#define EXPECT(cond)                                                         \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static int cancel_on_second_step(int32_t n_done, int32_t n_total, int64_t n_gen, void *user_data) {
    int *steps = user_data;
    return ++*steps >= 2;
}

static void write_file(const char *path, const char *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(bytes, 1, n, f);
    fclose(f);
}

/* Rows for the whole-row passes: longer than gemma's vocabulary and not a multiple of the vector
 * width; values spread over 200 logits, far beyond the exponential's clamp at -87. */
enum { LONGEST_ROW = 262147 };

static void fill_spread_row(float *row, int32_t n) {
    for (int32_t t = 0; t < n; t++) row[t] = (float)((t * 7919) % 2003) / 10.0f - 150.0f;
}

/* The vectorised normaliser against exp() in double: lengths around the vector width and
 * the block, spreads far beyond the clamp at -87, a single element. */
static void log_sum_exp_accuracy(void) {
    const int32_t lengths[] = {1, 7, 8, 9, 4095, 4097, LONGEST_ROW};
    float *row = malloc(sizeof(float) * LONGEST_ROW);
    if (!row) return;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int32_t n = lengths[l];
        fill_spread_row(row, n);
        double max = row[0], sum = 0.0;
        for (int32_t t = 1; t < n; t++) max = row[t] > max ? row[t] : max;
        for (int32_t t = 0; t < n; t++) sum += exp((double)row[t] - max);
        EXPECT(fabs(nr_log_sum_exp(row, n) - (max + log(sum))) < 1e-5);
    }
    free(row);
}

/* The vectorised argmax against a scalar `>` loop: lengths around the vector width, ties (the
 * first wins), NaN (never wins), a maximum in the scalar tail, a row without a number. */
static void argmax_matches_scalar(void) {
    const int32_t lengths[] = {1, 7, 8, 9, 17, 4097, LONGEST_ROW};
    float *row = malloc(sizeof(float) * LONGEST_ROW);
    if (!row) return;
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        int32_t n = lengths[l];
        for (int variant = 0; variant < 4; variant++) {
            fill_spread_row(row, n);
            if (variant == 1) row[n / 2] = NAN;
            if (variant == 2) row[n - 1] = 1000.0f;
            if (variant == 3) {
                for (int32_t t = 0; t < n; t++) row[t] = 3.0f;
            }
            int32_t best = 0;
            while (best < n && isnan(row[best])) best++;
            if (best == n) best = 0;
            for (int32_t t = best + 1; t < n; t++) best = row[t] > row[best] ? t : best;
            EXPECT(nr_row_argmax(row, n) == best);
        }
    }
    for (int32_t t = 0; t < 9; t++) row[t] = NAN;
    EXPECT(nr_row_argmax(row, 9) == 0);
    free(row);
}

static void devices(void) {
    const char *err = NULL;
    newrllama_device_info info;
    int32_t n = newrllama_device_count();
    EXPECT(n >= 1);
    EXPECT(newrllama_device_get(0, &info, &err) == NEWRLLAMA_OK && info.name && info.backend && info.memory_total > 0);
    EXPECT(newrllama_device_get(n, &info, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT && err);
    EXPECT(newrllama_device_get(-1, &info, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    EXPECT(newrllama_device_get(0, NULL, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(newrllama_system_info(), "CPU") != NULL);
}

static void bad_model_files(const char *model_path, const char *dir) {
    newrllama_model_handle m = NULL;
    const char *err = NULL;
    EXPECT(newrllama_model_load(NULL, 0, true, false, &m, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    EXPECT(newrllama_model_load("/nonexistent.gguf", 0, true, false, &m, &err) == NEWRLLAMA_ERROR_MODEL_LOAD);
    char path[4096];
    snprintf(path, sizeof path, "%s/not_gguf.bin", dir);
    write_file(path, "hello world", 11);
    EXPECT(newrllama_model_load(path, 0, true, false, &m, &err) == NEWRLLAMA_ERROR_MODEL_LOAD);
    /* A truncated copy of the real model. */
    FILE *src = fopen(model_path, "rb");
    char *head = malloc(3000000);
    size_t got = src && head ? fread(head, 1, 3000000, src) : 0;
    if (src) fclose(src);
    snprintf(path, sizeof path, "%s/truncated.gguf", dir);
    write_file(path, head, got);
    free(head);
    EXPECT(newrllama_model_load(path, 0, true, false, &m, &err) == NEWRLLAMA_ERROR_MODEL_LOAD);
    EXPECT(m == NULL);
}

static void text_functions(newrllama_model_handle m) {
    const char *err = NULL;
    int32_t *tokens = NULL;
    size_t n = 0;
    const char *text = "<start_of_turn>user\nHello\xff\xfe";
    EXPECT(newrllama_tokenize(m, text, strlen(text), true, &tokens, &n, &err) == NEWRLLAMA_OK);
    char *back = NULL;
    EXPECT(newrllama_detokenize(m, tokens, n, &back, NULL, &err) == NEWRLLAMA_OK);
    newrllama_free_string(back);
    tokens[0] = -1;
    EXPECT(newrllama_detokenize(m, tokens, n, &back, NULL, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    newrllama_free_tokens(tokens);
    const char *roles[] = {"system", "user"};
    const char *contents[] = {"Be brief.", "Hi"};
    char *chat = NULL;
    EXPECT(newrllama_apply_chat_template(m, NULL, roles, contents, 2, true, &chat, &err) == NEWRLLAMA_OK);
    newrllama_free_string(chat);
    EXPECT(newrllama_apply_chat_template(m, "{{ nonsense", roles, contents, 2, true, &chat, &err) ==
           NEWRLLAMA_ERROR_TEMPLATE);
    const char *bad_roles[] = {"user", NULL};
    EXPECT(newrllama_apply_chat_template(m, NULL, bad_roles, contents, 2, true, &chat, &err) ==
           NEWRLLAMA_ERROR_INVALID_ARGUMENT);
}

/* The primitives a scheduler drives: samplers, steps (one that fails and is rolled
 * back, one refused), sequence operations. */
static void step_primitives(newrllama_context_handle ctx) {
    const char *err = NULL;
    newrllama_sampling_params sp = {.max_tokens = 1, .top_k = 40, .top_p = 0.9f, .temperature = 0.8f,
                                    .repeat_last_n = 8, .penalty_repeat = 1.1f, .seed = 3};
    newrllama_sampler_handle sampler = NULL;
    int32_t prompt[] = {2, 818, 5279, 529, 7001, 563};
    EXPECT(newrllama_sampler_create(ctx, &sp, newrllama_prompt_seed(3, prompt, 6, 0), &sampler, &err) == NEWRLLAMA_OK);
    newrllama_slot slots[2] = {{.seq_id = 0, .pos = 0, .tokens = prompt, .n_tokens = 6, .sampler = sampler},
                               {.seq_id = 1, .pos = 0, .tokens = prompt, .n_tokens = 3}};
    int32_t code = 0;
    EXPECT(newrllama_step(ctx, slots, 2, &code, &err) == NEWRLLAMA_OK && slots[0].token >= 0);
    int32_t next = slots[0].token;
    newrllama_slot more = {.seq_id = 0, .pos = 6, .tokens = &next, .n_tokens = 1, .sampler = sampler};
    EXPECT(newrllama_context_inject_decode_failure(ctx, 1, -1, -3, &err) == NEWRLLAMA_OK);
    EXPECT(newrllama_step(ctx, &more, 1, &code, &err) == NEWRLLAMA_ERROR_DECODE && code == -3);
    EXPECT(more.status == NEWRLLAMA_SLOT_ROLLED_BACK);
    EXPECT(newrllama_step(ctx, &more, 1, &code, &err) == NEWRLLAMA_OK);
    slots[1].seq_id = 0; /* two slots on one sequence: refused */
    EXPECT(newrllama_step(ctx, slots, 2, &code, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    EXPECT(newrllama_seq_copy(ctx, 0, 2, -1, &err) == NEWRLLAMA_OK);
    int32_t lo = 0, hi = 0;
    EXPECT(newrllama_seq_pos_range(ctx, 2, &lo, &hi, &err) == NEWRLLAMA_OK && lo == 0 && hi == 6);
    for (int32_t s = 0; s < 3; s++) EXPECT(newrllama_seq_clear(ctx, s, &err) == NEWRLLAMA_OK);
    newrllama_sampler_free(sampler);
    EXPECT(newrllama_sampler_create(ctx, NULL, 0, &sampler, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    EXPECT(newrllama_context_n_used_cells(ctx) == 0);
}

/* A grammar-constrained sampler (its checked and full passes) and a scoring slot. */
static void grammar_and_scoring(newrllama_model_handle m, newrllama_context_handle ctx) {
    const char *err = NULL;
    EXPECT(newrllama_grammar_check(m, "root ::= (", &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    EXPECT(newrllama_grammar_check(m, "root ::= [0-9]+", &err) == NEWRLLAMA_OK);
    newrllama_sampling_params sp = {.max_tokens = 4, .top_k = 40, .top_p = 1.0f, .penalty_repeat = 1.0f};
    newrllama_sampler_handle sampler = NULL;
    newrllama_grammar_handle grammar = NULL;
    EXPECT(newrllama_grammar_parse(m, "x ::= \"a\"", &grammar, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT && !grammar);
    EXPECT(newrllama_grammar_parse(m, "root ::= [0-9]+", &grammar, &err) == NEWRLLAMA_OK);
    EXPECT(newrllama_sampler_create_ex(ctx, &sp, 1, grammar, &sampler, &err) == NEWRLLAMA_OK);
    newrllama_grammar_free(grammar); /* the sampler holds its own copy */
    int32_t prompt[] = {2, 818, 5279, 529, 7001, 563};
    int32_t targets[] = {9079, 13706}, rows[] = {0, 0};
    float logprobs[2] = {0};
    newrllama_slot slots[2] = {{.seq_id = 0, .pos = 0, .tokens = prompt, .n_tokens = 6, .sampler = sampler},
                               {.seq_id = 1, .pos = 0, .tokens = prompt, .n_tokens = 6, .n_score_rows = 1,
                                .n_targets = 2, .targets = targets, .target_rows = rows, .logprobs = logprobs}};
    int32_t code = 0;
    EXPECT(newrllama_step(ctx, slots, 2, &code, &err) == NEWRLLAMA_OK && slots[0].token >= 0);
    EXPECT(logprobs[0] < 0.0f && logprobs[1] < 0.0f);
    rows[1] = 1; /* outside its one row */
    EXPECT(newrllama_step(ctx, &slots[1], 1, &code, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    for (int32_t s = 0; s < 2; s++) EXPECT(newrllama_seq_clear(ctx, s, &err) == NEWRLLAMA_OK);
    newrllama_sampler_free(sampler);
}

static void generation(newrllama_model_handle m) {
    const char *err = NULL;
    newrllama_context_handle ctx = NULL;
    EXPECT(newrllama_context_create(m, 100, 2, 300, 0, &ctx, &err) == NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    EXPECT(newrllama_context_create(m, 1024, 2, 4, 64, &ctx, &err) == NEWRLLAMA_OK);
    if (!ctx) return;

    int32_t prompt[] = {2, 818, 5279, 529, 7001, 563};
    char *out = NULL;
    EXPECT(newrllama_generate(ctx, prompt, 6, 4, 40, 1.0f, 0.0f, 0, 1.0f, 1, &out, &err) == NEWRLLAMA_OK);
    newrllama_free_string(out);
    EXPECT(newrllama_generate(ctx, prompt, 6, 0, 40, 1.0f, 0.0f, 0, 1.0f, 1, &out, &err) ==
           NEWRLLAMA_ERROR_INVALID_ARGUMENT);

    /* The original one-shot, with prompts that fail alone among valid ones. */
    char *long_prompt = malloc(20001);
    for (int i = 0; i < 20000; i++) long_prompt[i] = i % 5 == 4 ? ' ' : 'a';
    long_prompt[20000] = '\0';
    const char *prompts[] = {"The capital of France is", "", NULL, long_prompt, "1, 2, 3,", "Hello", "Once upon"};
    struct newrllama_parallel_params pp = {8, 40, 0.9f, 0.7f, 16, 1.1f, 7};
    char **texts = NULL;
    EXPECT(newrllama_generate_parallel(ctx, prompts, 7, &pp, &texts, &err) == NEWRLLAMA_ERROR_PROMPT);
    newrllama_free_string_array(texts, 7);
    free(long_prompt);

    /* Extended API: stop strings, per-prompt parameters, statistics. */
    const char *stops[] = {" 7", "\n"};
    newrllama_sampling_params params[2] = {
        {.max_tokens = 30, .top_k = 40, .top_p = 1.0f, .penalty_repeat = 1.0f, .seed = 1, .stop = stops, .n_stop = 2},
        {.max_tokens = 5, .top_k = 20, .top_p = 0.9f, .min_p = 0.05f, .temperature = 0.8f, .repeat_last_n = -1,
         .penalty_repeat = 1.2f, .seed = -1},
    };
    newrllama_prompt items[2] = {{.text = "1, 2, 3, 4,", .text_len = 11}, {.tokens = prompt, .n_tokens = 6}};
    newrllama_completion *results = NULL;
    newrllama_parallel_stats stats;
    EXPECT(newrllama_generate_parallel_ex(ctx, items, 2, params, 2, NULL, NULL, &results, &stats, &err) ==
           NEWRLLAMA_OK);
    newrllama_free_completions(results, 2);
    params[0].seed = (int64_t)1 << 40;
    EXPECT(newrllama_generate_parallel_ex(ctx, items, 2, params, 2, NULL, NULL, &results, &stats, &err) ==
           NEWRLLAMA_ERROR_INVALID_ARGUMENT);
    params[0].seed = 1;

    /* Cancellation from the progress callback. */
    int steps = 0;
    EXPECT(newrllama_generate_parallel_ex(ctx, items, 2, params, 1, cancel_on_second_step, &steps, &results,
                                          NULL, &err) == NEWRLLAMA_ERROR_CANCELLED);
    newrllama_free_completions(results, 2);

    /* Decode failures: one client's (isolated) and a transient one (fallback). */
    EXPECT(newrllama_context_inject_decode_failure(ctx, 2, 1, -3, &err) == NEWRLLAMA_OK);
    EXPECT(newrllama_generate_parallel_ex(ctx, items, 2, params, 1, NULL, NULL, &results, &stats, &err) ==
           NEWRLLAMA_OK);
    EXPECT(results && results[1].finish_reason == NEWRLLAMA_FINISH_ERROR && stats.n_fallbacks >= 1);
    newrllama_free_completions(results, 2);
    EXPECT(newrllama_context_inject_decode_failure(ctx, 2, -1, 1, &err) == NEWRLLAMA_OK);
    EXPECT(newrllama_generate_parallel_ex(ctx, items, 2, params, 1, NULL, NULL, &results, &stats, &err) ==
           NEWRLLAMA_OK);
    newrllama_free_completions(results, 2);
    EXPECT(newrllama_context_n_used_cells(ctx) == 0);

    step_primitives(ctx);
    grammar_and_scoring(m, ctx);

    /* The model is released first: the context keeps it alive until it is freed. */
    newrllama_model_free(m);
    EXPECT(newrllama_generate(ctx, prompt, 6, 2, 40, 1.0f, 0.0f, 0, 1.0f, 1, &out, &err) == NEWRLLAMA_OK);
    newrllama_free_string(out);
    newrllama_context_free(ctx);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    const char *err = NULL;
    newrllama_backend_init(&err);
    newrllama_set_log_level(0);
    log_sum_exp_accuracy();
    argmax_matches_scalar();
    devices();
    bad_model_files(argv[1], argv[2]);
    newrllama_model_handle m = NULL;
    if (newrllama_model_load(argv[1], 0, true, false, &m, &err) != NEWRLLAMA_OK) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], err);
        return 1;
    }
    text_functions(m);
    generation(m); /* frees the model */
    newrllama_backend_free();
    printf("leak_check: %d failed expectations\n", failures);
    return failures != 0;
}
