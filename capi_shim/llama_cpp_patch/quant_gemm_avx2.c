// newrllama's patch of ggml's CPU matmul for weights in the K-quants Q4_K, Q5_K and Q6_K, with AVX2
// (capi_shim/llama_cpp_patch/apply.py puts it in ggml/src/ggml-cpu/ggml-cpu.c, before the function that dispatches
// a matmul). ggml multiplies these weights with its tiled kernel from 8 activation rows up and with vec_dot
// below, and the two round differently; repacked weights multiply rows in groups of four and the rest one by one.
// So a row's numbers depended on how many rows shared its step, unless the tiled kernel was forced for every
// row count (a setting llama.cpp's source keeps for tests), which pads one row to sixteen.
//
// The arithmetic here is fixed per output, and it is the same for every kernel of this family (the VNNI and AMX
// ones do the same): for each block of the row, in order, the exact integer dot products the block's scales
// define, then the block's floats.
//   Q4_K, Q5_K: S = sum_j sc_j * (q . a)_j, M = sum_j m_j * (sum of a)_j, over the 8 sub-blocks of 32;
//               acc = fma(float(S), d * d_a, acc); acc = fma(-float(M), dmin * d_a, acc)
//   Q6_K:       S = sum_j sc_j * ((q . a)_j - 32 * (sum of a)_j), over the 16 sub-blocks of 16;
//               acc = fma(float(S), d * d_a, acc)
// with q the unsigned codes, a the activation's Q8_K values and d_a its scale. Every integer fits in int32 (at
// most 63 * 31 * 128 * 256 for Q5_K), so the order the SIMD lanes add them in does not matter: any tiling, any
// number of rows or threads, and any unit that sums exactly gives the same bits.
//
// Decode (one activation row) takes 8 weight rows at a time straight from their blocks. More activation rows take
// 4 weight rows at a time, unpacked once (codes as unsigned bytes, each 32 codes' scale register, each block's
// floats) and passed over the activation rows two by two. Either way a tile is 8 outputs, whose integer sums are
// taken along their rows 32 codes at a time (vpmaddubsw, then vpmaddwd with the scales) and folded into one
// register, so that the floats of the 8 outputs are taken together. A tile that runs past the last row or column
// repeats a valid one and does not store it.

#if defined(__AVX2__) && defined(__FMA__)
#define GGML_QUANT_GEMM_AVX2 1

// The build fingerprint (python_core/newrllama/engine/reproducibility.py) finds this text in the library, and
// only where the kernel is compiled in.
const char newrllama_llama_cpp_patch_quant_gemm_avx2[] = "newrllama-llama-cpp-patch: quant-gemm-avx2";

enum {
    QG_LANES = 8,       // outputs per tile
    QG_RUNS = QK_K / 32, // runs of 32 codes per block
    QG_RUN_BYTES = 64,  // an unpacked run: 32 codes, then the 16 int16 that multiply their pair sums
};

// A block of weights as the kernel reads it: the codes and what multiplies them. For Q4_K and Q5_K, sm holds the
// sub-blocks' 6-bit scales (bytes 0-7) and mins (bytes 8-15).
typedef struct {
    enum ggml_type type;
    const void * b;
    uint8_t sm[16];
    float d;
    float dmin;
} qg_block;

