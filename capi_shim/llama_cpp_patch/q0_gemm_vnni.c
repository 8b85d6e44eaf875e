// newrllama's patch of ggml's CPU matmul for weights in Q5_0 and Q8_0 (capi_shim/llama_cpp_patch/apply.py puts it
// in ggml/src/ggml-cpu/ggml-cpu.c, before the function that dispatches a matmul). ggml multiplies these weights
// with llamafile's tinyBLAS, whose arithmetic per output does not depend on the batch, but which unpacks a
// weight block again for every four activation rows and sums 32 products in eight float lanes: in prefill it
// was the largest cost of the embedded model (most of its weights are Q5_0, its output matrix Q8_0), several
// times slower per product than ggml's tiled kernel takes the K-quant weights. This takes them with VNNI
// instead: a tile of 16 weight rows is unpacked once, to unsigned bytes (the value plus an offset), for all
// activation rows, and one int32 lane per weight row adds a block's 32 products exactly, so one output's
// arithmetic is fixed: for each block in order, acc = fma(float(exact dot), d_weight * d_activation, acc).
// It depends on nothing but the output's weight row and activation row, never on the number of rows, the
// tiles or the threads: batch-invariant like the kernels it replaces, with other bits. Up to four activation rows
// take the weight rows as they lie (q0g_rows_one_col), with the same arithmetic.

// It takes quant-gemm-avx2's chunks of work and plane helper (every CPU with AVX512-VNNI has AVX2, FMA and F16C).
#if defined(GGML_QUANT_GEMM_AVX2) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__)
#define GGML_Q0_GEMM_VNNI 1

// The build fingerprint (python_core/newrllama/engine/llama/reproducibility.py) finds this text in the library, and
// only where the kernel is compiled in: without AVX512-VNNI tinyBLAS stays, with other bits.
const char newrllama_llama_cpp_patch_q0_gemm[] = "newrllama-llama-cpp-patch: q0-gemm-vnni";

enum {
    Q0G_ROWS = 16,                   // weight rows per tile: one int32 lane each of a 512-bit register
    Q0G_GROUPS = QK8_0 / 4,          // vpdpbusd takes 4 bytes per lane: 8 steps per block
    Q0G_BLOCK_BYTES = Q0G_GROUPS * 64, // a block of a tile: for each step, 4 values of each of 16 rows
    Q0G_COLS = 4,                    // activation rows that take a block of a tile together
    Q0G_ONE_COL_MAX = 4,             // up to this many activation rows, the weight rows are read without a tile
    Q0G_PREFETCH = 4096,             // how far ahead of its block the row path asks for the weights' bytes
};

// A block of a Q5_0 row as 32 unsigned bytes: value = (4 low bits | fifth bit << 4) - 16, so the byte is the
// 5 bits themselves (offset 16).
static inline __m256i q0g_q5_0_bytes(const block_q5_0 * b) {
    uint32_t qh;
    memcpy(&qh, b->qh, sizeof(qh));
    const __m128i qs = _mm_loadu_si128((const __m128i *) b->qs);
    const __m128i lo = _mm_and_si128(qs, _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(15));
    return _mm256_or_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1),
                           _mm256_maskz_set1_epi8((__mmask32) qh, 16));
}

// A block of a Q8_0 row as 32 unsigned bytes: value + 128 (offset 128).
static inline __m256i q0g_q8_0_bytes(const block_q8_0 * b) {
    return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *) b->qs), _mm256_set1_epi8((char) 0x80));
}

