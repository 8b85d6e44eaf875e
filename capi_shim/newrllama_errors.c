/* Per-thread error messages and small owned-memory helpers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "newrllama_internal.h"

/* Per thread, so that two threads failing at once keep their own message. */
static _Thread_local char error_buffer[1024];

newrllama_error_code nr_fail(const char **out, newrllama_error_code code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_buffer, sizeof error_buffer, fmt, ap);
    va_end(ap);
    if (out) *out = error_buffer;
    return code;
}

void nr_clear_error(const char **out) {
    if (out) *out = NULL;
}

bool nr_buf_append(nr_buf *buf, const char *bytes, size_t n) {
    if (buf->len + n + 1 > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 64;
        while (cap < buf->len + n + 1) cap *= 2;
        char *grown = realloc(buf->data, cap);
        if (!grown) return false;
        buf->data = grown;
        buf->cap = cap;
    }
    if (n) memcpy(buf->data + buf->len, bytes, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return true;
}

char *nr_buf_take(nr_buf *buf) {
    if (!buf->data && !nr_buf_append(buf, "", 0)) return NULL;
    char *s = buf->data;
    *buf = (nr_buf){0};
    return s;
}

void nr_buf_free(nr_buf *buf) {
    free(buf->data);
    *buf = (nr_buf){0};
}

char *nr_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy) memcpy(copy, s, n);
    return copy;
}

void newrllama_free_string(char *str) { free(str); }

void newrllama_free_tokens(int32_t *tokens) { free(tokens); }

void newrllama_free_string_array(char **arr, int count) {
    if (!arr) return;
    for (int i = 0; i < count; i++) free(arr[i]);
    free(arr);
}

void newrllama_free_completions(newrllama_completion *results, int32_t count) {
    if (!results) return;
    for (int32_t i = 0; i < count; i++) {
        free(results[i].text);
        free(results[i].token_ids);
        free(results[i].error);
    }
    free(results);
}