static inline qg_block qg_read(enum ggml_type type, const void * row, int l) {
    qg_block k = { .type = type };
    if (type == GGML_TYPE_Q6_K) {
        const block_q6_K * b = (const block_q6_K *) row + l;
        k.b = b;
        k.d = GGML_CPU_FP16_TO_FP32(b->d);
        k.dmin = 0.0f;
        return k;
    }
    const uint8_t * packed;
    if (type == GGML_TYPE_Q5_K) {
        const block_q5_K * b = (const block_q5_K *) row + l;
        k.b = b; packed = b->scales; k.d = GGML_CPU_FP16_TO_FP32(b->d); k.dmin = GGML_CPU_FP16_TO_FP32(b->dmin);
    } else {
        const block_q4_K * b = (const block_q4_K *) row + l;
        k.b = b; packed = b->scales; k.d = GGML_CPU_FP16_TO_FP32(b->d); k.dmin = GGML_CPU_FP16_TO_FP32(b->dmin);
    }
    uint32_t u[4];  // the 12 bytes of 6-bit scales and mins, spread to a byte each
    memcpy(u, packed, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
    const uint32_t m = u[1] & 0x3f3f3f3f;
    u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
    u[2] = m;
    u[0] &= 0x3f3f3f3f;
    memcpy(k.sm, u, 16);
    return k;
}

// Codes 32j .. 32j + 31 of the block, unsigned. Q4_K and Q5_K: sub-block j, the low nibbles of 32 bytes for even j
// and their high nibbles for odd j (Q5_K: bit j of each of 32 bytes is the fifth bit). Q6_K: a half block (128
// codes) has 64 bytes of low nibbles and 32 of 2-bit pairs, and its four runs of 32 codes hold two sub-blocks of
// 16 each.
static inline __m256i qg_codes(const qg_block * k, int j) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    if (k->type == GGML_TYPE_Q6_K) {
        const block_q6_K * b = (const block_q6_K *) k->b;
        const int h = j / 4, i = j % 4;
        __m256i lo = _mm256_loadu_si256((const __m256i *) (b->ql + 64 * h + 32 * (i % 2)));
        if (i >= 2) {
            lo = _mm256_srli_epi16(lo, 4);
        }
        const __m256i hi = _mm256_loadu_si256((const __m256i *) (b->qh + 32 * h));
        return _mm256_or_si256(_mm256_and_si256(lo, low4),
                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hi, 2 * i), _mm256_set1_epi8(3)), 4));
    }
    const uint8_t * qs = k->type == GGML_TYPE_Q5_K ? ((const block_q5_K *) k->b)->qs : ((const block_q4_K *) k->b)->qs;
    __m256i q = _mm256_loadu_si256((const __m256i *) (qs + 32 * (j / 2)));
    q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(q, 4) : q, low4);
    if (k->type == GGML_TYPE_Q5_K) {
        const __m256i bit = _mm256_set1_epi8((char) (1 << j));
        const __m256i h = _mm256_loadu_si256((const __m256i *) ((const block_q5_K *) k->b)->qh);
        q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit), _mm256_set1_epi8(16)));
    }
    return q;
}

// What multiplies run j's 16 pair sums: the first 16 codes' scale in the low 128-bit lane, the last 16 codes' in
// the high one (one scale for the 32-code sub-blocks of Q4_K and Q5_K; Q6_K's sub-blocks 2j and 2j + 1).
static inline __m256i qg_scales(const qg_block * k, int j) {
    if (k->type == GGML_TYPE_Q6_K) {
        const int8_t * s = ((const block_q6_K *) k->b)->scales;
        return _mm256_setr_m128i(_mm_set1_epi16(s[2 * j]), _mm_set1_epi16(s[2 * j + 1]));
    }
    return _mm256_set1_epi16(k->sm[j]);
}

// What multiplies the block's 16 sums of 16 activations: Q4_K and Q5_K the sub-blocks' mins, each twice (the M
// term); Q6_K its 16 scales (the offset 32, applied to S).
static inline __m256i qg_sum_weights(const qg_block * k) {
    if (k->type == GGML_TYPE_Q6_K) {
        return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) ((const block_q6_K *) k->b)->scales));
    }
    const __m128i m = _mm_loadl_epi64((const __m128i *) (k->sm + 8));
    return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m));
}

// The 8 sums of 8 registers' int32 lanes, sum i in lane i.
static inline __m256i qg_fold8(const __m256i v[QG_LANES]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// A block's floats for a tile, from its 8 exact sums S (lane i) and sum terms M:
//   Q4_K, Q5_K: acc = fma(S, d * d_a, acc); acc = fma(-M, dmin * d_a, acc)
//   Q6_K:       acc = fma(S - 32 M, d * d_a, acc)
static inline __m256 qg_floats(enum ggml_type type, __m256 acc, const __m256i sum[QG_LANES],
                               const __m256i term[QG_LANES], __m256 d, __m256 dmin, __m256 da) {
    const __m256i s = qg_fold8(sum);
    const __m256i m = qg_fold8(term);
    if (type == GGML_TYPE_Q6_K) {
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s, _mm256_slli_epi32(m, 5))), _mm256_mul_ps(d, da), acc);
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, da), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, da), acc);
}

