/*
 * newrllama C API: a thin, checked layer over llama.cpp's C API (llama.h).
 *
 * Conventions shared by every function:
 *  - Functions that can fail return a newrllama_error_code and take a last
 *    argument `const char **error_message`. On failure it points to a message
 *    owned by the calling thread, valid until that thread's next newrllama call.
 *    Passing NULL for error_message is allowed.
 *  - Strings and arrays handed out by the API are owned by the caller and are
 *    released with the matching newrllama_free_* function.
 *  - A context must be used by one thread at a time; the API serialises calls
 *    on one context with a per-context lock, so concurrent calls wait.
 *  - Two ways to generate: the one-shot functions (newrllama_generate*) run a
 *    whole call in C; the step primitives (newrllama_step and the sampler and
 *    sequence functions) let a scheduler in another language own the policy
 *    while C does the per-token work of each step. The one-shot functions are
 *    a C driver over the same primitives.
 */
#ifndef NEWRLLAMA_CAPI_H
#define NEWRLLAMA_CAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEWRLLAMA_API __attribute__((visibility("default")))

typedef enum newrllama_error_code {
    NEWRLLAMA_OK = 0,
    NEWRLLAMA_ERROR_INVALID_ARGUMENT = 1,
    NEWRLLAMA_ERROR_MODEL_LOAD = 2,
    NEWRLLAMA_ERROR_CONTEXT_CREATE = 3,
    NEWRLLAMA_ERROR_TOKENIZE = 4,
    NEWRLLAMA_ERROR_TEMPLATE = 5,
    NEWRLLAMA_ERROR_DECODE = 6,
    NEWRLLAMA_ERROR_OUT_OF_MEMORY = 7,
    NEWRLLAMA_ERROR_CANCELLED = 8,
    NEWRLLAMA_ERROR_PROMPT = 9
} newrllama_error_code;

typedef enum newrllama_finish_reason {
    NEWRLLAMA_FINISH_STOP = 0,
    NEWRLLAMA_FINISH_LENGTH = 1,
    NEWRLLAMA_FINISH_ERROR = 2,
    NEWRLLAMA_FINISH_CANCELLED = 3
} newrllama_finish_reason;

typedef struct newrllama_model *newrllama_model_handle;
typedef struct newrllama_context *newrllama_context_handle;

/* Sampling parameters of the original API, shared by every prompt. */
struct newrllama_parallel_params {
    int max_tokens;
    int top_k;
    float top_p;
    float temperature;
    int repeat_last_n;
    float penalty_repeat;
    int32_t seed;
};

/* Per-prompt sampling parameters of the extended API. */
typedef struct newrllama_sampling_params {
    int32_t max_tokens;      /* >= 1; generation also ends when the sequence's context is full */
    int32_t top_k;           /* 0 disables */
    float top_p;             /* in [0, 1]; 1 disables */
    float min_p;             /* in [0, 1]; 0 disables */
    float temperature;       /* >= 0; 0 is greedy */
    int32_t repeat_last_n;   /* >= -1; 0 disables, -1 is the whole context */
    float penalty_repeat;    /* > 0; 1 disables */
    int64_t seed;            /* -1: random; otherwise (0 to UINT32_MAX) mixed with the prompt's tokens (newrllama_prompt_seed) */
    const char *const *stop; /* stop strings, excluded from the text; may be NULL */
    int32_t n_stop;
} newrllama_sampling_params;

/* A prompt for the extended API: text (text_len bytes, may hold NUL bytes;
 * tokenized with special tokens parsed) or, when tokens is not NULL, tokens. */
typedef struct newrllama_prompt {
    const char *text;
    size_t text_len;
    const int32_t *tokens;
    size_t n_tokens;
} newrllama_prompt;

typedef struct newrllama_completion {
    char *text;              /* generated text (never NULL on success paths) */
    int32_t *token_ids;      /* generated tokens, end-of-generation token excluded */
    int32_t n_token_ids;
    int32_t n_prompt_tokens;
    int32_t n_gen_tokens;
    newrllama_finish_reason finish_reason;
    char *error;             /* NULL unless finish_reason is ERROR or CANCELLED */
} newrllama_completion;

typedef struct newrllama_parallel_stats {
    int64_t n_prompt_tokens;
    int64_t n_gen_tokens;
    double t_prompt_s;       /* time of decode steps that carried prompt tokens */
    double t_gen_s;          /* time of decode steps that carried only generated tokens */
    double t_total_s;        /* wall time of the whole call */
    double tokens_per_second;/* generated tokens / t_total_s */
    int32_t n_decode_calls;
    int32_t n_fallbacks;     /* unified decodes that failed and were retried client by client */
    int32_t n_failed;        /* prompts whose result is an error */
} newrllama_parallel_stats;

