/* Backend, library identity, models, tokenizer, chat templates and token queries. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "newrllama_internal.h"

/* llama.cpp's logger is process-wide; the threshold travels in its user_data
 * pointer so that the shim itself keeps no mutable global. */
static void log_to_stderr(enum ggml_log_level level, const char *text, void *user_data) {
    intptr_t threshold = (intptr_t)user_data;
    int rank;
    switch (level) {
        case GGML_LOG_LEVEL_ERROR: rank = 1; break;
        case GGML_LOG_LEVEL_WARN: rank = 2; break;
        default: rank = 3; break;
    }
    if (rank <= threshold) fputs(text, stderr);
}

void newrllama_set_log_level(int level) {
    if (level < 0) level = 0;
    if (level > 3) level = 3;
    llama_log_set(log_to_stderr, (void *)(intptr_t)level);
}

/* Whether the process runs LLVM's or Intel's OpenMP runtime, the ones that read KMP_BLOCKTIME. */
static int kmp_openmp_loaded(void) {
    static const char *const runtimes[] = {"libomp.so", "libomp.so.5", "libiomp5.so"};
    for (size_t i = 0; i < sizeof runtimes / sizeof runtimes[0]; i++) {
        void *handle = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD);
        if (handle) {
            dlclose(handle);
            return 1;
        }
    }
    return 0;
}

static void init_backend_once(void) {
    newrllama_set_log_level(1);
    /* Nothing newrllama does may reach the environment of the process, which every child process inherits (a
     * llama.cpp tool started from R or Python after loading newrllama ran several times slower with what was set
     * there).
     * Batch invariance for the quantized types newrllama's matmul kernels do not take comes from ggml's tiled
     * kernel taken for every row count, which newrllama's build of llama.cpp does by default
     * (capi_shim/llama_cpp_patch/tiled_forced_by_default.cpp) rather than through GGML_CPU_TILED_MM_FORCE. And
     * ggml's CPU init sets KMP_BLOCKTIME for LLVM's and Intel's OpenMP runtimes, which read it at their first
     * parallel region; GCC's libgomp, which llama-cpp-python's builds use, never reads it, so there it is taken
     * back out unless the user had set it. */
    const int kmp_blocktime_was_set = getenv("KMP_BLOCKTIME") != NULL;
    llama_backend_init();
    if (!kmp_blocktime_was_set && !kmp_openmp_loaded()) unsetenv("KMP_BLOCKTIME");
}

static once_flag backend_once = ONCE_FLAG_INIT;

newrllama_error_code newrllama_backend_init(const char **error_message) {
    nr_clear_error(error_message);
    call_once(&backend_once, init_backend_once);
    return NEWRLLAMA_OK;
}

void newrllama_backend_free(void) {
    /* llama_backend_free only tears down optional NUMA/MPI state; the CPU backend
     * stays usable, so models loaded later keep working. */
    llama_backend_free();
}

const char *newrllama_llama_version(void) { return llama_version(); }

const char *newrllama_llama_library_path(void) {
    Dl_info info;
    if (!dladdr((void *)&llama_backend_init, &info) || !info.dli_fname) return "";
    return info.dli_fname;
}

static newrllama_error_code check_gguf_file(const char *path, const char **error_message) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_MODEL_LOAD, "cannot open model file '%s': %s",
                       path, strerror(errno));
    }
    char magic[4] = {0};
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    if (got != sizeof magic || memcmp(magic, "GGUF", 4) != 0) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_MODEL_LOAD,
                       "'%s' is not a GGUF model file (it does not start with the GGUF magic)", path);
    }
    return NEWRLLAMA_OK;
}

newrllama_error_code newrllama_model_load(const char *model_path, int n_gpu_layers, bool use_mmap,
                                          bool use_mlock, newrllama_model_handle *model_out,
                                          const char **error_message) {
    nr_clear_error(error_message);
    if (!model_out) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "model_out is NULL");
    *model_out = NULL;
    if (!model_path || !*model_path) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "model_path is NULL or empty");
    }
    if (n_gpu_layers < -1) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "n_gpu_layers must be >= -1 (-1 offloads all layers), got %d", n_gpu_layers);
    }
    newrllama_error_code rc = check_gguf_file(model_path, error_message);
    if (rc != NEWRLLAMA_OK) return rc;
    call_once(&backend_once, init_backend_once);

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = n_gpu_layers;
    /* Repacked weights (CPU_REPACK) multiply rows in groups of four and the rest one by one, with
     * other rounding (a row's result would depend on its place in the batch), and they never reach
     * newrllama's matmul kernels, which take the weights as the file holds them. */
    mp.use_extra_bufts = false;
    mp.load_mode = use_mmap ? (use_mlock ? LLAMA_LOAD_MODE_MMAP_MLOCK : LLAMA_LOAD_MODE_MMAP)
                            : (use_mlock ? LLAMA_LOAD_MODE_MLOCK : LLAMA_LOAD_MODE_NONE);
    struct llama_model *lm = llama_model_load_from_file(model_path, mp);
    if (!lm) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_MODEL_LOAD,
                       "llama.cpp could not load '%s' (truncated or unsupported GGUF?)", model_path);
    }
    struct newrllama_model *m = calloc(1, sizeof *m);
    if (!m) {
        llama_model_free(lm);
        return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    m->model = lm;
    m->vocab = llama_model_get_vocab(lm);
    m->n_vocab = llama_vocab_n_tokens(m->vocab);
    atomic_init(&m->refs, 1);
    *model_out = m;
    return NEWRLLAMA_OK;
}