// Decode: 8 weight rows (w) by one activation row (x), straight from the blocks. Each row is read whole before the
// next, one stream the prefetcher follows (8 rows block by block were 8 streams, and slower); its blocks' partial
// sums wait in part (per block and row, S's lanes then M's) for the floats, taken 8 rows at a time.
static inline __attribute__((always_inline)) __m256 qg_tile_rows(enum ggml_type type, const char * const * w,
                                                                  const block_q8_K * x, int nb, __m256i * part) {
    float * d = (float *) (part + 2 * QG_LANES * nb);  // d then dmin, per block and row
    for (int r = 0; r < QG_LANES; r++) {
        for (int l = 0; l < nb; l++) {
            const qg_block k = qg_read(type, w[r], l);
            __m256i s = _mm256_setzero_si256();
            for (int j = 0; j < QG_RUNS; j++) {
                const __m256i a = _mm256_loadu_si256((const __m256i *) (x[l].qs + 32 * j));
                s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(qg_codes(&k, j), a), qg_scales(&k, j)));
            }
            part[(2 * l) * QG_LANES + r] = s;
            part[(2 * l + 1) * QG_LANES + r] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) x[l].bsums),
                                                                 qg_sum_weights(&k));
            d[(2 * l) * QG_LANES + r] = k.d;
            d[(2 * l + 1) * QG_LANES + r] = k.dmin;
        }
    }
    __m256 acc = _mm256_setzero_ps();
    for (int l = 0; l < nb; l++) {
        acc = qg_floats(type, acc, part + 2 * l * QG_LANES, part + (2 * l + 1) * QG_LANES,
                        _mm256_loadu_ps(d + 2 * l * QG_LANES), _mm256_loadu_ps(d + (2 * l + 1) * QG_LANES),
                        _mm256_set1_ps(x[l].d));
    }
    return acc;
}

// 4 weight rows, unpacked run by run with the rows of a run side by side, so that a tile reads them through one
// pointer: for run j of block l and row r, at runs + ((l * QG_RUNS + j) * 4 + r) * QG_RUN_BYTES, the codes and
// the scale register; sums[(l * 4 + r)]: what multiplies the block's 16 activation sums; d, dmin[l * 4 + r].
typedef struct {
    uint8_t * runs;
    __m256i * sums;
    float * d;
    float * dmin;
    int nb;
} qg_rows;

static void qg_unpack(enum ggml_type type, const char * row, int r, qg_rows * t) {
    for (int l = 0; l < t->nb; l++) {
        const qg_block k = qg_read(type, row, l);
        for (int j = 0; j < QG_RUNS; j++) {
            uint8_t * run = t->runs + ((size_t) (l * QG_RUNS + j) * 4 + r) * QG_RUN_BYTES;
            _mm256_storeu_si256((__m256i *) run, qg_codes(&k, j));
            _mm256_storeu_si256((__m256i *) (run + 32), qg_scales(&k, j));
        }
        t->sums[l * 4 + r] = qg_sum_weights(&k);
        t->d[l * 4 + r] = k.d;
        t->dmin[l * 4 + r] = k.dmin;
    }
}

// 4 unpacked weight rows by 2 activation rows (x); lane i: weight row i / 2, activation row i % 2.
static inline __attribute__((always_inline)) __m256 qg_tile_unpacked(enum ggml_type type, const qg_rows * t,
                                                                      const block_q8_K * const * x) {
    const __m256i spread = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    __m256 acc = _mm256_setzero_ps();
    for (int l = 0; l < t->nb; l++) {
        __m256i sum[QG_LANES], term[QG_LANES];
        for (int i = 0; i < QG_LANES; i++) {
            sum[i] = _mm256_setzero_si256();
        }
        for (int j = 0; j < QG_RUNS; j++) {
            const __m256i a0 = _mm256_loadu_si256((const __m256i *) (x[0][l].qs + 32 * j));
            const __m256i a1 = _mm256_loadu_si256((const __m256i *) (x[1][l].qs + 32 * j));
            const uint8_t * run = t->runs + (size_t) (l * QG_RUNS + j) * 4 * QG_RUN_BYTES;
            for (int r = 0; r < 4; r++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *) (run + r * QG_RUN_BYTES));
                const __m256i s = _mm256_loadu_si256((const __m256i *) (run + r * QG_RUN_BYTES + 32));
                sum[2 * r] = _mm256_add_epi32(sum[2 * r], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a0), s));
                sum[2 * r + 1] = _mm256_add_epi32(sum[2 * r + 1], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a1), s));
            }
        }
        const __m256i b0 = _mm256_loadu_si256((const __m256i *) x[0][l].bsums);
        const __m256i b1 = _mm256_loadu_si256((const __m256i *) x[1][l].bsums);
        for (int r = 0; r < 4; r++) {
            term[2 * r] = _mm256_madd_epi16(b0, t->sums[l * 4 + r]);
            term[2 * r + 1] = _mm256_madd_epi16(b1, t->sums[l * 4 + r]);
        }
        const __m256 d = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(t->d + l * 4)), spread);
        const __m256 dmin = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(t->dmin + l * 4)), spread);
        const __m256 da = _mm256_blend_ps(_mm256_set1_ps(x[0][l].d), _mm256_set1_ps(x[1][l].d), 0xAA);
        acc = qg_floats(type, acc, sum, term, d, dmin, da);
    }
    return acc;
}