/* Called after every decode step; returning nonzero cancels the call.
 * Unfinished prompts then end with finish_reason CANCELLED. */
typedef int (*newrllama_progress_callback)(int32_t n_done, int32_t n_total,
                                           int64_t n_gen_tokens, void *user_data);

/* Library identity, for checking that the libllama loaded is the one built against. */
NEWRLLAMA_API const char *newrllama_llama_version(void);
NEWRLLAMA_API const char *newrllama_llama_library_path(void);
NEWRLLAMA_API void newrllama_set_log_level(int level); /* 0 silent, 1 errors, 2 warnings, 3 all */

/* What the build can run on. Device kinds follow ggml's device types. */
enum {
    NEWRLLAMA_DEVICE_CPU = 0,
    NEWRLLAMA_DEVICE_GPU = 1,
    NEWRLLAMA_DEVICE_IGPU = 2,
    NEWRLLAMA_DEVICE_ACCEL = 3,
    NEWRLLAMA_DEVICE_OTHER = 4
};

typedef struct {
    const char *name;        /* owned by ggml, valid for the life of the process */
    const char *description;
    const char *backend;     /* the backend that provides the device: "CPU", "CUDA", "Vulkan" ... */
    int32_t kind;            /* NEWRLLAMA_DEVICE_* */
    uint64_t memory_free;    /* bytes */
    uint64_t memory_total;
} newrllama_device_info;

NEWRLLAMA_API bool newrllama_supports_gpu_offload(void);
NEWRLLAMA_API const char *newrllama_system_info(void); /* llama.cpp's line of CPU features, owned by it */
NEWRLLAMA_API int32_t newrllama_device_count(void);
NEWRLLAMA_API newrllama_error_code newrllama_device_get(int32_t index, newrllama_device_info *info_out,
                                                        const char **error_message);

NEWRLLAMA_API newrllama_error_code newrllama_backend_init(const char **error_message);
NEWRLLAMA_API void newrllama_backend_free(void);

NEWRLLAMA_API newrllama_error_code newrllama_model_load(const char *model_path, int n_gpu_layers,
                                                        bool use_mmap, bool use_mlock,
                                                        newrllama_model_handle *model_out,
                                                        const char **error_message);
NEWRLLAMA_API void newrllama_model_free(newrllama_model_handle model);
NEWRLLAMA_API int32_t newrllama_model_n_vocab(newrllama_model_handle model);
NEWRLLAMA_API int32_t newrllama_model_n_ctx_train(newrllama_model_handle model);
NEWRLLAMA_API newrllama_error_code newrllama_model_desc(newrllama_model_handle model, char **desc_out,
                                                        const char **error_message);

NEWRLLAMA_API newrllama_error_code newrllama_context_create(newrllama_model_handle model, int n_ctx,
                                                            int n_threads, int n_seq_max, int n_batch,
                                                            newrllama_context_handle *context_out,
                                                            const char **error_message);
/* As newrllama_context_create, plus n_seq_extra sequences (ids n_seq_max .. n_seq_max +
 * n_seq_extra - 1) beyond the prompts', for the caller's own policy: newrllama's scheduler keeps
 * cached prompt prefixes in some and scratch work (label paths) in the others. Each of the n_seq_max sequences has n_ctx_seq = n_ctx / n_seq_max cells of budget,
 * which callers enforce.
 * kv_unified = 0 (newrllama_context_create's choice): a stream of n_ctx_seq cells per
 * sequence, as llama-server keeps its slots: attention reads the sequence's own cells only, a
 * step is one pass per run of consecutive sequence ids with as many tokens, and a copy moves
 * a whole stream (at the next decode). kv_unified = 1: one KV stream for all sequences, so a
 * sequence copied from another shares its cells (any first n of them), but each token's
 * attention scans every cell in use, and its sums depend on where its cells sit.
 * batch_invariant = 1 (newrllama_context_create's choice) keeps K and V in bf16: llama.cpp's
 * CPU flash attention then attends every query over its sequence's cells one by one, whatever
 * the step, where with f16 cells it takes a piece of 64 tokens or more tile by tile and splits
 * the cells of a lone token between the threads, each rounding otherwise (by how a prompt was
 * cut into pieces, by which sequences share the pass). Over a stream per sequence a token's
 * numbers then depend on nothing but its sequence. batch_invariant = 0: f16 cells, llama.cpp's
 * default and its fastest prefill of long prompts. */