// 16 rows' bytes of a block (8 groups of 4 each) to the tile's layout, one register per group with the 16 rows'
// 4 bytes in lane order: an 8x8 transpose of 32-bit groups in each 256-bit half (rows 0-7 and 8-15).
static inline void q0g_store_block(const __m256i v[Q0G_ROWS], uint8_t * out) {
    __m512i z[8], t[8], s[8];
    for (int p = 0; p < 8; p++) {
        z[p] = _mm512_inserti64x4(_mm512_castsi256_si512(v[p]), v[p + 8], 1);
    }
    for (int p = 0; p < 8; p += 2) {
        t[p] = _mm512_unpacklo_epi32(z[p], z[p + 1]);
        t[p + 1] = _mm512_unpackhi_epi32(z[p], z[p + 1]);
    }
    for (int p = 0; p < 8; p += 4) {
        s[p] = _mm512_unpacklo_epi64(t[p], t[p + 2]);     // groups 0 and 4 of 4 rows
        s[p + 1] = _mm512_unpackhi_epi64(t[p], t[p + 2]); // groups 1 and 5
        s[p + 2] = _mm512_unpacklo_epi64(t[p + 1], t[p + 3]);
        s[p + 3] = _mm512_unpackhi_epi64(t[p + 1], t[p + 3]);
    }
    const __m512i low = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const __m512i high = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    for (int k = 0; k < 4; k++) {
        _mm512_store_si512((__m512i *) (out + k * 64), _mm512_permutex2var_epi64(s[k], low, s[k + 4]));
        _mm512_store_si512((__m512i *) (out + (k + 4) * 64), _mm512_permutex2var_epi64(s[k], high, s[k + 4]));
    }
}

// The weight rows of a tile (rows of them, from a, nb01 bytes apart; the other lanes zero) unpacked: for each
// block, the bytes in q0g_store_block's layout and the rows' scales. The 16 fp16 scales are gathered by integer
// moves and widened by one instruction (exactly, as one at a time): widened one at a time, they took about a third
// of the vector instructions of unpacking a Q8_0 tile, which 16 prompts' decode step unpacks for every step.
static void q0g_unpack(const char * a, size_t nb01, int rows, int nb, enum ggml_type type, uint8_t * wq, float * wd) {
    for (int l = 0; l < nb; l++) {
        __m256i v[Q0G_ROWS];
        uint16_t d[Q0G_ROWS];
        for (int r = 0; r < Q0G_ROWS; r++) {
            v[r] = _mm256_setzero_si256();
            d[r] = 0;
            if (r >= rows) {
                continue;
            }
            if (type == GGML_TYPE_Q5_0) {
                const block_q5_0 * b = (const block_q5_0 *) (a + r * nb01) + l;
                v[r] = q0g_q5_0_bytes(b);
                memcpy(&d[r], &b->d, sizeof(d[r]));
            } else {
                const block_q8_0 * b = (const block_q8_0 *) (a + r * nb01) + l;
                v[r] = q0g_q8_0_bytes(b);
                memcpy(&d[r], &b->d, sizeof(d[r]));
            }
        }
        _mm512_storeu_ps(wd + l * Q0G_ROWS, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) d)));
        q0g_store_block(v, wq + (size_t) l * Q0G_BLOCK_BYTES);
    }
}

// nc activation rows (columns of the output) against one unpacked tile. bsum and bd hold each activation
// block's sum of values and scale, so that the offset comes off the exact integer dot.
static inline __attribute__((always_inline)) void q0g_cols(
        const uint8_t * wq, const float * wd, int nb, int32_t offset,
        const block_q8_0 * b, size_t ldb, const int32_t * bsum, const float * bd,
        float * c, size_t ldc, __mmask16 keep, const int nc) {
    __m512 acc[Q0G_COLS];
    for (int j = 0; j < nc; j++) {
        acc[j] = _mm512_setzero_ps();
    }
    for (int l = 0; l < nb; l++) {
        const __m512i * w = (const __m512i *) (wq + (size_t) l * Q0G_BLOCK_BYTES);
        const __m512 dw = _mm512_loadu_ps(wd + l * Q0G_ROWS);
        for (int j = 0; j < nc; j++) {
            const int8_t * q = b[j * ldb + l].qs;
            __m512i dot = _mm512_setzero_si512();
            for (int k = 0; k < Q0G_GROUPS; k++) {
                int32_t x;
                memcpy(&x, q + 4 * k, sizeof(x));
                dot = _mm512_dpbusd_epi32(dot, _mm512_load_si512(w + k), _mm512_set1_epi32(x));
            }
            dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(offset * bsum[j * nb + l]));
            const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(bd[j * nb + l]));
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[j]);
        }
    }
    for (int j = 0; j < nc; j++) {
        _mm512_mask_storeu_ps(c + j * ldc, keep, acc[j]);
    }
}

