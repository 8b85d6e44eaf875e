/* The generation engine: continuous batching of many prompts over one context.
 *
 * Every prompt becomes a client on its own sequence id with its own sampler
 * chain and positions. Each step packs the pending token of every generating
 * client and prefill chunks of admitted prompts into one llama_decode; each
 * client then samples from the output row of its own last token. A finished
 * client's sequence is cleared and handed to the next prompt at once. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "newrllama_internal.h"

typedef struct client {
    int32_t index;              /* prompt index; -1 while the slot is free */
    llama_seq_id seq;
    llama_token *owned_prompt;  /* tokens the engine tokenized itself */
    const llama_token *prompt;
    int32_t n_prompt;
    int32_t n_fed;              /* prompt tokens already decoded */
    llama_pos pos;              /* position of the next token to decode */
    llama_token pending;        /* sampled token not yet decoded; -1 if none */
    struct llama_sampler *sampler; /* NULL for plain greedy decoding, which needs no state */
    const newrllama_sampling_params *params;
    nr_buf text;
    int32_t *gen;
    int32_t n_gen;
    int32_t cap_gen;
    /* This step's share of the batch, and the state before it, for rollback. */
    int32_t span_start;
    int32_t span_len;
    bool span_output;
    llama_pos step_pos;
    int32_t step_fed;
    llama_token step_pending;
} client;

typedef struct engine {
    struct newrllama_context *c;
    llama_memory_t mem;
    const newrllama_prompt *prompts;
    int32_t n_prompts;
    const newrllama_sampling_params *params;
    int32_t n_params;
    newrllama_completion *results;
    newrllama_parallel_stats *stats;
    client *clients;
    struct llama_batch batch;
    int32_t next_prompt;
    int32_t n_done;
    int64_t n_gen_total;
    bool out_of_memory;
} engine;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Distinct, reproducible seeds per prompt: identical prompts at temperature > 0
 * must not draw identical samples. */
static uint32_t derive_seed(int64_t seed, int32_t index) {
    if (seed < 0) return LLAMA_DEFAULT_SEED;
    uint64_t z = (uint64_t)seed * 0x9E3779B97F4A7C15ull + (uint64_t)index + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    uint32_t s = (uint32_t)z;
    return s == LLAMA_DEFAULT_SEED ? s - 1 : s;
}

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
    if (p->seed > (int64_t)UINT32_MAX) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "seed must fit in 32 bits (negative = random), got %lld", (long long)p->seed);
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

static struct llama_sampler *make_sampler(const engine *e, const newrllama_sampling_params *p, int32_t index) {
    struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (!chain) return NULL;
    if (p->repeat_last_n != 0 && p->penalty_repeat != 1.0f) {
        int32_t last_n = p->repeat_last_n < 0 ? e->c->n_ctx_seq : p->repeat_last_n;
        llama_sampler_chain_add(chain, llama_sampler_init_penalties(e->c->model->n_vocab, last_n, p->penalty_repeat, 0.0f, 0.0f));
    }
    if (p->temperature <= 0.0f) {
        llama_sampler_chain_add(chain, llama_sampler_init_greedy());
        return chain;
    }
    if (p->top_k > 0) llama_sampler_chain_add(chain, llama_sampler_init_top_k(p->top_k));
    if (p->top_p < 1.0f) llama_sampler_chain_add(chain, llama_sampler_init_top_p(p->top_p, 1));
    if (p->min_p > 0.0f) llama_sampler_chain_add(chain, llama_sampler_init_min_p(p->min_p, 1));
    llama_sampler_chain_add(chain, llama_sampler_init_temp(p->temperature));
    llama_sampler_chain_add(chain, llama_sampler_init_dist(derive_seed(p->seed, index)));
    return chain;
}

static const newrllama_sampling_params *params_for(const engine *e, int32_t index) {
    return e->n_params == 1 ? &e->params[0] : &e->params[index];
}