NEWRLLAMA_API newrllama_error_code newrllama_context_create_ex(newrllama_model_handle model, int n_ctx,
                                                               int n_threads, int n_seq_max, int n_batch,
                                                               int n_seq_extra, int kv_unified, int batch_invariant,
                                                               newrllama_context_handle *context_out,
                                                               const char **error_message);
NEWRLLAMA_API void newrllama_context_free(newrllama_context_handle ctx);
NEWRLLAMA_API int32_t newrllama_context_n_ctx(newrllama_context_handle ctx);
NEWRLLAMA_API int32_t newrllama_context_n_ctx_seq(newrllama_context_handle ctx);
NEWRLLAMA_API int32_t newrllama_context_n_batch(newrllama_context_handle ctx);
NEWRLLAMA_API int32_t newrllama_context_n_seq_max(newrllama_context_handle ctx);
/* The n_seq_extra sequences beyond the prompts' (cached prefixes and scratch alike). */
NEWRLLAMA_API int32_t newrllama_context_n_seq_extra(newrllama_context_handle ctx);
/* Deprecated: the same number as newrllama_context_n_seq_extra, under a name that counted only cached prefixes. */
NEWRLLAMA_API int32_t newrllama_context_n_seq_cache(newrllama_context_handle ctx);
/* The model's sliding-window size (0 if it has none). */
NEWRLLAMA_API int32_t newrllama_context_n_swa(newrllama_context_handle ctx);
/* 1 if the KV cache is one stream for all sequences, 0 if a stream per sequence. */
NEWRLLAMA_API int32_t newrllama_context_kv_unified(newrllama_context_handle ctx);
/* 1 if the context was made batch-invariant (bf16 KV cells), 0 if not. */
NEWRLLAMA_API int32_t newrllama_context_batch_invariant(newrllama_context_handle ctx);
/* Cells held by the n_seq_max prompt sequences (not the cache sequences): 0 between calls. */
NEWRLLAMA_API int32_t newrllama_context_n_used_cells(newrllama_context_handle ctx);
/* Test hook: the n-th llama_decode from now (1-based) fails as if llama.cpp
 * returned `code` for batches containing sequence `seq_id` (-1: any batch). */
NEWRLLAMA_API newrllama_error_code newrllama_context_inject_decode_failure(newrllama_context_handle ctx,
                                                                          int32_t after_n_decodes,
                                                                          int32_t seq_id, int32_t code,
                                                                          const char **error_message);

/* Control tokens written as text (e.g. "<start_of_turn>") are parsed as control tokens. */
NEWRLLAMA_API newrllama_error_code newrllama_tokenize(newrllama_model_handle model, const char *text,
                                                      size_t text_len, bool add_special,
                                                      int32_t **tokens_out, size_t *n_tokens_out,
                                                      const char **error_message);
NEWRLLAMA_API newrllama_error_code newrllama_detokenize(newrllama_model_handle model,
                                                        const int32_t *tokens, size_t n_tokens,
                                                        char **text_out, size_t *text_len_out,
                                                        const char **error_message);
/* tmpl NULL: the model's built-in template. */
NEWRLLAMA_API newrllama_error_code newrllama_apply_chat_template(newrllama_model_handle model,
                                                                 const char *tmpl,
                                                                 const char *const *roles,
                                                                 const char *const *contents,
                                                                 size_t n_messages, bool add_assistant,
                                                                 char **result_out,
                                                                 const char **error_message);

NEWRLLAMA_API int32_t newrllama_token_bos(newrllama_model_handle model);
NEWRLLAMA_API int32_t newrllama_token_eos(newrllama_model_handle model);
NEWRLLAMA_API int32_t newrllama_token_eot(newrllama_model_handle model);
NEWRLLAMA_API int32_t newrllama_token_nl(newrllama_model_handle model);
NEWRLLAMA_API int32_t newrllama_token_pad(newrllama_model_handle model);
NEWRLLAMA_API int32_t newrllama_token_sep(newrllama_model_handle model);
NEWRLLAMA_API bool newrllama_token_is_eog(newrllama_model_handle model, int32_t token);
NEWRLLAMA_API bool newrllama_token_is_control(newrllama_model_handle model, int32_t token);
/* Owned by the model; NULL for an id outside the vocabulary. */
NEWRLLAMA_API const char *newrllama_token_get_text(newrllama_model_handle model, int32_t token);