void nr_model_release(struct newrllama_model *m) {
    if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
        llama_model_free(m->model);
        free(m);
    }
}

void newrllama_model_free(newrllama_model_handle model) { nr_model_release(model); }

int32_t newrllama_model_n_vocab(newrllama_model_handle model) { return model ? model->n_vocab : -1; }

int32_t newrllama_model_n_ctx_train(newrllama_model_handle model) {
    return model ? llama_model_n_ctx_train(model->model) : -1;
}

newrllama_error_code newrllama_model_desc(newrllama_model_handle model, char **desc_out,
                                          const char **error_message) {
    nr_clear_error(error_message);
    if (!model || !desc_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "model or desc_out is NULL");
    }
    char buf[256];
    if (llama_model_desc(model->model, buf, sizeof buf) < 0) buf[0] = '\0';
    *desc_out = nr_strdup(buf);
    if (!*desc_out) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    return NEWRLLAMA_OK;
}

newrllama_error_code nr_tokenize(const struct newrllama_model *m, const char *text, size_t len,
                                 bool add_special, llama_token **tokens_out, int32_t *n_out,
                                 const char **error_message) {
    *tokens_out = NULL;
    *n_out = 0;
    if (len > (size_t)INT32_MAX / 2) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_TOKENIZE, "text of %zu bytes is too long to tokenize", len);
    }
    /* Two tokens of headroom for BOS/EOS; one token per byte is the worst case. */
    int32_t cap = (int32_t)len + 2;
    llama_token *tokens = malloc((size_t)cap * sizeof *tokens);
    if (!tokens) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    int32_t n = llama_tokenize(m->vocab, text, (int32_t)len, tokens, cap, add_special, true);
    if (n < 0) {
        cap = -n;
        llama_token *grown = realloc(tokens, (size_t)cap * sizeof *tokens);
        if (!grown) {
            free(tokens);
            return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
        }
        tokens = grown;
        n = llama_tokenize(m->vocab, text, (int32_t)len, tokens, cap, add_special, true);
    }
    if (n < 0) {
        free(tokens);
        return nr_fail(error_message, NEWRLLAMA_ERROR_TOKENIZE, "tokenization failed (%d)", n);
    }
    *tokens_out = tokens;
    *n_out = n;
    return NEWRLLAMA_OK;
}

newrllama_error_code newrllama_tokenize(newrllama_model_handle model, const char *text, size_t text_len,
                                        bool add_special, int32_t **tokens_out, size_t *n_tokens_out,
                                        const char **error_message) {
    nr_clear_error(error_message);
    if (!model || !text || !tokens_out || !n_tokens_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "model, text, tokens_out and n_tokens_out must not be NULL");
    }
    *tokens_out = NULL;
    *n_tokens_out = 0;
    llama_token *tokens;
    int32_t n;
    newrllama_error_code rc = nr_tokenize(model, text, text_len, add_special, &tokens, &n, error_message);
    if (rc != NEWRLLAMA_OK) return rc;
    *tokens_out = tokens;
    *n_tokens_out = (size_t)n;
    return NEWRLLAMA_OK;
}

bool nr_append_piece(const struct newrllama_model *m, llama_token token, nr_buf *buf) {
    char small[128];
    int32_t n = llama_token_to_piece(m->vocab, token, small, sizeof small, 0, false);
    if (n >= 0) return nr_buf_append(buf, small, (size_t)n);
    char *big = malloc((size_t)-n);
    if (!big) return false;
    int32_t got = llama_token_to_piece(m->vocab, token, big, -n, 0, false);
    bool ok = got >= 0 && nr_buf_append(buf, big, (size_t)got);
    free(big);
    return ok;
}

bool nr_tokens_in_vocab(const struct newrllama_model *m, const int32_t *tokens, size_t n,
                        const char **error_message) {
    for (size_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab) {
            nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                    "token %d at index %zu is outside the vocabulary [0, %d)", tokens[i], i, m->n_vocab);
            return false;
        }
    }
    return true;
}

newrllama_error_code newrllama_detokenize(newrllama_model_handle model, const int32_t *tokens,
                                          size_t n_tokens, char **text_out, size_t *text_len_out,
                                          const char **error_message) {
    nr_clear_error(error_message);
    if (!model || !text_out || (!tokens && n_tokens > 0)) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "model, text_out and (for a non-empty list) tokens must not be NULL");
    }
    *text_out = NULL;
    if (text_len_out) *text_len_out = 0;
    if (n_tokens > (size_t)INT32_MAX) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "too many tokens: %zu", n_tokens);
    }
    if (!nr_tokens_in_vocab(model, tokens, n_tokens, error_message)) return NEWRLLAMA_ERROR_INVALID_ARGUMENT;
    nr_buf buf = {0};
    for (size_t i = 0; i < n_tokens; i++) {
        if (!nr_append_piece(model, tokens[i], &buf)) {
            nr_buf_free(&buf);
            return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
        }
    }
    size_t len = buf.len;
    *text_out = nr_buf_take(&buf);
    if (!*text_out) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    if (text_len_out) *text_len_out = len;
    return NEWRLLAMA_OK;
}

