/* Grammars: a grammar's text is measured against NEWRLLAMA_GRAMMAR_MAX_* before llama.cpp
 * parses it (its parser recurses per nesting level and writes out repetitions), in one place,
 * nr_grammar_parse, which every parse goes through. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "newrllama_internal.h"

/* llama.cpp writes a repetition bounded above this as an unbounded one (one rule), and refuses a
 * larger minimum (its MAX_REPETITION_THRESHOLD). */
#define LLAMA_REPETITION_THRESHOLD 2000u

static uint64_t capped(uint64_t n) {
    return n > NEWRLLAMA_GRAMMAR_MAX_REPEATED + 1u ? NEWRLLAMA_GRAMMAR_MAX_REPEATED + 1u : n;
}

/* Past a literal "..." or a class [...] whose opening character precedes p (escapes skipped). */
static const char *after_quoted(const char *p, char close) {
    while (*p && *p != close) p += (p[0] == '\\' && p[1]) ? 2 : 1;
    return *p ? p + 1 : p;
}

static const char *after_space(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
    return p;
}

static const char *after_count(const char *p, uint64_t *count) {
    uint64_t n = 0;
    for (; *p >= '0' && *p <= '9'; p++) n = capped(n * 10 + (uint64_t)(*p - '0'));
    *count = n;
    return after_space(p);
}

/* How many copies of its element the repetition {m}, {m,} or {m,n} at p (past the '{') writes out. */
static const char *after_repetition(const char *p, uint64_t *times) {
    uint64_t low, high;
    p = after_count(after_space(p), &low);
    *times = low;
    if (*p == ',') {
        p = after_space(p + 1);
        if (*p >= '0' && *p <= '9') {
            p = after_count(p, &high);
            *times = high > LLAMA_REPETITION_THRESHOLD ? low + 1 : (high > low ? high : low);
        } else {
            *times = low + 1;
        }
    }
    return *p == '}' ? p + 1 : p;
}

static bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* A scan of the text as llama.cpp's parser reads it, without building anything: `element` is the
 * size (in symbols, over-counted as bytes) of what a repetition just after it would copy. */
newrllama_error_code newrllama_grammar_check_bounds(const char *grammar, const char **error_message) {
    nr_clear_error(error_message);
    if (!grammar) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "grammar must not be NULL");
    if (strnlen(grammar, NEWRLLAMA_GRAMMAR_MAX_BYTES + 1) > NEWRLLAMA_GRAMMAR_MAX_BYTES) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "the grammar is longer than %d bytes (the bound NEWRLLAMA_GRAMMAR_MAX_BYTES)",
                       NEWRLLAMA_GRAMMAR_MAX_BYTES);
    }
    int depth = 0;
    uint64_t element = 0, repeated = 0, times;
    const char *p = grammar;
    while (*p) {
        const char *start = p;
        if (*p == '"' || *p == '[') {
            p = after_quoted(p + 1, *p == '"' ? '"' : ']');
            element = capped((uint64_t)(p - start) > 2 ? (uint64_t)(p - start) - 2 : 1);  /* what is inside */
        } else if (*p == '<') {
            p = after_quoted(p + 1, '>');
            element = 1;
        } else if (*p == '#') {
            while (*p && *p != '\n' && *p != '\r') p++;
        } else if (*p == '(') {
            if (++depth > NEWRLLAMA_GRAMMAR_MAX_NESTING) {
                return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                               "the grammar nests groups ( ) more than %d deep (the bound NEWRLLAMA_GRAMMAR_MAX_NESTING)",
                               NEWRLLAMA_GRAMMAR_MAX_NESTING);
            }
            element = 0;
            p++;
        } else if (*p == ')' || *p == '.') {
            if (*p == ')' && depth > 0) depth--;
            element = 1;
            p++;
        } else if (*p == '{') {
            p = after_repetition(p + 1, &times);
            repeated = capped(repeated + element * times);
            element = capped(element * times + 1);  /* a repetition of it repeats the copies */
        } else if (*p == '*' || *p == '+' || *p == '?') {  /* one rule, no copies: costs what its text does */
            element = capped(element + 1);
            p++;
        } else if (is_word_char(*p)) {
            while (is_word_char(*p)) p++;
            element = 1;
        } else {
            if (*p == '|' || *p == ':' || *p == '=') element = 0;
            p++;
        }
        if (repeated > NEWRLLAMA_GRAMMAR_MAX_REPEATED) {
            return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                           "the grammar's repetitions {m,n} write out more than %d symbols (the bound "
                           "NEWRLLAMA_GRAMMAR_MAX_REPEATED)", NEWRLLAMA_GRAMMAR_MAX_REPEATED);
        }
    }
    return NEWRLLAMA_OK;
}

newrllama_error_code nr_grammar_parse(const struct newrllama_model *m, const char *grammar,
                                      struct llama_sampler **out, const char **error_message) {
    *out = NULL;
    newrllama_error_code rc = newrllama_grammar_check_bounds(grammar, error_message);
    if (rc != NEWRLLAMA_OK) return rc;
    *out = llama_sampler_init_grammar(m->vocab, grammar, "root");
    if (!*out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT,
                       "the grammar could not be parsed (GBNF with a rule named root; llama.cpp logs the place "
                       "with NEWRLLAMA_LOG_LEVEL=1 or more)");
    }
    return NEWRLLAMA_OK;
}

newrllama_error_code newrllama_grammar_check(newrllama_model_handle model, const char *grammar,
                                             const char **error_message) {
    nr_clear_error(error_message);
    if (!model || !grammar) return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "model and grammar must not be NULL");
    struct llama_sampler *g = NULL;
    newrllama_error_code rc = nr_grammar_parse(model, grammar, &g, error_message);
    llama_sampler_free(g);
    return rc;
}

newrllama_error_code newrllama_grammar_parse(newrllama_model_handle model, const char *grammar,
                                             newrllama_grammar_handle *grammar_out, const char **error_message) {
    nr_clear_error(error_message);
    if (!model || !grammar || !grammar_out) {
        return nr_fail(error_message, NEWRLLAMA_ERROR_INVALID_ARGUMENT, "model, grammar and grammar_out must not be NULL");
    }
    *grammar_out = NULL;
    struct newrllama_grammar *g = calloc(1, sizeof *g);
    if (!g) return nr_fail(error_message, NEWRLLAMA_ERROR_OUT_OF_MEMORY, "out of memory");
    newrllama_error_code rc = nr_grammar_parse(model, grammar, &g->parsed, error_message);
    if (rc != NEWRLLAMA_OK) {
        free(g);
        return rc;
    }
    *grammar_out = g;
    return NEWRLLAMA_OK;
}

void newrllama_grammar_free(newrllama_grammar_handle grammar) {
    if (!grammar) return;
    llama_sampler_free(grammar->parsed);
    free(grammar);
}
