/* Contexts: creation with checked sizes, introspection, the decode-fault test hook. */
#include <stdlib.h>
#include <unistd.h>

#include "newrllama_internal.h"

/* llama.cpp's own ceiling on sequences per context (LLAMA_MAX_SEQ). */
#define NR_MAX_SEQ 256
#define NR_MAX_CTX (1 << 20)

newrllama_error_code newrllama_context_create(newrllama_model_handle model, int n_ctx, int n_threads,
                                              int n_seq_max, int n_batch,
                                              newrllama_context_handle *context_out,
                                              const char **error_message) {
    return newrllama_context_create_ex(model, n_ctx, n_threads, n_seq_max, n_batch, 0, 0, 1, context_out, error_message);
}

newrllama_error_code newrllama_context_create_ex(newrllama_model_handle model, int n_ctx, int n_threads,
                                                 int n_seq_max, int n_batch, int n_seq_extra, int kv_unified,
                                                 int batch_invariant, newrllama_context_handle *context_out,
                                                 const char **error_message) {
    nr_clear_error(error_message);
    if (!context_out) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "context_out is NULL");
    *context_out = NULL;
    if (!model) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "model is NULL");
    if (n_seq_max < 1 || n_seq_max > NR_MAX_SEQ) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_seq_max must be in [1, %d], got %d", NR_MAX_SEQ, n_seq_max);
    }
    if (n_ctx < 16 * n_seq_max || n_ctx > NR_MAX_CTX) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_ctx must be in [16 * n_seq_max, %d] = [%d, %d], got %d", NR_MAX_CTX,
                       16 * n_seq_max, NR_MAX_CTX, n_ctx);
    }
    if (n_seq_extra < 0 || n_seq_extra > NR_MAX_SEQ - n_seq_max) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_seq_extra must be in [0, %d - n_seq_max] = [0, %d], got %d", NR_MAX_SEQ,
                       NR_MAX_SEQ - n_seq_max, n_seq_extra);
    }
    if (n_threads < 0 || n_threads > 1024) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_threads must be in [0, 1024] (0 = all cores), got %d", n_threads);
    }
    if (n_batch == 0) n_batch = n_ctx < 512 ? n_ctx : 512;
    if (n_batch < n_seq_max || n_batch > n_ctx) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_batch must be in [n_seq_max, n_ctx] = [%d, %d] (0 = default), got %d",
                       n_seq_max, n_ctx, n_batch);
    }
    if (n_seq_max + n_seq_extra > n_batch) {
        /* llama.cpp sizes its output buffer for max(n_batch, sequences) rows and asserts otherwise. */
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_seq_max + n_seq_extra (%d + %d) must not exceed n_batch (%d)", n_seq_max, n_seq_extra, n_batch);
    }
    if (n_threads == 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = cores > 0 ? (int)cores : 1;
    }

    if (kv_unified != 0 && kv_unified != 1) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "kv_unified must be 0 or 1, got %d", kv_unified);
    }
    if (batch_invariant != 0 && batch_invariant != 1) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "batch_invariant must be 0 or 1, got %d",
                       batch_invariant);
    }

    /* The budget per sequence is what a non-unified cache would give (llama.cpp pads it to
     * 256 cells). The unified cache holds the budgets of the n_seq_max sequences, and cached
     * prefixes live in the room that sequences sharing them do not use; split, every
     * sequence (the extra ones too) has a stream of that budget. */
    int32_t n_ctx_seq = (n_ctx / n_seq_max + 255) / 256 * 256;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx_seq * (uint32_t)(kv_unified ? n_seq_max : n_seq_max + n_seq_extra);
    cp.n_batch = (uint32_t)n_batch;
    cp.n_ubatch = (uint32_t)n_batch;
    cp.n_seq_max = (uint32_t)(n_seq_max + n_seq_extra);
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    /* Unified: one stream for every sequence, so a step whose sequences carry different numbers
     * of tokens is one pass and a copied sequence shares cells, any range of them. But each
     * token's attention then scans the mask of every cell in use, every sequence's: prefill of
     * many distinct long prompts runs slower than over a stream per sequence (llama-server's
     * layout), where a step is one pass per distinct token count and a copy moves a whole stream
     * (docs/benchmarks.md, "One KV stream or one per sequence"). */
    cp.kv_unified = kv_unified == 1;
    if (batch_invariant) {
        /* Flash attention's tiled and split paths take f16 (or f32) cells only (see the header). */
        cp.type_k = GGML_TYPE_BF16;
        cp.type_v = GGML_TYPE_BF16;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
        /* A GPU build otherwise runs a large step's matmuls of weights kept on the CPU on the GPU, whose kernels
         * pick tiles by batch size: with n_gpu_layers=0 on an H200, 9 of 32 answers came back the same from four
         * threads as from one call (bench/results/gpu). No effect on a CPU build. */
        cp.op_offload = false;
    }

    struct newrllama_context *c = calloc(1, sizeof *c);
    if (!c) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    if (mtx_init(&c->lock, mtx_plain) != thrd_success) {
        free(c);
        return nr_fail(error_message, NEWRLLAMA_ERROR_CONTEXT_CREATE, "cannot create the context lock");
    }
    c->ctx = llama_init_from_model(model->model, cp);
    if (!c->ctx) {
        mtx_destroy(&c->lock);
        free(c);
        return nr_fail(error_message, NEWRLLAMA_ERROR_CONTEXT_CREATE,
                       "llama.cpp could not create a context (n_ctx=%d, n_seq_max=%d, n_batch=%d)",
                       n_ctx, n_seq_max, n_batch);
    }
    c->n_batch = (int32_t)llama_n_batch(c->ctx);
    c->batch = llama_batch_init(c->n_batch, 0, 1);
    c->candidates = malloc((size_t)model->n_vocab * sizeof *c->candidates);
    if (!c->batch.token || !c->candidates) {
        free(c->candidates);
        llama_batch_free(c->batch);
        llama_free(c->ctx);
        mtx_destroy(&c->lock);
        free(c);
        return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    atomic_fetch_add(&model->refs, 1);
    c->model = model;
    c->n_ctx = n_ctx_seq * n_seq_max;
    c->kv_unified = kv_unified == 1;
    c->batch_invariant = batch_invariant == 1;
    c->n_ctx_seq = n_ctx_seq;
    c->n_seq_max = n_seq_max;
    c->n_seq_total = n_seq_max + n_seq_extra;
    c->n_swa = llama_model_n_swa(model->model);
    *context_out = c;
    return NEWRLLAMA_OK;
}