// Up to 8 weight rows (rows of them, from a, nb01 bytes apart) against one activation row, each output computed
// as q0g_cols computes it, without the tile: for up to four activation rows (a few prompts' decode step),
// unpacking and transposing a tile costs more than its products. The rows are read in the order they lie (each whole, in turn,
// as memory streams best), each block's products summed by vpdpbusd into 8 lanes kept in part; then, block by
// block, the lanes are added across into each row's exact integer dot (exact however its products are summed),
// and the scale and the fma are the same operations in the same order as q0g_cols', so the bits are its bits.
// The hardware prefetcher alone leaves the stream short of the memory's speed on Intel Xeon, so each block asks for
// the bytes Q0G_PREFETCH ahead (a thread's rows follow one another: past a row's end is the next row).
// part holds 8 * nb vectors, scales 8 * nb fp16 values.
static void q0g_rows_one_col(const char * a, size_t nb01, int rows, int nb, enum ggml_type type, int32_t offset,
                             const block_q8_0 * b, const int32_t * bsum, const float * bd, float * c,
                             __m256i * part, uint16_t * scales) {
    for (int r = 0; r < 8; r++) {
        for (int l = 0; l < nb; l++) {
            __m256i d = _mm256_setzero_si256();
            uint16_t dw = 0;  // 0 for the lanes past rows
            if (r < rows) {
                const __m256i x = _mm256_loadu_si256((const __m256i *) b[l].qs);
                _mm_prefetch(a + r * nb01 + (size_t) l * (nb01 / nb) + Q0G_PREFETCH, _MM_HINT_T0);
                if (type == GGML_TYPE_Q5_0) {
                    const block_q5_0 * w = (const block_q5_0 *) (a + r * nb01) + l;
                    d = _mm256_dpbusd_epi32(d, q0g_q5_0_bytes(w), x);
                    memcpy(&dw, &w->d, sizeof(dw));
                } else {
                    const block_q8_0 * w = (const block_q8_0 *) (a + r * nb01) + l;
                    d = _mm256_dpbusd_epi32(d, q0g_q8_0_bytes(w), x);
                    memcpy(&dw, &w->d, sizeof(dw));
                }
            }
            part[l * 8 + r] = d;
            scales[l * 8 + r] = dw;
        }
    }
    __m256 acc = _mm256_setzero_ps();
    for (int l = 0; l < nb; l++) {
        const __m256i * d = part + l * 8;
        // Lane r of dot: the sum of row r's 8 lanes.
        const __m256i s0123 = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
        const __m256i s4567 = _mm256_hadd_epi32(_mm256_hadd_epi32(d[4], d[5]), _mm256_hadd_epi32(d[6], d[7]));
        __m256i dot = _mm256_add_epi32(_mm256_permute2x128_si256(s0123, s4567, 0x20),
                                       _mm256_permute2x128_si256(s0123, s4567, 0x31));
        dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(offset * bsum[l]));
        // fp16 to fp32 is exact, so the converting instruction gives the lookup table's values.
        const __m256 w_scale = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (scales + l * 8)));
        const __m256 scale = _mm256_mul_ps(w_scale, _mm256_set1_ps(bd[l]));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc);
    }
    _mm256_mask_storeu_ps(c, (__mmask8) ((1u << rows) - 1), acc);
}

static bool ggml_q0_gemm_vnni_supports(const struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    return (src0->type == GGML_TYPE_Q5_0 || src0->type == GGML_TYPE_Q8_0) && src0->extra == NULL &&
           src1->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && src0->ne[0] % QK8_0 == 0;
}