static void set_result(engine *e, int32_t index, newrllama_finish_reason reason, const char *error,
                       int32_t n_prompt_tokens) {
    newrllama_completion *r = &e->results[index];
    r->finish_reason = reason;
    r->n_prompt_tokens = n_prompt_tokens;
    if (!r->text) r->text = nr_strdup("");
    if (error) r->error = nr_strdup(error);
    if (!r->text || (error && !r->error)) e->out_of_memory = true;
    if (reason == NEWRLLAMA_FINISH_ERROR) e->stats->n_failed++;
    e->n_done++;
}

/* Ends a client: hands its text and tokens to the result, frees its sampler and
 * clears its sequence so the next prompt starts from an empty one. */
static void finish_client(engine *e, client *cl, newrllama_finish_reason reason, const char *error) {
    newrllama_completion *r = &e->results[cl->index];
    r->text = nr_buf_take(&cl->text);
    r->token_ids = cl->gen;
    r->n_token_ids = cl->n_gen;
    r->n_gen_tokens = cl->n_gen;
    e->stats->n_prompt_tokens += cl->n_prompt;
    e->stats->n_gen_tokens += cl->n_gen;
    set_result(e, cl->index, reason, error, cl->n_prompt);
    cl->gen = NULL;
    llama_sampler_free(cl->sampler);
    free(cl->owned_prompt);
    llama_memory_seq_rm(e->mem, cl->seq, -1, -1);
    llama_seq_id seq = cl->seq;
    *cl = (client){.index = -1, .seq = seq, .pending = -1};
}

/* Gives a free slot the next prompt that can run; prompts that cannot run get
 * their error result here, without touching the batch. */
static bool admit(engine *e, client *cl) {
    char message[512];
    while (e->next_prompt < e->n_prompts) {
        int32_t index = e->next_prompt++;
        const newrllama_prompt *p = &e->prompts[index];
        llama_token *owned = NULL;
        const llama_token *tokens = p->tokens;
        int32_t n = 0;
        if (tokens) {
            const char *why = NULL;
            if (p->n_tokens > (size_t)INT32_MAX || !nr_tokens_in_vocab(e->c->model, tokens, p->n_tokens, &why)) {
                set_result(e, index, NEWRLLAMA_FINISH_ERROR, why ? why : "too many prompt tokens", 0);
                continue;
            }
            n = (int32_t)p->n_tokens;
        } else {
            if (!p->text || p->text_len == 0) {
                set_result(e, index, NEWRLLAMA_FINISH_ERROR, p->text ? "prompt is empty" : "prompt is NULL", 0);
                continue;
            }
            const char *why = NULL;
            if (nr_tokenize(e->c->model, p->text, p->text_len, true, &owned, &n, &why) != NEWRLLAMA_OK) {
                set_result(e, index, NEWRLLAMA_FINISH_ERROR, why, 0);
                continue;
            }
            tokens = owned;
        }
        if (n == 0) {
            free(owned);
            set_result(e, index, NEWRLLAMA_FINISH_ERROR, "prompt is empty after tokenization", 0);
            continue;
        }
        if (n >= e->c->n_ctx_seq) {
            free(owned);
            snprintf(message, sizeof message,
                     "prompt has %d tokens but a sequence holds at most %d (n_ctx / n_seq_max) including "
                     "the answer; use a larger n_ctx or a smaller n_seq_max", n, e->c->n_ctx_seq);
            set_result(e, index, NEWRLLAMA_FINISH_ERROR, message, n);
            continue;
        }
        const newrllama_sampling_params *sp = params_for(e, index);
        struct llama_sampler *sampler = is_plain_greedy(sp) ? NULL : make_sampler(e, sp, index);
        if (!sampler && !is_plain_greedy(sp)) {
            free(owned);
            set_result(e, index, NEWRLLAMA_FINISH_ERROR, "cannot create a sampler", n);
            continue;
        }
        llama_memory_seq_rm(e->mem, cl->seq, -1, -1);
        *cl = (client){.index = index, .seq = cl->seq, .owned_prompt = owned, .prompt = tokens,
                       .n_prompt = n, .pending = -1, .sampler = sampler, .params = sp};
        return true;
    }
    return false;
}