/* One prompt given as tokens; max_tokens counts tokens. */
NEWRLLAMA_API newrllama_error_code newrllama_generate(newrllama_context_handle ctx, const int32_t *tokens,
                                                      size_t n_tokens, int max_tokens, int top_k,
                                                      float top_p, float temperature, int repeat_last_n,
                                                      float penalty_repeat, int32_t seed,
                                                      char **result_out, const char **error_message);

/* Many prompts in one batched decode loop. results_out receives n_prompts strings
 * in input order (free with newrllama_free_string_array). A prompt that failed
 * gets "[ERROR] <message>" while the others complete; the call then returns
 * NEWRLLAMA_ERROR_PROMPT with a summary in error_message, and results_out is
 * still filled. */
NEWRLLAMA_API newrllama_error_code newrllama_generate_parallel(newrllama_context_handle ctx,
                                                               const char **prompts, int n_prompts,
                                                               const struct newrllama_parallel_params *params,
                                                               char ***results_out,
                                                               const char **error_message);

/* Extended form: per-prompt parameters (an array of n_params, which is 1 or
 * n_prompts), per-prompt results (free with newrllama_free_completions),
 * statistics (may be NULL) and a progress callback that can cancel (may be NULL;
 * it must not call into the same context). A cancelled call returns
 * NEWRLLAMA_ERROR_CANCELLED with results_out filled. */
NEWRLLAMA_API newrllama_error_code newrllama_generate_parallel_ex(
    newrllama_context_handle ctx, const newrllama_prompt *prompts, int32_t n_prompts, const newrllama_sampling_params *params, int32_t n_params,
    newrllama_progress_callback progress, void *user_data, newrllama_completion **results_out,
    newrllama_parallel_stats *stats_out, const char **error_message);

/* ---- Step primitives ------------------------------------------------------ */

/* A client's sampler: the sampling fields of newrllama_sampling_params; stop
 * strings and max_tokens are the caller's policy. It has its own random stream. */
typedef struct newrllama_sampler *newrllama_sampler_handle;

/* seed: the stream's seed (see newrllama_prompt_seed); ignored when greedy. */
NEWRLLAMA_API newrllama_error_code newrllama_sampler_create(newrllama_context_handle ctx,
                                                            const newrllama_sampling_params *params,
                                                            uint32_t seed, newrllama_sampler_handle *sampler_out,
                                                            const char **error_message);
NEWRLLAMA_API void newrllama_sampler_free(newrllama_sampler_handle sampler);
/* A GBNF grammar (rule root) parsed once for a model's vocabulary: each sampler it constrains starts from a
 * copy, so many prompts under one grammar parse it once. Free it after the model's last use of it (the
 * samplers made from it hold their own copies). */
typedef struct newrllama_grammar *newrllama_grammar_handle;
NEWRLLAMA_API newrllama_error_code newrllama_grammar_parse(newrllama_model_handle model, const char *grammar,
                                                           newrllama_grammar_handle *grammar_out,
                                                           const char **error_message);
NEWRLLAMA_API void newrllama_grammar_free(newrllama_grammar_handle grammar);
/* As newrllama_sampler_create, constrained by a parsed grammar (NULL: none).
 * A token is checked against the grammar before it is accepted, so no grammar can
 * abort the process; where the grammar allows no token, the slot's token is -1. */
NEWRLLAMA_API newrllama_error_code newrllama_sampler_create_ex(newrllama_context_handle ctx,
                                                               const newrllama_sampling_params *params,
                                                               uint32_t seed, newrllama_grammar_handle grammar,
                                                               newrllama_sampler_handle *sampler_out,
                                                               const char **error_message);
/* NEWRLLAMA_OK if grammar parses as GBNF with a rule named root for this model's vocabulary. */
NEWRLLAMA_API newrllama_error_code newrllama_grammar_check(newrllama_model_handle model, const char *grammar,
                                                           const char **error_message);

/* Bounds on a grammar's text, checked before llama.cpp parses it (by newrllama_grammar_check and
 * newrllama_grammar_parse too), so that no grammar crashes the process or holds it for long:
 * llama.cpp's parser recurses once per nested group ( ) (deep enough nesting overflows a thread's
 * stack), writes out every repetition {m,n} in memory (a 10 KB literal repeated 2,000 times is
 * 20 million symbols), and takes time that grows faster than the length. Repeated symbols: what the
 * repetitions {m,n} write out over the whole grammar (k symbols repeated up to n times count k * n).
 * Grammars converted from JSON schemas nest one group per unit of maxLength or maxItems, which
 * llama.cpp itself refuses beyond about 1,000. */
