/* Step primitives: one batched decode-and-sample step with an exact rollback, and
 * sequence operations. A scheduler (the Python one, or the C driver in
 * newrllama_engine.c) owns the policy around them; samplers are newrllama_sampler.c's. */
#include <stdint.h>

#include "newrllama_internal.h"

/* ---- The step --------------------------------------------------------------- */

static bool check_scoring(const struct newrllama_context *c, const newrllama_slot *s, int32_t i,
                          const char **error_message) {
    if (s->n_score_rows == 0) return true;
    if (s->sampler || s->n_score_rows < 0 || s->n_score_rows > s->n_tokens || s->n_targets < 1 || !s->targets ||
        !s->target_rows || !s->logprobs) {
        nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                "slots[%d]: scoring needs no sampler, 1 <= n_score_rows <= n_tokens, n_targets >= 1, targets, "
                "target_rows and logprobs", i);
        return false;
    }
    if (!nr_tokens_in_vocab(c->model, s->targets, (size_t)s->n_targets, error_message)) return false;
    for (int32_t k = 0; k < s->n_targets; k++) {
        if (s->target_rows[k] < 0 || s->target_rows[k] >= s->n_score_rows) {
            nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                    "slots[%d]: target_rows[%d] = %d is outside [0, n_score_rows = %d)", i, k, s->target_rows[k],
                    s->n_score_rows);
            return false;
        }
    }
    return true;
}

static bool check_slots(const struct newrllama_context *c, const newrllama_slot *slots, int32_t n_slots,
                    const char **error_message) {
    if (n_slots < 1 || n_slots > c->n_seq_total) {
        nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "n_slots must be in [1, %d], got %d",
                c->n_seq_total, n_slots);
        return false;
    }
    bool seen[256] = {false}; /* n_seq_total <= 256 (context creation checks it) */
    int64_t total = 0;
    for (int32_t i = 0; i < n_slots; i++) {
        const newrllama_slot *s = &slots[i];
        if (s->seq_id < 0 || s->seq_id >= c->n_seq_total || seen[s->seq_id]) {
            nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                    "slots[%d]: seq_id %d is outside [0, %d) or used by another slot", i, s->seq_id, c->n_seq_total);
            return false;
        }
        seen[s->seq_id] = true;
        if (!s->tokens || s->n_tokens < 1 || s->pos < 0 || s->pos > INT32_MAX - s->n_tokens) {
            nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                    "slots[%d]: needs tokens, n_tokens >= 1 and pos >= 0 (got n_tokens %d, pos %d)", i,
                    s->n_tokens, s->pos);
            return false;
        }
        total += s->n_tokens;
        if (!nr_tokens_in_vocab(c->model, s->tokens, (size_t)s->n_tokens, error_message)) return false;
        if (!check_scoring(c, s, i, error_message)) return false;
    }
    if (total > c->n_batch) {
        nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                "the slots hold %lld tokens but a step holds at most n_batch = %d", (long long)total, c->n_batch);
        return false;
    }
    return true;
}

static bool batch_has_seq(const struct llama_batch *b, llama_seq_id seq) {
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->seq_id[i][0] == seq) return true;
    }
    return false;
}

/* llama_decode, unless the test hook says this decode fails. A fault aimed at one
 * sequence is persistent: it fails every decode holding that sequence until it has
 * failed its first attempt and then a decode of that sequence alone (the retry). */
static int32_t decode(struct newrllama_context *c, int32_t n_slots) {
    struct decode_fault *f = &c->fault;
    if (f->countdown > 0 && --f->countdown == 0) f->armed = true;
    if (f->armed) {
        if (f->seq_id < 0) {
            f->armed = false;
            return f->code;
        }
        if (batch_has_seq(&c->batch, f->seq_id)) {
            if (++f->n_fired >= 2 && n_slots == 1) f->armed = false;
            return f->code;
        }
    }
    return llama_decode(c->ctx, c->batch);
}