static void batch_add(struct llama_batch *b, llama_token token, llama_pos pos, llama_seq_id seq, bool output) {
    int32_t i = b->n_tokens++;
    b->token[i] = token;
    b->pos[i] = pos;
    b->n_seq_id[i] = 1;
    b->seq_id[i][0] = seq;
    b->logits[i] = output;
}

/* Puts the client's next tokens (its pending token, or a prefill chunk of at
 * most `budget` tokens) into the batch and advances its state. */
static int32_t add_client_span(engine *e, client *cl, int32_t budget) {
    struct llama_batch *b = &e->batch;
    cl->step_pos = cl->pos;
    cl->step_fed = cl->n_fed;
    cl->step_pending = cl->pending;
    cl->span_start = b->n_tokens;
    cl->span_len = 0;
    cl->span_output = false;
    if (budget <= 0) return 0;
    if (cl->pending >= 0) {
        batch_add(b, cl->pending, cl->pos++, cl->seq, true);
        cl->pending = -1;
        cl->span_len = 1;
        cl->span_output = true;
        return 1;
    }
    int32_t left = cl->n_prompt - cl->n_fed;
    int32_t chunk = left < budget ? left : budget;
    for (int32_t k = 0; k < chunk; k++) {
        bool last = cl->n_fed + 1 == cl->n_prompt;
        batch_add(b, cl->prompt[cl->n_fed++], cl->pos++, cl->seq, last);
        cl->span_output = last;
    }
    cl->span_len = chunk;
    return chunk;
}

static void rollback_client(engine *e, client *cl) {
    if (!llama_memory_seq_rm(e->mem, cl->seq, cl->step_pos, -1)) {
        /* A partial removal is impossible for this memory type: start the prompt over. */
        llama_memory_seq_rm(e->mem, cl->seq, -1, -1);
        cl->step_pos = 0;
        cl->step_fed = 0;
        cl->step_pending = -1;
        cl->n_gen = 0;
        cl->text.len = 0;
        if (cl->text.data) cl->text.data[0] = '\0';
        if (cl->sampler) llama_sampler_reset(cl->sampler);
    }
    cl->pos = cl->step_pos;
    cl->n_fed = cl->step_fed;
    cl->pending = cl->step_pending;
}

static bool batch_has_seq(const struct llama_batch *b, llama_seq_id seq) {
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->seq_id[i][0] == seq) return true;
    }
    return false;
}

static int32_t decode(engine *e) {
    struct decode_fault *f = &e->c->fault;
    e->stats->n_decode_calls++;
    if (f->countdown > 0 && --f->countdown == 0) f->armed = true;
    if (f->armed) {
        if (f->seq_id < 0) {
            f->armed = false;
            return f->code;
        }
        if (batch_has_seq(&e->batch, f->seq_id)) return f->code;
    }
    return llama_decode(e->c->ctx, e->batch);
}

