/* Per-prompt samplers and seeds, and sampling under a grammar.
 *
 * Grammar-constrained sampling: llama.cpp's grammar sampler throws a C++ exception
 * (fatal through C) when it accepts a token it rejects, and aborts on an
 * end-of-generation token before the grammar is complete; applying it to gemma's
 * 262,144-token vocabulary tests every token against the grammar. So the token is first picked
 * without the grammar and checked alone; only a rejected pick pays for the full
 * pass and is picked again, and only checked tokens are ever accepted. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "newrllama_internal.h"

newrllama_error_code nr_check_sampling(const newrllama_sampling_params *p, const char **error_message) {
    if (p->max_tokens < 1) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "max_tokens must be >= 1, got %d", p->max_tokens);
    }
    if (p->top_k < 0) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "top_k must be >= 0, got %d", p->top_k);
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "top_p must be in [0, 1], got %g", p->top_p);
    }
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "min_p must be in [0, 1], got %g", p->min_p);
    }
    if (!(p->temperature >= 0.0f) || isinf(p->temperature)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "temperature must be a finite number >= 0, got %g", p->temperature);
    }
    if (p->repeat_last_n < -1) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "repeat_last_n must be >= -1, got %d", p->repeat_last_n);
    }
    if (!(p->penalty_repeat > 0.0f) || isinf(p->penalty_repeat)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "penalty_repeat must be a finite number > 0, got %g", p->penalty_repeat);
    }
    if (p->seed < -1 || p->seed > (int64_t)UINT32_MAX) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "seed must be -1 (random) or in [0, %u], got %lld", UINT32_MAX, (long long)p->seed);
    }
    if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "stop is NULL but n_stop is %d", p->n_stop);
    }
    for (int32_t i = 0; i < p->n_stop; i++) {
        if (!p->stop[i] || !p->stop[i][0]) {
            return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "stop string %d is NULL or empty", i);
        }
    }
    return NEWRLLAMA_OK;
}

static bool is_plain_greedy(const newrllama_sampling_params *p) {
    return p->temperature <= 0.0f && (p->repeat_last_n == 0 || p->penalty_repeat == 1.0f);
}

newrllama_error_code nr_sampler_make(const struct newrllama_context *c, const newrllama_sampling_params *p,
                                     uint32_t seed, struct newrllama_sampler **out) {
    struct newrllama_sampler *s = calloc(1, sizeof *s);
    if (!s) return NEWRLLAMA_ERROR_OUT_OF_MEMORY;
    if (is_plain_greedy(p)) {
        *out = s;
        return NEWRLLAMA_OK;
    }
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (!chain) {
        free(s);
        return NEWRLLAMA_ERROR_OUT_OF_MEMORY;
    }
    if (p->repeat_last_n != 0 && p->penalty_repeat != 1.0f) {
        int32_t last_n = p->repeat_last_n < 0 ? c->n_ctx_seq : p->repeat_last_n;
        llama_sampler_chain_add(chain, llama_sampler_init_penalties(c->model->n_vocab, last_n, p->penalty_repeat, 0.0f, 0.0f));
    }
    if (p->temperature <= 0.0f) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
    } else {
        if (p->top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p->top_k));
        if (p->top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p->top_p, 1));
        if (p->min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p->min_p, 1));
        llama_sampler_chain_add(chain, llama_sampler_init_temp(p->temperature));
        llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
    }
    s->chain = chain;
    *out = s;
    return NEWRLLAMA_OK;
}

void nr_sampler_release(struct newrllama_sampler *s) {
    if (!s) return;
    llama_sampler_free(s->chain);
    llama_sampler_free(s->grammar);
    free(s);
}

newrllama_error_code newrllama_sampler_create(newrllama_context_handle ctx, const newrllama_sampling_params *params,
                                              uint32_t seed, newrllama_sampler_handle *sampler_out,
                                              const char **error_message) {
    nr_clear_error(error_message);
    if (!ctx || !params || !sampler_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "ctx, params and sampler_out must not be NULL");
    }
    *sampler_out = NULL;
    newrllama_error_code rc = nr_check_sampling(params, error_message);
    if (rc != NEWRLLAMA_OK) return rc;
    if (nr_sampler_make(ctx, params, seed, sampler_out) != NEWRLLAMA_OK) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    return NEWRLLAMA_OK;
}

void newrllama_sampler_free(newrllama_sampler_handle sampler) { nr_sampler_release(sampler); }

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t nr_tokens_hash(const int32_t *tokens, size_t n_tokens) {
    uint64_t h = 0x632BE59BD9B4E019ull ^ n_tokens;
    for (size_t i = 0; tokens && i < n_tokens; i++) h = mix64(h ^ (uint32_t)tokens[i]) + 0x9E3779B97F4A7C15ull;
    return h;
}

uint32_t newrllama_prompt_seed(int64_t seed, const int32_t *tokens, size_t n_tokens, uint32_t repeat) {
    if (seed < 0) return LLAMA_DEFAULT_SEED;
    uint64_t h = mix64((uint64_t)seed * 0x9E3779B97F4A7C15ull ^ nr_tokens_hash(tokens, n_tokens));
    h = mix64(h ^ ((uint64_t)repeat * 0xD6E8FEB86659FD93ull));
    uint32_t s = (uint32_t)(h >> 32);
    return s == LLAMA_DEFAULT_SEED ? s - 1 : s;
}

newrllama_error_code newrllama_sampler_create_ex(newrllama_context_handle ctx, const newrllama_sampling_params *params,
                                                 uint32_t seed, newrllama_grammar_handle grammar,
                                                 newrllama_sampler_handle *sampler_out, const char **error_message) {
    newrllama_error_code rc = newrllama_sampler_create(ctx, params, seed, sampler_out, error_message);
    if (rc != NEWRLLAMA_OK || !grammar) return rc;
    struct newrllama_sampler *s = *sampler_out;
    s->grammar = llama_sampler_clone(grammar->parsed);
    if (!s->grammar) {
        nr_sampler_release(s);
        *sampler_out = NULL;
        return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    return NEWRLLAMA_OK;
}

static void fill_candidates(const struct newrllama_context *c, const float *row) {
    for (int32_t t = 0; t < c->model->n_vocab; t++) c->candidates[t] = (llama_token_data){t, row[t], 0.0f};
}

/* The chain's pick, or the argmax without a chain; -1 if every candidate is masked out. */
static llama_token pick(const struct newrllama_context *c, struct llama_sampler *chain) {
    llama_token_data_array cur = {c->candidates, (size_t)c->model->n_vocab, -1, false};
    if (chain) {
        llama_sampler_apply(chain, &cur);
        return cur.selected >= 0 && isfinite(cur.data[cur.selected].logit) ? cur.data[cur.selected].id : -1;
    }
    llama_token best = -1;
    float best_logit = -INFINITY;
    for (size_t i = 0; i < cur.size; i++) {
        if (cur.data[i].logit > best_logit) {
            best_logit = cur.data[i].logit;
            best = cur.data[i].id;
        }
    }
    return best;
}

static bool grammar_allows(struct llama_sampler *grammar, llama_token token, float logit) {
    llama_token_data one = {token, logit, 0.0f};
    llama_token_data_array single = {&one, 1, -1, false};
    llama_sampler_apply(grammar, &single);
    return isfinite(one.logit);
}

llama_token nr_sample_with_grammar(struct newrllama_context *c, struct newrllama_sampler *s, int32_t batch_index) {
    const float *row = llama_get_logits_ith(c->ctx, batch_index);
    fill_candidates(c, row);
    llama_token token = pick(c, s->chain);
    if (token < 0 || !grammar_allows(s->grammar, token, row[token])) {
        fill_candidates(c, row);
        llama_token_data_array cur = {c->candidates, (size_t)c->model->n_vocab, -1, false};
        llama_sampler_apply(s->grammar, &cur);
        token = pick(c, s->chain);
        if (token < 0) return -1;
    }
    if (s->chain) llama_sampler_accept(s->chain, token);
    /* An end-of-generation token passed the check only if the grammar is complete; it ends the answer. */
    if (!llama_vocab_is_eog(c->model->vocab, token)) llama_sampler_accept(s->grammar, token);
    return token;
}