enum {
    NEWRLLAMA_GRAMMAR_MAX_BYTES = 65536,
    NEWRLLAMA_GRAMMAR_MAX_NESTING = 1024,
    NEWRLLAMA_GRAMMAR_MAX_REPEATED = 100000
};
/* NEWRLLAMA_ERROR_INVALID_ARGUMENT, naming the bound, if grammar exceeds one of those; needs no model. */
NEWRLLAMA_API newrllama_error_code newrllama_grammar_check_bounds(const char *grammar, const char **error_message);

/* The seed of one prompt's random stream: a function of the call's seed, the
 * prompt's tokens and `repeat` (how many identical prompts came before it in the
 * call), not of the prompt's position, so re-running a subset of prompts gives
 * the same samples. seed < 0 gives a random seed. Never LLAMA_DEFAULT_SEED. */
NEWRLLAMA_API uint32_t newrllama_prompt_seed(int64_t seed, const int32_t *tokens, size_t n_tokens, uint32_t repeat);

typedef enum newrllama_slot_status {
    NEWRLLAMA_SLOT_OK = 0,
    NEWRLLAMA_SLOT_ROLLED_BACK = 1, /* the step failed; the sequence is as it was before the step */
    NEWRLLAMA_SLOT_CLEARED = 2      /* the step failed and its tokens could not be removed exactly
                                       (sliding-window cells were reused): the sequence is empty */
} newrllama_slot_status;

/* One sequence's share of a step. Inputs: seq_id, pos (position of tokens[0],
 * which must follow the sequence's last position), tokens/n_tokens (>= 1), and
 * sampler (NULL: no token wanted). Outputs: token (sampled from the row of the
 * last token, -1 if none), is_eog, status.
 *
 * Scoring (optional; a slot with a sampler may not score): n_score_rows > 0 asks for
 * the rows of the slot's last n_score_rows tokens; logprobs[i] receives the natural
 * log-probability of token targets[i] in row target_rows[i] (in [0, n_score_rows),
 * counted from the first of those tokens), for i < n_targets. */
typedef struct newrllama_slot {
    int32_t seq_id;
    int32_t pos;
    const int32_t *tokens;
    int32_t n_tokens;
    newrllama_sampler_handle sampler;
    int32_t token;
    bool is_eog;
    newrllama_slot_status status;
    int32_t n_score_rows;
    int32_t n_targets;
    const int32_t *targets;
    const int32_t *target_rows;
    float *logprobs;
} newrllama_slot;

/* One llama_decode carrying every slot's tokens, then every slot with a sampler
 * sampled in the same call. Slots must have distinct seq_ids and hold at most
 * n_batch tokens together. On NEWRLLAMA_ERROR_DECODE the step is rolled back
 * (each slot's status says how) and *decode_code_out holds llama_decode's code;
 * decode one slot at a time to find the one that cannot proceed. On
 * NEWRLLAMA_ERROR_INVALID_ARGUMENT nothing was done. */
NEWRLLAMA_API newrllama_error_code newrllama_step(newrllama_context_handle ctx, newrllama_slot *slots,
                                                  int32_t n_slots, int32_t *decode_code_out,
                                                  const char **error_message);

/* Sequence operations; seq ids are in [0, n_seq_max + n_seq_extra). */
NEWRLLAMA_API newrllama_error_code newrllama_seq_clear(newrllama_context_handle ctx, int32_t seq_id,
                                                       const char **error_message);
/* dst becomes a copy of positions [0, n_tokens) of src (n_tokens < 0: all of src); dst's
 * own cells are removed first. In a unified cache the copy shares src's cells; split, src's
 * whole stream is copied and trimmed. With a sliding-window model, a partial copy is only
 * sound while src has never reached past the window (n_swa). */
NEWRLLAMA_API newrllama_error_code newrllama_seq_copy(newrllama_context_handle ctx, int32_t src, int32_t dst,
                                                      int32_t n_tokens, const char **error_message);
/* Smallest and largest position held by the sequence; both -1 when it is empty. */
NEWRLLAMA_API newrllama_error_code newrllama_seq_pos_range(newrllama_context_handle ctx, int32_t seq_id,
                                                           int32_t *pos_min_out, int32_t *pos_max_out,
                                                           const char **error_message);

NEWRLLAMA_API void newrllama_free_string(char *str);
NEWRLLAMA_API void newrllama_free_tokens(int32_t *tokens);
NEWRLLAMA_API void newrllama_free_string_array(char **arr, int count);
NEWRLLAMA_API void newrllama_free_completions(newrllama_completion *results, int32_t count);

#ifdef __cplusplus
}
#endif

#endif /* NEWRLLAMA_CAPI_H */