/* Some GGUF files carry no template; llama.cpp's built-in template whose name is
 * the longest prefix of the architecture (gemma3 -> gemma) is then the right one. */
static const char *template_for_architecture(const struct newrllama_model *m) {
    char arch[64];
    if (llama_model_meta_val_str(m->model, "general.architecture", arch, sizeof arch) < 0) return NULL;
    const char *names[128];
    int32_t n = llama_chat_builtin_templates(names, 128);
    if (n > 128) n = 128;
    const char *best = NULL;
    size_t best_len = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (len > best_len && strncmp(arch, names[i], len) == 0) {
            best = names[i];
            best_len = len;
        }
    }
    return best;
}

newrllama_error_code newrllama_apply_chat_template(newrllama_model_handle model, const char *tmpl,
                                                   const char *const *roles, const char *const *contents,
                                                   size_t n_messages, bool add_assistant, char **result_out,
                                                   const char **error_message) {
    nr_clear_error(error_message);
    if (!model || !result_out || (n_messages > 0 && (!roles || !contents))) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "model, result_out, roles and contents must not be NULL");
    }
    *result_out = NULL;
    if (n_messages > 100000) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "too many messages: %zu", n_messages);
    }
    const char *use_tmpl = tmpl ? tmpl : llama_model_chat_template(model->model, NULL);
    if (!use_tmpl) use_tmpl = template_for_architecture(model);
    if (!use_tmpl) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_TEMPLATE,
                       "the model has no built-in chat template; pass one explicitly");
    }
    llama_chat_message *msgs = calloc(n_messages ? n_messages : 1, sizeof *msgs);
    if (!msgs) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    size_t total = 256;
    for (size_t i = 0; i < n_messages; i++) {
        if (!roles[i] || !contents[i]) {
            free(msgs);
            return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                           "message %zu has a NULL role or content", i);
        }
        msgs[i].role = roles[i];
        msgs[i].content = contents[i];
        total += strlen(roles[i]) + strlen(contents[i]) + 64;
    }
    if (total > (size_t)INT32_MAX) {
        free(msgs);
        return nr_fail(error_message, NEWRLLAMA_ERROR_TEMPLATE, "messages are too long for a chat template");
    }
    char *buf = malloc(total);
    int32_t n = buf ? llama_chat_apply_template(use_tmpl, msgs, n_messages, add_assistant, buf, (int32_t)total) : -1;
    if (buf && n >= (int32_t)total) { /* no room for the terminating NUL either */
        /* The template produced more than estimated: retry with the exact size. */
        char *grown = realloc(buf, (size_t)n + 1);
        if (grown) {
            buf = grown;
            n = llama_chat_apply_template(use_tmpl, msgs, n_messages, add_assistant, buf, n + 1);
        } else {
            free(buf);
            buf = NULL;
        }
    }
    free(msgs);
    if (!buf) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    if (n < 0) {
        free(buf);
        return nr_fail(error_message, NEWRLLAMA_ERROR_TEMPLATE, "chat template is not supported by llama.cpp");
    }
    buf[n] = '\0';
    *result_out = buf;
    return NEWRLLAMA_OK;
}

int32_t newrllama_token_bos(newrllama_model_handle model) { return model ? llama_vocab_bos(model->vocab) : -1; }
int32_t newrllama_token_eos(newrllama_model_handle model) { return model ? llama_vocab_eos(model->vocab) : -1; }
int32_t newrllama_token_eot(newrllama_model_handle model) { return model ? llama_vocab_eot(model->vocab) : -1; }
int32_t newrllama_token_nl(newrllama_model_handle model) { return model ? llama_vocab_nl(model->vocab) : -1; }
int32_t newrllama_token_pad(newrllama_model_handle model) { return model ? llama_vocab_pad(model->vocab) : -1; }
int32_t newrllama_token_sep(newrllama_model_handle model) { return model ? llama_vocab_sep(model->vocab) : -1; }

static bool in_vocab(newrllama_model_handle model, int32_t token) {
    return model && token >= 0 && token < model->n_vocab;
}

bool newrllama_token_is_eog(newrllama_model_handle model, int32_t token) {
    return in_vocab(model, token) && llama_vocab_is_eog(model->vocab, token);
}

bool newrllama_token_is_control(newrllama_model_handle model, int32_t token) {
    return in_vocab(model, token) && llama_vocab_is_control(model->vocab, token);
}

const char *newrllama_token_get_text(newrllama_model_handle model, int32_t token) {
    return in_vocab(model, token) ? llama_vocab_get_text(model->vocab, token) : NULL;
}