// The three types as compile-time constants of the tiles, so that each gets its own code.
#define QG_BY_TYPE(type, call) \
    ((type) == GGML_TYPE_Q4_K ? call(GGML_TYPE_Q4_K) : (type) == GGML_TYPE_Q5_K ? call(GGML_TYPE_Q5_K) : call(GGML_TYPE_Q6_K))

static bool ggml_quant_gemm_avx2_supports(const struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    return (src0->type == GGML_TYPE_Q4_K || src0->type == GGML_TYPE_Q5_K || src0->type == GGML_TYPE_Q6_K) &&
           src0->extra == NULL && src1->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && src0->ne[0] % QK_K == 0;
}

// dst = src0 x src1 for the weight rows of this thread, src1 already in Q8_K in wdata (ggml converts it before the
// barrier). The threads split the weight rows, 8 or 4 at a time.
static void ggml_quant_gemm_avx2(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_TENSOR_BINARY_OP_LOCALS

    const enum ggml_type type = src0->type;
    const int nb = (int) (ne00 / QK_K);
    const size_t row_size = ggml_row_size(GGML_TYPE_Q8_K, ne10);
    const size_t ldb = row_size / sizeof(block_q8_K);
    const size_t ldc = nb1 / sizeof(float);
    const int R = ne11 == 1 ? 8 : 4;
    const int64_t r2 = ne12 / ne02;
    const int64_t r3 = ne13 / ne03;
    const int64_t tiles = (ne01 + R - 1) / R;
    const int64_t t0 = tiles * params->ith / params->nth;
    const int64_t t1 = tiles * (params->ith + 1) / params->nth;

    qg_rows t = { .nb = nb };
    const size_t runs_size = (size_t) nb * QG_RUNS * 4 * QG_RUN_BYTES;
    const size_t part_size = (size_t) nb * 2 * QG_LANES * (sizeof(__m256i) + sizeof(float));
    __m256i * part = NULL;
    if (R == 8) {
        part = (__m256i *) ggml_aligned_malloc(part_size);
        GGML_ASSERT(part);
    } else {
        t.runs = (uint8_t *) ggml_aligned_malloc(runs_size);
        t.sums = (__m256i *) ggml_aligned_malloc((size_t) nb * 4 * sizeof(__m256i));
        t.d = (float *) malloc((size_t) nb * 4 * sizeof(float));
        t.dmin = (float *) malloc((size_t) nb * 4 * sizeof(float));
        GGML_ASSERT(t.runs && t.sums && t.d && t.dmin);
    }

    for (int64_t i13 = 0; i13 < ne13; i13++) {
        for (int64_t i12 = 0; i12 < ne12; i12++) {
            const char * a = (const char *) src0->data + i12 / r2 * nb02 + i13 / r3 * nb03;
            const block_q8_K * b = (const block_q8_K *) ((const char *) params->wdata + (i12 * ne11 + i13 * ne12 * ne11) * row_size);
            float * c = (float *) ((char *) dst->data + i12 * nb2 + i13 * nb3);
            for (int64_t tile = t0; tile < t1; tile++) {
                const int64_t i0 = tile * R;
                const char * w[QG_LANES];
                for (int r = 0; r < R; r++) {  // rows past the end repeat the last one
                    w[r] = a + MIN(i0 + r, ne01 - 1) * nb01;
                }
                float out[QG_LANES];
                if (R == 8) {
#define QG_ROWS(T) qg_tile_rows(T, w, b, nb, part)
                    _mm256_storeu_ps(out, QG_BY_TYPE(type, QG_ROWS));
#undef QG_ROWS
                    for (int r = 0; r < R && i0 + r < ne01; r++) {
                        c[i0 + r] = out[r];
                    }
                    continue;
                }
                for (int r = 0; r < 4; r++) {
                    qg_unpack(type, w[r], r, &t);
                }
                for (int64_t j = 0; j < ne11; j += 2) {
                    const block_q8_K * x[2] = { b + j * ldb, b + MIN(j + 1, ne11 - 1) * ldb };
#define QG_UNPACKED(T) qg_tile_unpacked(T, &t, x)
                    _mm256_storeu_ps(out, QG_BY_TYPE(type, QG_UNPACKED));
#undef QG_UNPACKED
                    for (int r = 0; r < 4 && i0 + r < ne01; r++) {
                        for (int k = 0; k < 2 && j + k < ne11; k++) {
                            c[(j + k) * ldc + i0 + r] = out[2 * r + k];
                        }
                    }
                }
            }
        }
    }

    if (R == 8) {
        ggml_aligned_free(part, part_size);
    } else {
        ggml_aligned_free(t.runs, runs_size);
        ggml_aligned_free(t.sums, (size_t) nb * 4 * sizeof(__m256i));
        free(t.d);
        free(t.dmin);
    }
}
#endif
