/* Multiplies random weights in one of ggml's quantized types by random activations with the installed ggml's CPU
 * backend and prints, as one JSON object: the largest error against a double-precision product of the
 * dequantized weights and the activations as ggml rounds them (to the type's vec_dot type: Q8_0 or Q8_K), the
 * largest result, whether every output is the same bits when its activation row is multiplied alone, in the
 * whole batch, and with 1, 2 or 3 threads, and whether every output is the same bits as the arithmetic that
 * newrllama's matmul kernels define (capi_shim/llama_cpp_patch), computed here one output at a time in plain C,
 * a digest of the batch's bits (FNV-1a of its outputs), to compare runs whose kernels differ, and whether the
 * process may use AMX tiles afterwards (only newrllama's AMX kernel asks for them here), and whether the activations
 * that the CPU backend rounds to Q8_K are byte for byte those of ggml's scalar reference.
 * Arguments: type name (q5_0, q8_0, q4_K, q5_K, q6_K, or another of ggml's, without the defined arithmetic),
 * weight rows M, activation rows N, row length K. */
#define _GNU_SOURCE  /* syscall() */
#include "ggml.h"
#include "ggml-cpu.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml-base's scalar rounding to Q8_K (declared in its internal ggml-quants.h) */
void quantize_row_q8_K_ref(const float *x, void *y, int64_t k);
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static bool tiles_permitted(void) {
#if defined(__linux__) && defined(__x86_64__)
    unsigned long long features = 0;  /* ARCH_GET_XCOMP_PERM; bit 18 is the tiles' data */
    return syscall(SYS_arch_prctl, 0x1022, &features) == 0 && (features >> 18 & 1);
#else
    return false;
#endif
}

/* w times the n rows of x, in a graph of its own, into a new array the caller frees. */
static float *product(struct ggml_tensor *w, const float *x, int n, int k, int threads) {
    const size_t m = (size_t) w->ne[1];
    struct ggml_init_params params = {ggml_graph_overhead() + 4 * ggml_tensor_overhead()
                                      + sizeof(float) * ((size_t) k * n + m * n) + 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(params);
    struct ggml_tensor *a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
    memcpy(a->data, x, sizeof(float) * (size_t) k * n);
    struct ggml_tensor *c = ggml_mul_mat(ctx, w, a);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, c);
    struct ggml_cplan plan = ggml_graph_plan(g, threads, NULL);
    void *work = malloc(plan.work_size + 1);
    plan.work_data = work;
    float *out = malloc(sizeof(float) * m * n);
    if (!ctx || !work || !out || ggml_graph_compute(g, &plan) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "the product failed\n");
        exit(1);
    }
    memcpy(out, c->data, sizeof(float) * m * n);
    free(work);
    ggml_free(ctx);
    return out;
}

static float half(const uint8_t *p) {
    ggml_fp16_t h;
    memcpy(&h, p, sizeof h);
    return ggml_fp16_to_fp32(h);
}

