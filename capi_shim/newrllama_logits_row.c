/* Whole-row passes over a logits row of the full vocabulary: its maximum, its argmax (greedy
 * decoding) and the normaliser of its log-softmax, log(sum(exp(row))).
 *
 * Each pass reads 262,144 floats for gemma 3, once per client and step. Written as scalar
 * loops they were a large share of a step under a profiler: the argmax of a step's rows ran
 * on one core while the other waited, and the log-sum-exp with exp() in double cost about
 * what a token's forward pass costs. Here they run on GCC/Clang vector types (8 floats: two
 * SSE2 registers, or one AVX2 register in the clone picked at load time where the CPU has
 * it). The exponential is a polynomial within a few float roundings of exp() per term
 * (tests/c/leak_check.c checks the sum against exp() in double), summed in float per block and in
 * double across blocks. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "newrllama_internal.h"

typedef float nr_float8 __attribute__((vector_size(32)));
typedef int32_t nr_int8 __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define NR_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef NR_VECTOR_CLONES
#define NR_VECTOR_CLONES
#endif

/* exp(x) for x <= 0: x = n ln 2 + r with |r| <= ln 2 / 2, then 2^n (built in the exponent
 * bits) times a degree-6 series in r. Arguments below -87 are clamped (exp(-87) ~ 1.6e-38,
 * nothing next to the row's maximum term, 1). Vectors pass by pointer: by value their ABI
 * differs between the SSE2 and AVX2 clones. */
static inline void exp_nonpositive(nr_float8 *x) {
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    nr_int8 low = *x < -87.0f;
    nr_float8 v = (nr_float8)(((nr_int8)*x & ~low) | ((nr_int8)((nr_float8){0} - 87.0f) & low));
    nr_float8 k = v * 1.44269504f + round;
    nr_float8 n = k - round;
    nr_float8 r = v - n * 0.693359375f + n * 2.12194440e-4f;
    nr_float8 p = 1.0f + r * (1.0f + r * (0.5f + r * (0.166666672f + r * (4.16666716e-2f +
                                                      r * (8.33336915e-3f + r * 1.38833828e-3f)))));
    nr_int8 bits = ((nr_int8)k - 0x4B400000 + 127) << 23;
    *x = p * (nr_float8)bits;
}

/* NaN never wins a comparison, as in a scalar `x > max` loop; a row of NaN gives -INFINITY. */
NR_VECTOR_CLONES float nr_row_max(const float *row, int32_t n) {
    enum { LANES = 8 };
    nr_float8 lanes = (nr_float8){0} - INFINITY;
    int32_t t = 0;
    for (; t + LANES <= n; t += LANES) {
        nr_float8 x;
        memcpy(&x, row + t, sizeof x);
        nr_int8 greater = x > lanes;
        lanes = (nr_float8)(((nr_int8)x & greater) | ((nr_int8)lanes & ~greater));
    }
    float max = -INFINITY;
    for (int32_t j = 0; j < LANES; j++) max = lanes[j] > max ? lanes[j] : max;
    for (; t < n; t++) max = row[t] > max ? row[t] : max;
    return max;
}

/* The first index holding the maximum, as a scalar `>` loop finds it (0 for a row without a
 * number). The second pass stops at the maximum, half a row on average. */
int32_t nr_row_argmax(const float *row, int32_t n) {
    float max = nr_row_max(row, n);
    for (int32_t t = 0; t < n; t++) {
        if (row[t] == max) return t;
    }
    return 0;
}

NR_VECTOR_CLONES double nr_log_sum_exp(const float *row, int32_t n) {
    enum { LANES = 8, BLOCK = 4096 };
    float max = nr_row_max(row, n);
    double sum = 0.0;
    int32_t t = 0;
    while (t + LANES <= n) {
        nr_float8 block_sum = {0};
        for (int32_t end = n - t > BLOCK ? t + BLOCK : n; t + LANES <= end; t += LANES) {
            nr_float8 x;
            memcpy(&x, row + t, sizeof x);
            x -= max;
            exp_nonpositive(&x);
            block_sum += x;
        }
        for (int32_t j = 0; j < LANES; j++) sum += block_sum[j];
    }
    for (; t < n; t++) sum += exp((double)(row[t] - max));
    return max + log(sum);
}
