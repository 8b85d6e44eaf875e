/* Multiplies random weights in one of ggml's quantized types by random activations with the installed ggml's CPU
 * backend and prints, as one JSON object: the largest error against a double-precision product of the
 * dequantized weights and the activations as ggml rounds them (Q8_0, the vec_dot type of Q5_0 and Q8_0), the
 * largest result, and whether every output is the same bits when its activation row is multiplied alone, in the
 * whole batch, and with 1, 2 or 3 threads.
 * Arguments: type name (q5_0, q8_0), weight rows M, activation rows N, row length K. */
#include "ggml.h"
#include "ggml-cpu.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float *product(struct ggml_context *ctx, struct ggml_tensor *w, const float *x, int n, int k, int threads) {
    struct ggml_tensor *a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
    memcpy(a->data, x, sizeof(float) * (size_t) k * n);
    struct ggml_tensor *c = ggml_mul_mat(ctx, w, a);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, c);
    if (ggml_graph_compute_with_ctx(ctx, g, threads) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "ggml_graph_compute_with_ctx failed\n");
        exit(1);
    }
    return (float *) c->data;
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
    struct ggml_init_params params = {(size_t) 64 * 1024 * 1024 + (size_t) 16 * m * (n + 2) * sizeof(float) * 8, NULL, false};
    struct ggml_context *ctx = ggml_init(params);

    srand(12345);
    float *wf = malloc(sizeof(float) * (size_t) m * k), *x = malloc(sizeof(float) * (size_t) n * k);
    for (size_t i = 0; i < (size_t) m * k; i++) wf[i] = (float) rand() / RAND_MAX * 2 - 1;
    for (size_t i = 0; i < (size_t) n * k; i++) x[i] = (float) rand() / RAND_MAX * 2 - 1;
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, type, k, m);
    ggml_quantize_chunk(type, wf, w->data, 0, m, k, NULL);

    /* the reference: what the kernels multiply, exactly, summed in double */
    const struct ggml_type_traits *wt = ggml_get_type_traits(type), *q8 = ggml_get_type_traits(GGML_TYPE_Q8_0);
    float *wd = malloc(sizeof(float) * (size_t) m * k), *xd = malloc(sizeof(float) * (size_t) n * k);
    void *xq = malloc(ggml_row_size(GGML_TYPE_Q8_0, k) * n);
    wt->to_float(w->data, wd, (int64_t) m * k);
    ggml_quantize_chunk(GGML_TYPE_Q8_0, x, xq, 0, n, k, NULL);
    q8->to_float(xq, xd, (int64_t) n * k);

    const float *batch = product(ctx, w, x, n, k, 2);
    double max_error = 0, max_result = 0;
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) s += (double) wd[(size_t) i * k + l] * xd[(size_t) j * k + l];
            max_error = fmax(max_error, fabs(s - batch[(size_t) j * m + i]));
            max_result = fmax(max_result, fabs(s));
        }
    }
    bool same_alone = true, same_threads = true;
    for (int j = 0; j < n; j++) {
        const float *alone = product(ctx, w, x + (size_t) j * k, 1, k, 2);
        same_alone &= memcmp(alone, batch + (size_t) j * m, sizeof(float) * m) == 0;
    }
    for (int threads = 1; threads <= 3; threads += 2) {
        same_threads &= memcmp(product(ctx, w, x, n, k, threads), batch, sizeof(float) * (size_t) m * n) == 0;
    }
    printf("{\"max_error\": %.9g, \"max_result\": %.9g, \"same_alone\": %s, \"same_threads\": %s}\n", max_error,
           max_result, same_alone ? "true" : "false", same_threads ? "true" : "false");
    free(wf); free(x); free(wd); free(xd); free(xq);
    ggml_free(ctx);
    return 0;
}
