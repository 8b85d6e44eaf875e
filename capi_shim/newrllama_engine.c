/* The C driver of a whole generation call, over the step primitives of
 * newrllama_step.c: the one-shot functions (newrllama_generate*) run here, the
 * Python scheduler drives the same primitives with its own policy.
 *
 * Every prompt becomes a client on its own sequence with its own sampler. A
 * client's tokens are its prompt followed by what it generated; each step feeds
 * every client the tokens its sequence does not hold yet (generating clients
 * one, prefilling ones a chunk in the room left in n_batch) and samples the
 * clients that reached their last token. A finished client's sequence is
 * cleared and handed to the next prompt at once (continuous batching). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "newrllama_internal.h"

typedef struct client {
    int32_t index;             /* prompt index; -1 while the slot is free */
    int32_t seq;
    llama_token *tokens;       /* prompt, then generated tokens; n_ctx_seq + 1 of room */
    int32_t n_prompt;
    int32_t n_tokens;
    int32_t n_past;            /* tokens the sequence holds */
    struct newrllama_sampler *sampler;
    const newrllama_sampling_params *params;
    nr_buf text;
} client;

typedef struct seen_prompt {
    uint64_t hash;
    uint32_t count;
    bool used;
} seen_prompt;

typedef struct engine {
    struct newrllama_context *c;
    const newrllama_prompt *prompts;
    int32_t n_prompts;
    const newrllama_sampling_params *params;
    int32_t n_params;
    newrllama_completion *results;
    newrllama_parallel_stats *stats;
    client *clients;
    newrllama_slot *slots;
    client **slot_client;
    seen_prompt *seen;         /* open addressing over token hashes: repeats of identical prompts */
    size_t n_seen_cap;
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

static const newrllama_sampling_params *params_for(const engine *e, int32_t index) {
    return e->n_params == 1 ? &e->params[0] : &e->params[index];
}

/* How many prompts with these tokens came before this one in the call. */
static uint32_t count_repeat(engine *e, const llama_token *tokens, int32_t n) {
    uint64_t h = nr_tokens_hash(tokens, (size_t)n);
    size_t mask = e->n_seen_cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        seen_prompt *s = &e->seen[i];
        if (!s->used) {
            *s = (seen_prompt){.hash = h, .count = 1, .used = true};
            return 0;
        }
        if (s->hash == h) return s->count++;
    }
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

/* Ends a client: hands its text and generated tokens to the result, frees its
 * sampler and clears its sequence for the next prompt. */
static void finish_client(engine *e, client *cl, newrllama_finish_reason reason, const char *error) {
    newrllama_completion *r = &e->results[cl->index];
    int32_t n_gen = cl->n_tokens - cl->n_prompt;
    r->text = nr_buf_take(&cl->text);
    if (n_gen > 0) {
        r->token_ids = malloc((size_t)n_gen * sizeof *r->token_ids);
        if (r->token_ids) memcpy(r->token_ids, cl->tokens + cl->n_prompt, (size_t)n_gen * sizeof *r->token_ids);
        else e->out_of_memory = true;
    }
    r->n_token_ids = r->token_ids ? n_gen : 0;
    r->n_gen_tokens = n_gen;
    e->stats->n_prompt_tokens += cl->n_prompt;
    e->stats->n_gen_tokens += n_gen;
    set_result(e, cl->index, reason, error, cl->n_prompt);
    nr_sampler_release(cl->sampler);
    llama_memory_seq_rm(llama_get_memory(e->c->ctx), cl->seq, -1, -1);
    *cl = (client){.index = -1, .seq = cl->seq, .tokens = cl->tokens};
}

/* Copies or tokenizes prompt `index` into the client's buffer; false with the
 * prompt's error result set if it cannot run. */
static bool load_prompt(engine *e, client *cl, int32_t index) {
    const newrllama_prompt *p = &e->prompts[index];
    int32_t room = e->c->n_ctx_seq;
    int32_t n = 0;
    if (p->tokens) {
        const char *why = NULL;
        if (p->n_tokens > (size_t)INT32_MAX || !nr_tokens_in_vocab(e->c->model, p->tokens, p->n_tokens, &why)) {
            set_result(e, index, NEWRLLAMA_FINISH_ERROR, why ? why : "too many prompt tokens", 0);
            return false;
        }
        n = (int32_t)p->n_tokens;
        if (n < room) memcpy(cl->tokens, p->tokens, (size_t)n * sizeof *cl->tokens);
    } else {
        if (!p->text || p->text_len == 0) {
            set_result(e, index, NEWRLLAMA_FINISH_ERROR, p->text ? "prompt is empty" : "prompt is NULL", 0);
            return false;
        }
        llama_token *owned = NULL;
        const char *why = NULL;
        if (nr_tokenize(e->c->model, p->text, p->text_len, true, &owned, &n, &why) != NEWRLLAMA_OK) {
            set_result(e, index, NEWRLLAMA_FINISH_ERROR, why, 0);
            return false;
        }
        if (n < room) memcpy(cl->tokens, owned, (size_t)n * sizeof *cl->tokens);
        free(owned);
    }
    if (n == 0) {
        set_result(e, index, NEWRLLAMA_FINISH_ERROR, "prompt is empty after tokenization", 0);
        return false;
    }
    if (n >= room) {
        char message[256];
        snprintf(message, sizeof message,
                 "prompt has %d tokens but a sequence holds at most %d (n_ctx / n_seq_max) including "
                 "the answer; use a larger n_ctx or a smaller n_seq_max", n, room);
        set_result(e, index, NEWRLLAMA_FINISH_ERROR, message, n);
        return false;
    }
    cl->n_prompt = cl->n_tokens = n;
    return true;
}

/* Gives a free slot the next prompt that can run; prompts that cannot run get
 * their error result here, without touching the batch. */
static bool admit(engine *e, client *cl) {
    while (e->next_prompt < e->n_prompts) {
        int32_t index = e->next_prompt++;
        if (!load_prompt(e, cl, index)) continue;
        const newrllama_sampling_params *sp = params_for(e, index);
        uint32_t seed = newrllama_prompt_seed(sp->seed, cl->tokens, (size_t)cl->n_prompt,
                                              count_repeat(e, cl->tokens, cl->n_prompt));
        struct newrllama_sampler *sampler = NULL;
        if (nr_sampler_make(e->c, sp, seed, &sampler) != NEWRLLAMA_OK) {
            set_result(e, index, NEWRLLAMA_FINISH_ERROR, "cannot create a sampler", cl->n_prompt);
            continue;
        }
        llama_memory_seq_rm(llama_get_memory(e->c->ctx), cl->seq, -1, -1);
        cl->index = index;
        cl->n_past = 0;
        cl->sampler = sampler;
        cl->params = sp;
        return true;
    }
    return false;
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

static void on_token(engine *e, client *cl, llama_token token, bool is_eog) {
    if (is_eog) {
        finish_client(e, cl, NEWRLLAMA_FINISH_STOP, NULL);
        return;
    }
    size_t before = cl->text.len;
    cl->tokens[cl->n_tokens++] = token;
    if (!nr_append_piece(e->c->model, token, &cl->text)) {
        e->out_of_memory = true;
        finish_client(e, cl, NEWRLLAMA_FINISH_ERROR, "out of memory");
        return;
    }
    e->n_gen_total++;
    if (cut_at_stop(cl, cl->text.len - before)) {
        finish_client(e, cl, NEWRLLAMA_FINISH_STOP, NULL);
    } else if (cl->n_tokens - cl->n_prompt >= cl->params->max_tokens || cl->n_tokens - 1 >= e->c->n_ctx_seq) {
        finish_client(e, cl, NEWRLLAMA_FINISH_LENGTH, NULL);
    }
}

/* The client's next tokens, at most `room` of them, as a slot. */
static int32_t fill_slot(newrllama_slot *s, const client *cl, int32_t room) {
    int32_t left = cl->n_tokens - cl->n_past;
    int32_t n = left < room ? left : room;
    *s = (newrllama_slot){.seq_id = cl->seq, .pos = cl->n_past, .tokens = cl->tokens + cl->n_past, .n_tokens = n,
                          .sampler = n == left ? cl->sampler : NULL};
    return n;
}

/* One step: generating clients first (one token each), then prefill chunks in the
 * room left in n_batch. Returns the number of slots. */
static int32_t build_step(engine *e, bool *has_prompt_tokens) {
    int32_t n = 0, room = e->c->n_batch;
    *has_prompt_tokens = false;
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t s = 0; s < e->c->n_seq_max && room > 0; s++) {
            client *cl = &e->clients[s];
            if (cl->index < 0 || (cl->n_tokens - cl->n_past == 1) != (pass == 0)) continue;
            if (pass == 1) *has_prompt_tokens = true;
            e->slot_client[n] = cl;
            room -= fill_slot(&e->slots[n++], cl, room);
        }
    }
    return n;
}