/* Plain greedy decoding reads the row directly: a sampler chain would first copy the
 * whole vocabulary (262k entries for gemma 3) into candidates, for every client and step. */
static llama_token argmax_row(const struct newrllama_context *c, int32_t batch_index) {
    return nr_row_argmax(llama_get_logits_ith(c->ctx, batch_index), c->model->n_vocab);
}

/* Fills a scoring slot's logprobs from the rows of its last n_score_rows tokens (batch rows first_row...).
 * Targets usually come grouped by row: a row's normaliser is kept while its targets follow. */
static void score(const struct newrllama_context *c, newrllama_slot *s, int32_t first_row) {
    int32_t norm_row = -1;
    double norm = 0.0;
    for (int32_t k = 0; k < s->n_targets; k++) {
        int32_t r = s->target_rows[k];
        const float *row = llama_get_logits_ith(c->ctx, first_row + r);
        if (r != norm_row) {
            norm = nr_log_sum_exp(row, c->model->n_vocab);
            norm_row = r;
        }
        s->logprobs[k] = (float)(row[s->targets[k]] - norm);
    }
}

/* Removes the step's tokens from a slot's sequence. A token decoded at position p
 * may reuse sliding-window cells older than p + 1 - n_swa of its own sequence; a
 * slot whose tokens lie after the first one of the step could so have overwritten
 * cells that the sequence still needs at `pos`. llama_memory_seq_rm reports success
 * either way, so such a sequence is cleared instead and the caller feeds it again. */
static newrllama_slot_status roll_back(struct newrllama_context *c, const newrllama_slot *s) {
    llama_memory_t mem = llama_get_memory(c->ctx);
    bool window_intact = c->n_swa == 0 || s->n_tokens == 1 || s->pos + s->n_tokens <= c->n_swa;
    if (window_intact && llama_memory_seq_rm(mem, s->seq_id, s->pos, -1) &&
        llama_memory_seq_pos_max(mem, s->seq_id) == s->pos - 1) {
        return NEWRLLAMA_SLOT_ROLLED_BACK;
    }
    llama_memory_seq_rm(mem, s->seq_id, -1, -1);
    return NEWRLLAMA_SLOT_CLEARED;
}

int32_t nr_step_locked(struct newrllama_context *c, newrllama_slot *slots, int32_t n_slots) {
    struct llama_batch *b = &c->batch;
    b->n_tokens = 0;
    for (int32_t i = 0; i < n_slots; i++) {
        newrllama_slot *s = &slots[i];
        for (int32_t k = 0; k < s->n_tokens; k++) {
            int32_t j = b->n_tokens++;
            b->token[j] = s->tokens[k];
            b->pos[j] = s->pos + k;
            b->n_seq_id[j] = 1;
            b->seq_id[j][0] = s->seq_id;
            b->logits[j] = (s->sampler != NULL && k == s->n_tokens - 1) || k >= s->n_tokens - s->n_score_rows;
        }
        s->token = -1;
        s->is_eog = false;
        s->status = NEWRLLAMA_SLOT_OK;
    }
    int32_t rc = decode(c, n_slots);
    if (rc != 0) {
        for (int32_t i = 0; i < n_slots; i++) slots[i].status = roll_back(c, &slots[i]);
        return rc;
    }
    int32_t end = 0;
    for (int32_t i = 0; i < n_slots; i++) {
        newrllama_slot *s = &slots[i];
        end += s->n_tokens;
        if (s->n_score_rows > 0) score(c, s, end - s->n_score_rows);
        if (!s->sampler) continue;
        if (s->sampler->grammar) {
            s->token = nr_sample_with_grammar(c, s->sampler, end - 1);
        } else {
            s->token = s->sampler->chain ? llama_sampler_sample(s->sampler->chain, c->ctx, end - 1) : argmax_row(c, end - 1);
        }
        s->is_eog = s->token < 0 || llama_vocab_is_eog(c->model->vocab, s->token);
    }
    return 0;
}