static bool push_gen_token(client *cl, llama_token token) {
    if (cl->n_gen == cl->cap_gen) {
        int32_t cap = cl->cap_gen ? cl->cap_gen * 2 : 32;
        int32_t *grown = realloc(cl->gen, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        cl->gen = grown;
        cl->cap_gen = cap;
    }
    cl->gen[cl->n_gen++] = token;
    return true;
}

/* Cuts the text at the earliest stop string that the newest piece completed. */
static bool cut_at_stop(client *cl, size_t piece_len) {
    const newrllama_sampling_params *p = cl->params;
    size_t best = SIZE_MAX;
    for (int32_t i = 0; i < p->n_stop; i++) {
        size_t slen = strlen(p->stop[i]);
        if (slen > cl->text.len) continue;
        size_t reach = piece_len + slen - 1;
        size_t from = cl->text.len > reach ? cl->text.len - reach : 0;
        for (size_t at = from; at + slen <= cl->text.len && at < best; at++) {
            if (memcmp(cl->text.data + at, p->stop[i], slen) == 0) {
                best = at;
                break;
            }
        }
    }
    if (best == SIZE_MAX) return false;
    cl->text.len = best;
    cl->text.data[best] = '\0';
    return true;
}

/* Plain greedy decoding reads the row directly: a sampler chain would first copy the
 * whole vocabulary (262k entries for gemma 3) into candidates, for every client and step. */
static llama_token argmax_row(const engine *e, int32_t batch_index) {
    const float *logits = llama_get_logits_ith(e->c->ctx, batch_index);
    llama_token best = 0;
    for (int32_t t = 1; t < e->c->model->n_vocab; t++) {
        if (logits[t] > logits[best]) best = t;
    }
    return best;
}

static void sample_client(engine *e, client *cl, int32_t batch_index) {
    llama_token token = cl->sampler ? llama_sampler_sample(cl->sampler, e->c->ctx, batch_index)
                                    : argmax_row(e, batch_index);
    if (llama_vocab_is_eog(e->c->model->vocab, token)) {
        finish_client(e, cl, NEWRLLAMA_FINISH_STOP, NULL);
        return;
    }
    size_t before = cl->text.len;
    if (!push_gen_token(cl, token) || !nr_append_piece(e->c->model, token, &cl->text)) {
        e->out_of_memory = true;
        finish_client(e, cl, NEWRLLAMA_FINISH_ERROR, "out of memory");
        return;
    }
    e->n_gen_total++;
    if (cut_at_stop(cl, cl->text.len - before)) {
        finish_client(e, cl, NEWRLLAMA_FINISH_STOP, NULL);
    } else if (cl->n_gen >= cl->params->max_tokens || cl->pos >= e->c->n_ctx_seq) {
        finish_client(e, cl, NEWRLLAMA_FINISH_LENGTH, NULL);
    } else {
        cl->pending = token;
    }
}

/* A unified decode failed: undo it and decode client by client, so that only
 * a client that cannot proceed on its own fails. */
static void decode_one_by_one(engine *e, int32_t failed_code) {
    int32_t n_seq = e->c->n_seq_max;
    e->stats->n_fallbacks++;
    for (int32_t s = 0; s < n_seq; s++) {
        client *cl = &e->clients[s];
        if (cl->index >= 0 && cl->span_len > 0) rollback_client(e, cl);
    }
    for (int32_t s = 0; s < n_seq; s++) {
        client *cl = &e->clients[s];
        if (cl->index < 0 || cl->span_len == 0) continue;
        int32_t budget = cl->span_len;
        e->batch.n_tokens = 0;
        add_client_span(e, cl, budget);
        int32_t rc = decode(e);
        if (rc == 0) {
            if (cl->span_output) sample_client(e, cl, e->batch.n_tokens - 1);
            continue;
        }
        char message[160];
        snprintf(message, sizeof message, "llama_decode failed for this prompt (code %d; batched decode code %d)",
                 rc, failed_code);
        if (e->c->fault.armed && e->c->fault.seq_id == cl->seq) e->c->fault.armed = false;
        finish_client(e, cl, NEWRLLAMA_FINISH_ERROR, message);
    }
}

/* Packs one step: generating clients first (one token each), then prefill
 * chunks in the remaining room of n_batch. */
static bool build_batch(engine *e, bool *has_prompt_tokens) {
    e->batch.n_tokens = 0;
    *has_prompt_tokens = false;
    int32_t room = e->c->n_batch;
    for (int32_t s = 0; s < e->c->n_seq_max; s++) {
        client *cl = &e->clients[s];
        cl->span_len = 0;
        cl->span_output = false;
        if (cl->index >= 0 && cl->pending >= 0) room -= add_client_span(e, cl, 1);
    }
    for (int32_t s = 0; s < e->c->n_seq_max; s++) {
        client *cl = &e->clients[s];
        if (cl->index < 0 || cl->pending >= 0 || cl->span_len > 0 || cl->n_fed == cl->n_prompt) continue;
        int32_t added = add_client_span(e, cl, room);
        room -= added;
        if (added) *has_prompt_tokens = true;
    }
    return e->batch.n_tokens > 0;
}

static void cancel_all(engine *e) {
    for (int32_t s = 0; s < e->c->n_seq_max; s++) {
        client *cl = &e->clients[s];
        if (cl->index >= 0) finish_client(e, cl, NEWRLLAMA_FINISH_CANCELLED, "cancelled");
    }
    while (e->next_prompt < e->n_prompts) {
        set_result(e, e->next_prompt++, NEWRLLAMA_FINISH_CANCELLED, "cancelled", 0);
    }
}

static bool any_active(const engine *e) {
    for (int32_t s = 0; s < e->c->n_seq_max; s++) {
        if (e->clients[s].index >= 0) return true;
    }
    return false;
}

static newrllama_error_code run_loop(engine *e, newrllama_progress_callback progress, void *user_data) {
    for (;;) {
        for (int32_t s = 0; s < e->c->n_seq_max; s++) {
            if (e->clients[s].index < 0) admit(e, &e->clients[s]);
        }
        if (!any_active(e)) return NEWRLLAMA_OK;
        bool has_prompt_tokens;
        if (!build_batch(e, &has_prompt_tokens)) {
            /* Unreachable while every active client has a token to feed; guard against looping forever. */
            cancel_all(e);
            return NEWRLLAMA_ERROR_DECODE;
        }
        double t0 = now_seconds();
        int32_t rc = decode(e);
        if (rc == 0) {
            for (int32_t s = 0; s < e->c->n_seq_max; s++) {
                client *cl = &e->clients[s];
                if (cl->index >= 0 && cl->span_output) sample_client(e, cl, cl->span_start + cl->span_len - 1);
            }
        } else {
            decode_one_by_one(e, rc);
        }
        double dt = now_seconds() - t0;
        if (has_prompt_tokens) e->stats->t_prompt_s += dt;
        else e->stats->t_gen_s += dt;
        if (progress && progress(e->n_done, e->n_prompts, e->n_gen_total, user_data) != 0) {
            cancel_all(e);
            return NEWRLLAMA_ERROR_CANCELLED;
        }
    }
}

newrllama_error_code nr_engine_run(struct newrllama_context *c, const newrllama_prompt *prompts, int32_t n_prompts,
                                   const newrllama_sampling_params *params, int32_t n_params,
                                   newrllama_progress_callback progress, void *user_data,
                                   newrllama_completion *results, newrllama_parallel_stats *stats,
                                   const char **error_message) {
    double t_start = now_seconds();
    *stats = (newrllama_parallel_stats){0};
    engine e = {.c = c, .prompts = prompts, .n_prompts = n_prompts, .params = params, .n_params = n_params,
                .results = results, .stats = stats};
    mtx_lock(&c->lock);
    e.mem = llama_get_memory(c->ctx);
    e.clients = calloc((size_t)c->n_seq_max, sizeof *e.clients);
    e.batch = llama_batch_init(c->n_batch, 0, 1);
    newrllama_error_code rc;
    if (!e.clients || !e.batch.token) {
        rc = nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    } else {
        for (int32_t s = 0; s < c->n_seq_max; s++) e.clients[s] = (client){.index = -1, .seq = s, .pending = -1};
        rc = run_loop(&e, progress, user_data);
        if (rc == NEWRLLAMA_ERROR_CANCELLED) nr_fail(error_message, rc, "generation was cancelled");
        else if (rc == NEWRLLAMA_ERROR_DECODE) nr_fail(error_message, rc, "internal error: empty batch");
        else if (e.out_of_memory) rc = nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    /* Nothing of this call stays behind: free samplers and every sequence's cells. */
    if (e.clients) {
        for (int32_t s = 0; s < c->n_seq_max; s++) {
            if (e.clients[s].index >= 0) finish_client(&e, &e.clients[s], NEWRLLAMA_FINISH_CANCELLED, "cancelled");
        }
    }
    for (int32_t s = 0; s < c->n_seq_max; s++) llama_memory_seq_rm(e.mem, s, -1, -1);
    c->fault = (struct decode_fault){0};
    llama_batch_free(e.batch);
    free(e.clients);
    mtx_unlock(&c->lock);
    stats->t_total_s = now_seconds() - t_start;
    stats->tokens_per_second = stats->t_total_s > 0 ? (double)stats->n_gen_tokens / stats->t_total_s : 0.0;
    return rc;
}
