/* Internal declarations shared by the shim's translation units. */
#ifndef NEWRLLAMA_INTERNAL_H
#define NEWRLLAMA_INTERNAL_H

#include <stdatomic.h>

#include "llama.h"
#include "newrllama_capi.h"
#include "newrllama_threads.h"

struct newrllama_model {
    struct llama_model *model;
    const struct llama_vocab *vocab;
    int32_t n_vocab;
    /* The handle itself plus one per live context: a context keeps its model alive. */
    atomic_int refs;
};

struct decode_fault {
    int32_t countdown; /* decodes left before the fault arms; 0 = disarmed */
    bool armed;
    int32_t seq_id;    /* -1: fail exactly one decode, whatever it holds */
    int32_t code;
    int32_t n_fired;
};

struct newrllama_context {
    struct llama_context *ctx;
    struct newrllama_model *model;
    mtx_t lock;
    int32_t n_ctx;            /* n_ctx_seq * n_seq_max */
    int32_t n_ctx_seq;        /* budget of each prompt sequence, enforced by callers */
    bool kv_unified;          /* one KV stream for all sequences, else a stream per sequence */
    bool batch_invariant;     /* bf16 KV cells: attention rounds alike in any step (see newrllama_capi.h) */
    int32_t n_batch;
    int32_t n_seq_max;        /* prompt sequences: ids [0, n_seq_max) */
    int32_t n_seq_total;      /* plus the cache sequences: ids [n_seq_max, n_seq_total) */
    int32_t n_swa;            /* sliding-window size of the model's SWA layers; 0 if none */
    struct llama_batch batch; /* n_batch tokens, reused by every step under the lock */
    llama_token_data *candidates; /* n_vocab entries for grammar-constrained sampling, under the lock */
    struct decode_fault fault;
};

struct newrllama_sampler {
    struct llama_sampler *chain;   /* NULL: plain greedy, which reads the row's argmax and needs no state */
    struct llama_sampler *grammar; /* NULL: unconstrained */
};

/* A parsed grammar at its start: samplers take copies (llama_sampler_clone), never advance it. */
struct newrllama_grammar {
    struct llama_sampler *parsed;
};

/* Drops one reference; the last one frees the llama model. */
void nr_model_release(struct newrllama_model *m);

/* Error reporting: formats into the calling thread's buffer, stores it in *out. */
newrllama_error_code nr_fail(const char **out, newrllama_error_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void nr_clear_error(const char **out);

/* Growable byte buffer, always NUL-terminated once allocated. */
typedef struct nr_buf {
    char *data;
    size_t len;
    size_t cap;
} nr_buf;
bool nr_buf_append(nr_buf *buf, const char *bytes, size_t n);
char *nr_buf_take(nr_buf *buf); /* hands the (possibly empty) string to the caller */
void nr_buf_free(nr_buf *buf);

char *nr_strdup(const char *s);

/* Tokenizes with special-token parsing on (chat templates must yield control tokens). */
newrllama_error_code nr_tokenize(const struct newrllama_model *m, const char *text, size_t len,
                                 bool add_special, llama_token **tokens_out, int32_t *n_out,
                                 const char **error_message);

/* False (with the message set) if a token id is outside the vocabulary. */
bool nr_tokens_in_vocab(const struct newrllama_model *m, const int32_t *tokens, size_t n,
                        const char **error_message);

/* Appends the text of one generated token to buf. */
bool nr_append_piece(const struct newrllama_model *m, llama_token token, nr_buf *buf);

newrllama_error_code nr_check_sampling(const newrllama_sampling_params *p, const char **error_message);

/* Step primitives for callers that hold c->lock (the C driver holds it for a whole call). */
newrllama_error_code nr_sampler_make(const struct newrllama_context *c, const newrllama_sampling_params *p,
                                     uint32_t seed, struct newrllama_sampler **out);
void nr_sampler_release(struct newrllama_sampler *s);
/* A 64-bit hash of a token sequence: equal tokens, equal hash (repeats of identical prompts). */
uint64_t nr_tokens_hash(const int32_t *tokens, size_t n_tokens);
/* Whole-row passes over logits, vectorised (newrllama_logits_row.c). */
float nr_row_max(const float *row, int32_t n);
int32_t nr_row_argmax(const float *row, int32_t n);
/* log(sum(exp(row[0..n)))). */
double nr_log_sum_exp(const float *row, int32_t n);
/* Checks a grammar's text against NEWRLLAMA_GRAMMAR_MAX_*, then parses it for m's vocabulary (*out: the grammar
 * sampler, NULL on error). */
newrllama_error_code nr_grammar_parse(const struct newrllama_model *m, const char *grammar,
                                      struct llama_sampler **out, const char **error_message);
/* Samples row batch_index under s->grammar (see newrllama_sampler.c); -1 if the grammar allows no token. */
llama_token nr_sample_with_grammar(struct newrllama_context *c, struct newrllama_sampler *s, int32_t batch_index);
/* Returns llama_decode's code (0: decoded and sampled; otherwise rolled back). */
int32_t nr_step_locked(struct newrllama_context *c, newrllama_slot *slots, int32_t n_slots);

/* The C driver of a whole call over the step primitives: every one-shot function runs through it. */
newrllama_error_code nr_engine_run(struct newrllama_context *c, const newrllama_prompt *prompts,
                                   int32_t n_prompts, const newrllama_sampling_params *params,
                                   int32_t n_params, newrllama_progress_callback progress,
                                   void *user_data, newrllama_completion *results,
                                   newrllama_parallel_stats *stats, const char **error_message);

#endif