// The sums of values and the scales of the ne11 activation rows' blocks (nb each, ldb blocks apart), as q0g_cols
// and q0g_rows_one_col take them.
static void q0g_activation_sums(const block_q8_0 * b, int64_t ne11, size_t ldb, int nb, int32_t * bsum, float * bd) {
    for (int64_t j = 0; j < ne11; j++) {
        for (int l = 0; l < nb; l++) {
            const block_q8_0 * x = b + j * ldb + l;
            const __m256i q = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->qs));
            const __m256i p = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->qs + 1));
            bsum[j * nb + l] = _mm512_reduce_add_epi32(_mm512_cvtepi16_epi32(_mm256_add_epi16(q, p)));
            bd[j * nb + l] = GGML_CPU_FP16_TO_FP32(x->d);
        }
    }
}

// The tile of weight rows from row i0 of a (ne01 rows, nb01 bytes apart) by the ne11 activation rows of b, into c:
// up to Q0G_ONE_COL_MAX of them read the rows as they lie, more unpack the tile once for all and ask for a part of
// ahead's lines (quant-gemm-avx2's qg_ahead: the rows the next tile unpacks) before each pass over them. wq and wd
// are the unpacked tile's room, which the row path takes for its partial sums and scales.
static void q0g_tile(const char * a, size_t nb01, int64_t ne01, int64_t i0, enum ggml_type type, int nb,
                     int32_t offset, const block_q8_0 * b, size_t ldb, int64_t ne11, const int32_t * bsum,
                     const float * bd, float * c, size_t ldc, uint8_t * wq, float * wd, qg_ahead * ahead) {
    const int rows = (int) MIN(Q0G_ROWS, ne01 - i0);
    if (ne11 <= Q0G_ONE_COL_MAX) {
        for (int64_t j = 0; j < ne11; j++) {
            for (int r = 0; r < rows; r += 8) {
                q0g_rows_one_col(a + (i0 + r) * nb01, nb01, MIN(8, rows - r), nb, type, offset, b + j * ldb,
                                 bsum + j * nb, bd + j * nb, c + j * ldc + i0 + r,
                                 (__m256i *) wq, (uint16_t *) (wq + (size_t) nb * 8 * sizeof(__m256i)));
            }
        }
        return;
    }
    q0g_unpack(a + i0 * nb01, nb01, rows, nb, type, wq, wd);
    const __mmask16 keep = (__mmask16) ((1u << rows) - 1);
    int64_t j = 0;
    for (; j + Q0G_COLS <= ne11; j += Q0G_COLS) {
        qg_ahead_part(ahead);
        q0g_cols(wq, wd, nb, offset, b + j * ldb, ldb, bsum + j * nb, bd + j * nb, c + j * ldc + i0, ldc, keep, Q0G_COLS);
    }
    for (; j < ne11; j++) {
        qg_ahead_part(ahead);
        q0g_cols(wq, wd, nb, offset, b + j * ldb, ldb, bsum + j * nb, bd + j * nb, c + j * ldc + i0, ldc, keep, 1);
    }
}