newrllama_error_code newrllama_step(newrllama_context_handle ctx, newrllama_slot *slots, int32_t n_slots,
                                    int32_t *decode_code_out, const char **error_message) {
    nr_clear_error(error_message);
    if (decode_code_out) *decode_code_out = 0;
    if (!ctx || !slots) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "ctx and slots must not be NULL");
    mtx_lock(&ctx->lock);
    newrllama_error_code result = NEWRLLAMA_OK;
    if (!check_slots(ctx, slots, n_slots, error_message)) {
        result = NEWRLLAMA_ERROR_INVALID_ARGUMENT;
    } else {
        int32_t rc = nr_step_locked(ctx, slots, n_slots);
        if (decode_code_out) *decode_code_out = rc;
        if (rc != 0) result = nr_fail(error_message, NEWRLLAMA_ERROR_DECODE, "llama_decode returned %d", rc);
    }
    mtx_unlock(&ctx->lock);
    return result;
}

/* ---- Sequence operations ---------------------------------------------------- */

static bool check_seq(const struct newrllama_context *c, int32_t seq_id, const char *name, const char **error_message) {
    if (seq_id >= 0 && seq_id < c->n_seq_total) return true;
    nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "%s must be in [0, %d), got %d", name, c->n_seq_total, seq_id);
    return false;
}

newrllama_error_code newrllama_seq_clear(newrllama_context_handle ctx, int32_t seq_id, const char **error_message) {
    nr_clear_error(error_message);
    if (!ctx) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    if (!check_seq(ctx, seq_id, "seq_id", error_message)) return NEWRLLAMA_ERROR_INVALID_ARGUMENT;
    mtx_lock(&ctx->lock);
    llama_memory_seq_rm(llama_get_memory(ctx->ctx), seq_id, -1, -1);
    mtx_unlock(&ctx->lock);
    return NEWRLLAMA_OK;
}

newrllama_error_code newrllama_seq_copy(newrllama_context_handle ctx, int32_t src, int32_t dst,
                                        int32_t n_tokens, const char **error_message) {
    nr_clear_error(error_message);
    if (!ctx) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    if (!check_seq(ctx, src, "src", error_message) || !check_seq(ctx, dst, "dst", error_message)) {
        return NEWRLLAMA_ERROR_INVALID_ARGUMENT;
    }
    if (src == dst) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "src and dst are both %d", src);
    mtx_lock(&ctx->lock);
    llama_memory_t mem = llama_get_memory(ctx->ctx);
    llama_memory_seq_rm(mem, dst, -1, -1);
    if (ctx->kv_unified) {
        llama_memory_seq_cp(mem, src, dst, n_tokens < 0 ? -1 : 0, n_tokens < 0 ? -1 : n_tokens);
    } else {
        /* Across streams llama.cpp copies whole buffers only (a range is an assertion). */
        llama_memory_seq_cp(mem, src, dst, -1, -1);
        if (n_tokens >= 0) llama_memory_seq_rm(mem, dst, n_tokens, -1);
    }
    mtx_unlock(&ctx->lock);
    return NEWRLLAMA_OK;
}

newrllama_error_code newrllama_seq_pos_range(newrllama_context_handle ctx, int32_t seq_id, int32_t *pos_min_out,
                                             int32_t *pos_max_out, const char **error_message) {
    nr_clear_error(error_message);
    if (!ctx || !pos_min_out || !pos_max_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "ctx, pos_min_out and pos_max_out must not be NULL");
    }
    if (!check_seq(ctx, seq_id, "seq_id", error_message)) return NEWRLLAMA_ERROR_INVALID_ARGUMENT;
    mtx_lock(&ctx->lock);
    llama_memory_t mem = llama_get_memory(ctx->ctx);
    *pos_min_out = llama_memory_seq_pos_min(mem, seq_id);
    *pos_max_out = llama_memory_seq_pos_max(mem, seq_id);
    mtx_unlock(&ctx->lock);
    return NEWRLLAMA_OK;
}