void newrllama_context_free(newrllama_context_handle ctx) {
    if (!ctx) return;
    /* Wait for a call in progress on another thread to end. */
    mtx_lock(&ctx->lock);
    mtx_unlock(&ctx->lock);
    llama_batch_free(ctx->batch);
    free(ctx->candidates);
    llama_free(ctx->ctx);
    nr_model_release(ctx->model);
    mtx_destroy(&ctx->lock);
    free(ctx);
}

int32_t newrllama_context_n_ctx(newrllama_context_handle ctx) { return ctx ? ctx->n_ctx : -1; }
int32_t newrllama_context_n_ctx_seq(newrllama_context_handle ctx) { return ctx ? ctx->n_ctx_seq : -1; }
int32_t newrllama_context_n_batch(newrllama_context_handle ctx) { return ctx ? ctx->n_batch : -1; }
int32_t newrllama_context_n_seq_max(newrllama_context_handle ctx) { return ctx ? ctx->n_seq_max : -1; }
int32_t newrllama_context_n_seq_extra(newrllama_context_handle ctx) {
    return ctx ? ctx->n_seq_total - ctx->n_seq_max : -1;
}
int32_t newrllama_context_n_seq_cache(newrllama_context_handle ctx) { return newrllama_context_n_seq_extra(ctx); }
int32_t newrllama_context_n_swa(newrllama_context_handle ctx) { return ctx ? ctx->n_swa : -1; }
int32_t newrllama_context_kv_unified(newrllama_context_handle ctx) { return ctx ? ctx->kv_unified : -1; }
int32_t newrllama_context_batch_invariant(newrllama_context_handle ctx) { return ctx ? ctx->batch_invariant : -1; }

int32_t newrllama_context_n_used_cells(newrllama_context_handle ctx) {
    if (!ctx) return -1;
    mtx_lock(&ctx->lock);
    llama_memory_t mem = llama_get_memory(ctx->ctx);
    int32_t used = 0;
    for (int32_t s = 0; s < ctx->n_seq_max; s++) {
        llama_pos lo = llama_memory_seq_pos_min(mem, s);
        llama_pos hi = llama_memory_seq_pos_max(mem, s);
        if (hi >= 0 && lo >= 0) used += hi - lo + 1;
    }
    mtx_unlock(&ctx->lock);
    return used;
}

newrllama_error_code newrllama_context_inject_decode_failure(newrllama_context_handle ctx,
                                                            int32_t after_n_decodes, int32_t seq_id,
                                                            int32_t code, const char **error_message) {
    nr_clear_error(error_message);
    if (!ctx) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "context is NULL");
    if (after_n_decodes < 1 || seq_id < -1 || seq_id >= ctx->n_seq_total || code == 0) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "need after_n_decodes >= 1, -1 <= seq_id < n_seq_max + n_seq_extra and a nonzero code");
    }
    mtx_lock(&ctx->lock);
    ctx->fault = (struct decode_fault){.countdown = after_n_decodes, .armed = false, .seq_id = seq_id, .code = code};
    mtx_unlock(&ctx->lock);
    return NEWRLLAMA_OK;
}