/* A batched step failed and was rolled back: decode each of its clients alone up to
 * its next output, so that only a client that cannot proceed on its own fails. */
static void decode_one_by_one(engine *e, int32_t n_slots, int32_t failed_code) {
    e->stats->n_fallbacks++;
    for (int32_t i = 0; i < n_slots; i++) {
        client *cl = e->slot_client[i];
        if (e->slots[i].status == NEWRLLAMA_SLOT_CLEARED) cl->n_past = 0;
    }
    for (int32_t i = 0; i < n_slots; i++) {
        client *cl = e->slot_client[i];
        newrllama_slot alone;
        do {
            int32_t fed = fill_slot(&alone, cl, e->c->n_batch);
            e->stats->n_decode_calls++;
            int32_t rc = nr_step_locked(e->c, &alone, 1);
            if (rc != 0) {
                char message[160];
                snprintf(message, sizeof message,
                         "llama_decode failed for this prompt (code %d; batched decode code %d)", rc, failed_code);
                finish_client(e, cl, NEWRLLAMA_FINISH_ERROR, message);
                break;
            }
            cl->n_past += fed;
        } while (!alone.sampler);
        if (cl->index >= 0) on_token(e, cl, alone.token, alone.is_eog);
    }
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

static newrllama_error_code run_loop(engine *e, newrllama_progress_callback progress, void *user_data) {
    for (;;) {
        for (int32_t s = 0; s < e->c->n_seq_max; s++) {
            if (e->clients[s].index < 0) admit(e, &e->clients[s]);
        }
        bool has_prompt_tokens;
        int32_t n_slots = build_step(e, &has_prompt_tokens);
        if (n_slots == 0) return NEWRLLAMA_OK;
        double t0 = now_seconds();
        e->stats->n_decode_calls++;
        int32_t rc = nr_step_locked(e->c, e->slots, n_slots);
        if (rc == 0) {
            for (int32_t i = 0; i < n_slots; i++) {
                client *cl = e->slot_client[i];
                cl->n_past += e->slots[i].n_tokens;
                if (e->slots[i].sampler) on_token(e, cl, e->slots[i].token, e->slots[i].is_eog);
            }
        } else {
            decode_one_by_one(e, n_slots, rc);
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

static bool sequences_in_use(const struct newrllama_context *c) {
    llama_memory_t mem = llama_get_memory(c->ctx);
    for (int32_t s = 0; s < c->n_seq_total; s++) {
        if (llama_memory_seq_pos_max(mem, s) >= 0) return true;
    }
    return false;
}

static bool engine_alloc(engine *e) {
    int32_t n_seq = e->c->n_seq_max;
    e->clients = calloc((size_t)n_seq, sizeof *e->clients);
    e->slots = calloc((size_t)n_seq, sizeof *e->slots);
    e->slot_client = calloc((size_t)n_seq, sizeof *e->slot_client);
    e->n_seen_cap = 16;
    while (e->n_seen_cap < 2 * (size_t)e->n_prompts) e->n_seen_cap *= 2;
    e->seen = calloc(e->n_seen_cap, sizeof *e->seen);
    if (!e->clients || !e->slots || !e->slot_client || !e->seen) return false;
    for (int32_t s = 0; s < n_seq; s++) {
        e->clients[s] = (client){.index = -1, .seq = s};
        e->clients[s].tokens = malloc(((size_t)e->c->n_ctx_seq + 1) * sizeof *e->clients[s].tokens);
        if (!e->clients[s].tokens) return false;
    }
    return true;
}

static void engine_free(engine *e) {
    if (e->clients) {
        for (int32_t s = 0; s < e->c->n_seq_max; s++) {
            client *cl = &e->clients[s];
            if (cl->index >= 0) finish_client(e, cl, NEWRLLAMA_FINISH_CANCELLED, "cancelled");
            free(cl->tokens);
        }
    }
    free(e->clients);
    free(e->slots);
    free(e->slot_client);
    free(e->seen);
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
    newrllama_error_code rc;
    bool ran = false;
    if (sequences_in_use(c)) {
        rc = nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                     "the context's sequences are in use by another caller (a running scheduler or its "
                     "prefix cache); run the one-shot functions on a context of their own");
    } else if (!engine_alloc(&e)) {
        rc = nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    } else {
        ran = true;
        rc = run_loop(&e, progress, user_data);
        if (rc == NEWRLLAMA_ERROR_CANCELLED) nr_fail(error_message, rc, "generation was cancelled");
        else if (e.out_of_memory) rc = nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    engine_free(&e);
    if (ran) {
        /* Nothing of this call stays behind. */
        llama_memory_t mem = llama_get_memory(c->ctx);
        for (int32_t s = 0; s < c->n_seq_max; s++) llama_memory_seq_rm(mem, s, -1, -1);
        c->fault = (struct decode_fault){0};
    }
    mtx_unlock(&c->lock);
    stats->t_total_s = now_seconds() - t_start;
    stats->tokens_per_second = stats->t_total_s > 0 ? (double)stats->n_gen_tokens / stats->t_total_s : 0.0;
    return rc;
}
