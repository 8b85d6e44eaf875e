/* The normaliser of a row's log-softmax, log(sum(exp(row))), over a whole vocabulary.
 *
 * Scoring a label costs one such sum over all 262,144 logits of gemma 3 per scored row;
 * with exp() in double that is about 3 ms, as much as a token's forward pass. Here the
 * exponential is a polynomial on GCC/Clang vector types (8 floats: two SSE2 registers,
 * or one AVX2 register in the clone picked at load time where the CPU has it), about
 * 2.5e-7 relative error per term, summed in float per block and in double across blocks. */
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

NR_VECTOR_CLONES double nr_log_sum_exp(const float *row, int32_t n) {
    enum { LANES = 8, BLOCK = 4096 };
    float max = row[0];
    for (int32_t t = 1; t < n; t++) max = row[t] > max ? row[t] : max;
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
