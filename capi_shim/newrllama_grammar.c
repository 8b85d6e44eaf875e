/* Grammar-constrained sampling. llama.cpp's grammar sampler throws a C++ exception
 * (fatal through C) when it accepts a token it rejects, and aborts on an
 * end-of-generation token before the grammar is complete; applying it to gemma's
 * 262,144-token vocabulary costs tens of milliseconds. So the token is first picked
 * without the grammar and checked alone; only a rejected pick pays for the full
 * pass and is picked again, and only checked tokens are ever accepted. */
#include <math.h>
#include <stdlib.h>

#include "newrllama_internal.h"

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

newrllama_error_code newrllama_grammar_check(newrllama_model_handle model, const char *grammar,
                                             const char **error_message) {
    nr_clear_error(error_message);
    if (!model || !grammar) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "model and grammar must not be NULL");
    struct llama_sampler *g = llama_sampler_init_grammar(model->vocab, grammar, "root");
    if (!g) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "the grammar could not be parsed (GBNF with a rule named root; llama.cpp logs the place "
                       "with NEWRLLAMA_LOG_LEVEL=1 or more)");
    }
    llama_sampler_free(g);
    return NEWRLLAMA_OK;
}

newrllama_error_code newrllama_sampler_create_ex(newrllama_context_handle ctx, const newrllama_sampling_params *params,
                                                 uint32_t seed, const char *grammar,
                                                 newrllama_sampler_handle *sampler_out, const char **error_message) {
    newrllama_error_code rc = newrllama_sampler_create(ctx, params, seed, sampler_out, error_message);
    if (rc != NEWRLLAMA_OK || !grammar) return rc;
    struct newrllama_sampler *s = *sampler_out;
    s->grammar = llama_sampler_init_grammar(ctx->model->vocab, grammar, "root");
    if (!s->grammar) {
        nr_sampler_release(s);
        *sampler_out = NULL;
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "the grammar could not be parsed");
    }
    return NEWRLLAMA_OK;
}