/* The 6-bit scale and min of sub-block j of a Q4_K or Q5_K block, as ggml's reference dequantization reads them. */
static void scale_min(const uint8_t *q, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* One output of the defined arithmetic: for each block in order, its exact integer sums, then its floats
 * (acc = fma(S, d * d_a, acc), and for the types with mins acc = fma(-M, dmin * d_a, acc)). Weight blocks are read
 * at ggml's byte offsets; the activations are the vec_dot type's blocks. */
static float defined_dot(enum ggml_type type, const uint8_t *w, const uint8_t *x, int k) {
    float acc = 0.0f;
    if (type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q8_0) {
        const size_t wsize = type == GGML_TYPE_Q5_0 ? 22 : 34;
        for (int l = 0; l < k / 32; l++, w += wsize, x += 34) {
            const int8_t *a = (const int8_t *) (x + 2);
            int64_t s = 0;
            for (int i = 0; i < 32; i++) {
                int q;
                if (type == GGML_TYPE_Q8_0) {
                    q = ((const int8_t *) (w + 2))[i];
                } else {
                    uint32_t qh;
                    memcpy(&qh, w + 2, 4);
                    const uint8_t b = w[6 + i % 16];
                    q = ((i < 16 ? b & 0xF : b >> 4) | (((qh >> i) & 1) << 4)) - 16;
                }
                s += (int64_t) q * a[i];
            }
            acc = fmaf((float) s, half(w) * half(x), acc);
        }
        return acc;
    }
    for (int l = 0; l < k / 256; l++, x += 292) {
        float da;
        memcpy(&da, x, sizeof da);
        const int8_t *a = (const int8_t *) (x + 4);
        int q[256], sub = 32, scale[16], mins[16] = {0};
        float d, dmin = 0.0f;
        if (type == GGML_TYPE_Q6_K) {
            const uint8_t *ql = w, *qh = w + 128;
            for (int h = 0; h < 2; h++) {
                for (int i = 0; i < 32; i++) {
                    const uint8_t *lo = ql + 64 * h, *hi = qh + 32 * h;
                    q[128 * h + i] = (lo[i] & 0xF) | (((hi[i] >> 0) & 3) << 4);
                    q[128 * h + i + 32] = (lo[i + 32] & 0xF) | (((hi[i] >> 2) & 3) << 4);
                    q[128 * h + i + 64] = (lo[i] >> 4) | (((hi[i] >> 4) & 3) << 4);
                    q[128 * h + i + 96] = (lo[i + 32] >> 4) | (((hi[i] >> 6) & 3) << 4);
                }
            }
            for (int i = 0; i < 256; i++) q[i] -= 32;
            for (int j = 0; j < 16; j++) scale[j] = ((const int8_t *) (w + 192))[j];
            d = half(w + 208);
            sub = 16;
            w += 210;
        } else {
            const bool q5 = type == GGML_TYPE_Q5_K;
            const uint8_t *qh = w + 16, *qs = w + (q5 ? 48 : 16);
            for (int j = 0; j < 8; j++) {
                scale_min(w + 4, j, &scale[j], &mins[j]);
                for (int i = 0; i < 32; i++) {
                    const uint8_t b = qs[32 * (j / 2) + i];
                    q[32 * j + i] = (j % 2 ? b >> 4 : b & 0xF) | (q5 ? ((qh[i] >> j) & 1) << 4 : 0);
                }
            }
            d = half(w);
            dmin = half(w + 2);
            w += q5 ? 176 : 144;
        }
        int64_t s = 0, m = 0;
        for (int j = 0; j < 256 / sub; j++) {
            int64_t dot = 0, sum = 0;
            for (int i = sub * j; i < sub * (j + 1); i++) {
                dot += (int64_t) q[i] * a[i];
                sum += a[i];
            }
            s += scale[j] * dot;
            m += mins[j] * sum;
        }
        acc = fmaf((float) s, d * da, acc);
        if (type != GGML_TYPE_Q6_K) acc = fmaf(-(float) m, dmin * da, acc);
    }
    return acc;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s TYPE M N K\n", argv[0]);
        return 2;
    }
    enum ggml_type type = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *name = ggml_type_name((enum ggml_type) t);
        if (name && strcmp(name, argv[1]) == 0) type = (enum ggml_type) t;
    }
    const int m = atoi(argv[2]), n = atoi(argv[3]), k = atoi(argv[4]);
    if (type == GGML_TYPE_COUNT || m < 1 || n < 1 || k < 1 || k % ggml_blck_size(type) != 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    struct ggml_init_params params = {ggml_tensor_overhead() + ggml_row_size(type, k) * m + 1024, NULL, false};
    struct ggml_context *ctx = ggml_init(params);
    ggml_cpu_init();

    srand(12345);
    float *wf = malloc(sizeof(float) * (size_t) m * k), *x = malloc(sizeof(float) * (size_t) n * k);
    for (size_t i = 0; i < (size_t) m * k; i++) wf[i] = (float) rand() / RAND_MAX * 2 - 1;
    for (size_t i = 0; i < (size_t) n * k; i++) x[i] = (float) rand() / RAND_MAX * 2 - 1;
    if (n >= 2) {  /* the rounding's edge cases in row 1: two values of the largest magnitude, then a block of zeros */
        x[k + 3] = -1.5f;
        x[k + 7] = 1.5f;
        for (int l = 256; l < 512 && l < k; l++) x[k + l] = 0.0f;
    }
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, type, k, m);
    ggml_quantize_chunk(type, wf, w->data, 0, m, k, NULL);

    /* the reference: what the kernels multiply, exactly, summed in double; the activations as ggml rounds them */
    const enum ggml_type xtype = ggml_get_type_traits_cpu(type)->vec_dot_type;
    const size_t xrow = ggml_row_size(xtype, k);
    const struct ggml_type_traits *wt = ggml_get_type_traits(type), *xt = ggml_get_type_traits(xtype);
    float *wd = malloc(sizeof(float) * (size_t) m * k), *xd = malloc(sizeof(float) * (size_t) n * k);
    uint8_t *xq = malloc(xrow * n);
    wt->to_float(w->data, wd, (int64_t) m * k);
    for (int j = 0; j < n; j++) ggml_get_type_traits_cpu(xtype)->from_float(x + (size_t) j * k, xq + j * xrow, k);
    for (int j = 0; j < n && xtype == GGML_TYPE_Q8_K; j++) {  /* ggml has no to_float for Q8_K: d times the codes */
        for (int l = 0; l < k; l++) {
            const uint8_t *b = xq + j * xrow + (size_t) (l / 256) * 292;
            float d;
            memcpy(&d, b, sizeof d);
            xd[(size_t) j * k + l] = d * ((const int8_t *) (b + 4))[l % 256];
        }
    }
    if (xtype != GGML_TYPE_Q8_K) xt->to_float(xq, xd, (int64_t) n * k);
    /* ggml's CPU rounding (newrllama's for Q8_K on x86) against the scalar reference, byte for byte */
    bool rounding_as_reference = true;
    uint8_t *xr = calloc(n, xrow);
    for (int j = 0; j < n && xtype == GGML_TYPE_Q8_K; j++) {
        quantize_row_q8_K_ref(x + (size_t) j * k, xr + j * xrow, k);
        rounding_as_reference &= memcmp(xr + j * xrow, xq + j * xrow, xrow) == 0;
    }
    free(xr);

    float *batch = product(w, x, n, k, 2);
    double max_error = 0, max_result = 0;
    /* the defined arithmetic is written for the types newrllama's kernels take; others are checked for the rest */
    const bool defined_here = type == GGML_TYPE_Q5_0 || type == GGML_TYPE_Q8_0 || type == GGML_TYPE_Q4_K ||
                              type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K;
    bool same_as_defined = defined_here;
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double) wd[(size_t) i * k + l] * xd[(size_t) j * k + l];
            const float got = batch[(size_t) j * m + i];
            max_error = fmax(max_error, fabs(s - got));
            max_result = fmax(max_result, fabs(s));
            if (!defined_here) continue;
            const float defined = defined_dot(type, (const uint8_t *) w->data + i * w->nb[1], xq + j * xrow, k);
            same_as_defined &= memcmp(&defined, &got, sizeof got) == 0;
        }
    }
    bool same_alone = true, same_threads = true;
    for (int j = 0; j < n; j++) {
        float *alone = product(w, x + (size_t) j * k, 1, k, 2);
        same_alone &= memcmp(alone, batch + (size_t) j * m, sizeof(float) * m) == 0;
        free(alone);
    }
    for (int threads = 1; threads <= 3; threads += 2) {
        float *again = product(w, x, n, k, threads);
        float *first_alone = product(w, x, 1, k, threads);  /* one row: its threads claim the weight rows as they go */
        same_threads &= memcmp(again, batch, sizeof(float) * (size_t) m * n) == 0 &&
                        memcmp(first_alone, batch, sizeof(float) * m) == 0;
        free(again);
        free(first_alone);
    }
    uint64_t digest = 14695981039346656037u;
    for (size_t i = 0; i < sizeof(float) * (size_t) m * n; i++) {
        digest = (digest ^ ((const uint8_t *) batch)[i]) * 1099511628211u;
    }
    printf("{\"max_error\": %.9g, \"max_result\": %.9g, \"same_alone\": %s, \"same_threads\": %s, "
           "\"same_as_defined\": %s, \"digest\": \"%016llx\", \"tiles_permitted\": %s, \"rounding_as_reference\": %s}\n", max_error, max_result,
           same_alone ? "true" : "false", same_threads ? "true" : "false", same_as_defined ? "true" : "false",
           (unsigned long long) digest, tiles_permitted() ? "true" : "false", rounding_as_reference ? "true" : "false");
    free(wf); free(x); free(wd); free(xd); free(xq); free(batch);
    ggml_free(ctx);
    return 0;
}