// dst = src0 x src1, src1 already in Q8_0 in wdata (as ggml leaves it for tinyBLAS). The tiles of weight rows go in
// chunks that the threads claim from ggml's shared counter, as quant-gemm-avx2's do (the caller set it to nth
// before its barrier, so chunk ith is this thread's first): a thread held up by anything else on the machine
// leaves its chunks to the others instead of keeping them waiting at the next barrier, and which thread computes a
// row does not touch its arithmetic. A chunk holds as many weight rows as quant-gemm-avx2's: its decode's chunk
// for up to Q0G_ONE_COL_MAX activation rows, its panel's for more; each tile passes over every activation row.
static void ggml_q0_gemm_vnni(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_TENSOR_BINARY_OP_LOCALS

    const int nb = (int) (ne00 / QK8_0);
    const size_t row_size = ggml_row_size(GGML_TYPE_Q8_0, ne10);
    const size_t ldb = row_size / sizeof(block_q8_0);
    const size_t ldc = nb1 / sizeof(float);
    const int32_t offset = src0->type == GGML_TYPE_Q5_0 ? 16 : 128;
    const int64_t tiles = (ne01 + Q0G_ROWS - 1) / Q0G_ROWS;
    const int64_t chunk_tiles = (ne11 <= Q0G_ONE_COL_MAX ? qg_decode_chunk_rows(ne01, params->nth)
                                                         : QG_PANEL_TILES * QG_LANES) / Q0G_ROWS;
    const int64_t plane_chunks = (tiles + chunk_tiles - 1) / chunk_tiles;
    const int64_t chunks = plane_chunks * ne12 * ne13;
    if (params->ith >= chunks) {  // no chunk for this thread: its first would be ith
        return;
    }

    const size_t wq_size = (size_t) nb * Q0G_BLOCK_BYTES;
    uint8_t * wq = (uint8_t *) ggml_aligned_malloc(wq_size);
    float * wd = (float *) malloc((size_t) nb * Q0G_ROWS * sizeof(float));
    int32_t * bsum = (int32_t *) malloc((size_t) ne11 * nb * sizeof(int32_t));
    float * bd = (float *) malloc((size_t) ne11 * nb * sizeof(float));
    GGML_ASSERT(wq && wd && bsum && bd);

    // With unpacked tiles and few activation rows, a thread claims its next chunk when it starts the last tile of
    // this one, so that it can ask for the rows that chunk starts with while this tile works (as quant-gemm-avx2's
    // panels do). Over many activation rows a tile's unpacking is a small share of its time, and asking ahead made
    // prefill slower.
    const bool claim_ahead = ne11 > Q0G_ONE_COL_MAX && ne11 <= QG_CHUNK_COLS;
    const size_t weight_row_bytes = (size_t) nb * ggml_type_size(src0->type);
    const int64_t parts = ne11 / Q0G_COLS + ne11 % Q0G_COLS;  // passes of q0g_cols over a tile
    int64_t plane = -1;
    qg_plane at = {NULL, NULL, NULL};
    for (int64_t chunk = params->ith, next = chunks; chunk < chunks; chunk = next) {
        if (qg_chunk_plane(params, dst, chunk, plane_chunks, row_size, &plane, &at)) {
            q0g_activation_sums((const block_q8_0 *) at.b, ne11, ldb, nb, bsum, bd);
        }
        const int64_t first = chunk % plane_chunks * chunk_tiles;
        const int64_t last = MIN(tiles, first + chunk_tiles);
        for (int64_t t = first; t < last; t++) {
            const char * ahead_a = at.a;
            int64_t ahead_tile = t + 1, ahead_tiles = 1;
            if (claim_ahead && ahead_tile == last) {
                next = ggml_threadpool_chunk_add(params->threadpool, 1);
                ahead_tile = next % plane_chunks * chunk_tiles;
                ahead_tiles = next < chunks;
                ahead_a = next < chunks ? qg_plane_of(params, dst, next / plane_chunks, row_size).a : at.a;
            }
            const int64_t ahead_row = ahead_tile * Q0G_ROWS;
            qg_ahead ahead = qg_ahead_of(ahead_a, nb01, weight_row_bytes, ahead_row,
                                         MIN(ne01, ahead_row + ahead_tiles * Q0G_ROWS), parts);
            q0g_tile(at.a, nb01, ne01, t * Q0G_ROWS, src0->type, nb, offset, (const block_q8_0 *) at.b, ldb, ne11,
                     bsum, bd, at.c, ldc, wq, wd, &ahead);
        }
        if (!claim_ahead) {
            next = ggml_threadpool_chunk_add(params->threadpool, 1);
        }
    }

    ggml_aligned_free(wq, wq_size);
    free(wd);
    free(bsum);
    free(bd);
}
#endif
