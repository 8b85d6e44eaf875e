// newrllama's patch of ggml's CPU matmul for weights in Q5_0 and Q8_0 on CPUs with AVX2 but without AVX512-VNNI
// (capi_shim/llama_cpp_patch/apply.py puts it in ggml/src/ggml-cpu/ggml-cpu.c after quant-gemm-avx2, whose
// transpose and panel sizes it uses). Where q0-gemm-vnni is not compiled in, ggml multiplies these weights with
// llamafile's tinyBLAS, batch-invariant with other bits, which unpacks a weight block again for every few activation
// rows. This gives q0-gemm-vnni's bits with AVX2: the same defined arithmetic per output (for each block in order,
// acc = fma(float(exact dot), d_weight * d_activation, acc)), so a model's numbers are the same on either CPU.
//
// A panel of 8 weight rows is unpacked once per pass over the activations: for each group of 4 codes, one register
// holding the 8 rows' 4 codes (lane r: row r), so that one vpmaddubsw multiplies 8 rows by 4 broadcast activations.
// Its int16 pair sums must not saturate. Q5_0 codes are taken unsigned (the value plus 16, at most 31; the offset
// comes off with the activations' block sum), and 4 groups of them add up exactly in int16 (4 * 2 * 31 * 127 <
// 32768) before vpmaddwd widens them. Q8_0 codes are taken as magnitudes, their signs moved onto the activations
// (vpsignb), so a pair sum is at most 2 * 128 * 127 and each group is widened at once.

#if defined(GGML_QUANT_GEMM_AVX2) && !defined(GGML_Q0_GEMM_VNNI)
#define GGML_Q0_GEMM_AVX2 1

// The build fingerprint (python_core/newrllama/engine/llama/reproducibility.py) finds this text in the library.
const char newrllama_llama_cpp_patch_q0_gemm_avx2[] = "newrllama-llama-cpp-patch: q0-gemm-avx2";

enum {
    Q0A_GROUPS = QK8_0 / 4,  // groups of 4 codes per block
    Q0A_UNIT = 4,            // Q5_0 groups whose int16 pair sums add up before they are widened
};

// 8 weight rows unpacked: codes[l * Q0A_GROUPS + g] the rows' 4 codes of group g of block l (Q5_0 unsigned, Q8_0
// magnitudes), signs the same for the signed Q8_0 values (NULL for Q5_0), d[l * 8 + r] the rows' scales.
typedef struct {
    __m256i * codes;
    __m256i * signs;
    float * d;
} q0a_panel;

// Byte i of the result: 16 where bit i of the 32 bits at p is set, else 0.
static inline __m256i q0a_fifth_bits(const uint8_t * p) {
    uint32_t bits;
    memcpy(&bits, p, sizeof(bits));
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int) bits),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                                2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ULL);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(16));
}

// Block l of a Q5_0 row as 32 unsigned bytes, the value plus 16 (codes 0-15 in the low nibbles, 16-31 in the high).
static inline __m256i q0a_q5_0_codes(const block_q5_0 * b) {
    const __m128i qs = _mm_loadu_si128((const __m128i *) b->qs);
    const __m128i lo = _mm_and_si128(qs, _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(15));
    return _mm256_or_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1), q0a_fifth_bits(b->qh));
}

static inline __attribute__((always_inline)) void q0a_unpack_panel(enum ggml_type type, const char * const * w, int nb,
                                                                    q0a_panel * p) {
    for (int l = 0; l < nb; l++) {
        __m256i v[QG_LANES];
        uint16_t d[QG_LANES];  // widened together, as q0-gemm-vnni's unpacking does
        for (int r = 0; r < QG_LANES; r++) {
            if (type == GGML_TYPE_Q5_0) {
                const block_q5_0 * b = (const block_q5_0 *) w[r] + l;
                v[r] = q0a_q5_0_codes(b);
                memcpy(&d[r], &b->d, sizeof(d[r]));
            } else {
                const block_q8_0 * b = (const block_q8_0 *) w[r] + l;
                v[r] = _mm256_loadu_si256((const __m256i *) b->qs);
                memcpy(&d[r], &b->d, sizeof(d[r]));
            }
        }
        _mm256_storeu_ps(p->d + l * QG_LANES, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) d)));
        __m256i * codes = p->codes + l * Q0A_GROUPS;
        qg_transpose8(v, codes);
        if (type == GGML_TYPE_Q8_0) {
            for (int g = 0; g < Q0A_GROUPS; g++) {
                p->signs[l * Q0A_GROUPS + g] = codes[g];
                codes[g] = _mm256_abs_epi8(codes[g]);
            }
        }
    }
}

// The panel by C activation rows (x, with each block's sum of values in bsum[c][l]): out[c * 8 + r] = output of
// weight row r and activation row c.
static inline __attribute__((always_inline)) void q0a_panel_cols(enum ggml_type type, const q0a_panel * p,
                                                                   const block_q8_0 * const * x,
                                                                   const int32_t * const * bsum, int nb, float * out,
                                                                   const int C) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[QG_PANEL_COLS];
    for (int c = 0; c < C; c++) {
        acc[c] = _mm256_setzero_ps();
    }
    for (int l = 0; l < nb; l++) {
        const __m256i * codes = p->codes + l * Q0A_GROUPS;
        __m256i dot[QG_PANEL_COLS];
        for (int c = 0; c < C; c++) {
            dot[c] = _mm256_setzero_si256();
        }
        if (type == GGML_TYPE_Q5_0) {
            for (int u = 0; u < Q0A_GROUPS; u += Q0A_UNIT) {
                __m256i unit[QG_PANEL_COLS];
                for (int c = 0; c < C; c++) {
                    unit[c] = _mm256_setzero_si256();
                }
                for (int g = u; g < u + Q0A_UNIT; g++) {
                    const __m256i w = _mm256_load_si256(codes + g);
                    for (int c = 0; c < C; c++) {
                        int32_t a;
                        memcpy(&a, x[c][l].qs + 4 * g, sizeof(a));
                        unit[c] = _mm256_add_epi16(unit[c], _mm256_maddubs_epi16(w, _mm256_set1_epi32(a)));
                    }
                }
                for (int c = 0; c < C; c++) {
                    dot[c] = _mm256_add_epi32(dot[c], _mm256_madd_epi16(unit[c], ones));
                }
            }
            for (int c = 0; c < C; c++) {
                dot[c] = _mm256_sub_epi32(dot[c], _mm256_set1_epi32(16 * bsum[c][l]));
            }
        } else {
            const __m256i * signs = p->signs + l * Q0A_GROUPS;
            for (int g = 0; g < Q0A_GROUPS; g++) {
                const __m256i w = _mm256_load_si256(codes + g);
                const __m256i s = _mm256_load_si256(signs + g);
                for (int c = 0; c < C; c++) {
                    int32_t a;
                    memcpy(&a, x[c][l].qs + 4 * g, sizeof(a));
                    const __m256i pairs = _mm256_maddubs_epi16(w, _mm256_sign_epi8(_mm256_set1_epi32(a), s));
                    dot[c] = _mm256_add_epi32(dot[c], _mm256_madd_epi16(pairs, ones));
                }
            }
        }
        const __m256 dw = _mm256_loadu_ps(p->d + l * QG_LANES);
        for (int c = 0; c < C; c++) {
            const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(GGML_CPU_FP16_TO_FP32(x[c][l].d)));
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[c]), scale, acc[c]);
        }
    }
    for (int c = 0; c < C; c++) {
        _mm256_storeu_ps(out + c * QG_LANES, acc[c]);
    }
}

// One activation row (x, its blocks' sums in bsum) by 8 weight rows straight from their blocks, without a panel.
// Each row is read whole before the next, one stream (8 rows block by block were 8 streams, which the hardware
// prefetcher left waiting on memory), asking for the bytes QG_PREFETCH ahead: past a row's end is the next row of
// the thread's chunk. A block's 8 partial sums per row wait in part and its scale in h; then, block by block, they fold to
// the rows' exact dots (qg_fold8) and take the floats in block order, so the bits do not depend on the read order.
static inline __attribute__((always_inline)) __m256 q0a_decode_tile(enum ggml_type type, const char * const * w,
                                                                    const block_q8_0 * x, const int32_t * bsum, int nb,
                                                                    __m256i * part, ggml_half * h) {
    const __m256i ones = _mm256_set1_epi16(1);
    const size_t block_size = type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0) : sizeof(block_q8_0);
    for (int r = 0; r < QG_LANES; r++) {
        for (int l = 0; l < nb; l++) {
            const char * wb = w[r] + l * block_size;
            _mm_prefetch(wb + QG_PREFETCH, _MM_HINT_T0);
            const __m256i a = _mm256_loadu_si256((const __m256i *) x[l].qs);
            __m256i pairs;
            if (type == GGML_TYPE_Q5_0) {
                const block_q5_0 * b = (const block_q5_0 *) wb;
                pairs = _mm256_maddubs_epi16(q0a_q5_0_codes(b), a);
                h[l * QG_LANES + r] = b->d;
            } else {
                const block_q8_0 * b = (const block_q8_0 *) wb;
                const __m256i q = _mm256_loadu_si256((const __m256i *) b->qs);
                pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(a, q));
                h[l * QG_LANES + r] = b->d;
            }
            part[l * QG_LANES + r] = _mm256_madd_epi16(pairs, ones);
        }
    }
    __m256 acc = _mm256_setzero_ps();
    for (int l = 0; l < nb; l++) {
        __m256i dot = qg_fold8(part + l * QG_LANES);
        if (type == GGML_TYPE_Q5_0) {
            dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(16 * bsum[l]));
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (h + l * QG_LANES)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(GGML_CPU_FP16_TO_FP32(x[l].d))), acc);
    }
    return acc;
}

static bool ggml_q0_gemm_avx2_supports(const struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    return (src0->type == GGML_TYPE_Q5_0 || src0->type == GGML_TYPE_Q8_0) && src0->extra == NULL &&
           src1->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && src0->ne[0] % QK8_0 == 0;
}

// The two types as compile-time constants of the panels, so that each gets its own code.
#define Q0A_BY_TYPE(type, call) ((type) == GGML_TYPE_Q5_0 ? call(GGML_TYPE_Q5_0) : call(GGML_TYPE_Q8_0))

// Q5_0's codes are taken plus 16, which each output takes off with its activation block's sum of values:
// bsum[j * nb + l] for activation row j and block l.
static void q0a_block_sums(const block_q8_0 * b, int64_t rows, size_t ldb, int nb, int32_t * bsum) {
    for (int64_t j = 0; j < rows; j++) {
        for (int l = 0; l < nb; l++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *) b[j * ldb + l].qs);
            const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
            const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            const __m128i f = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
            bsum[j * nb + l] = _mm_cvtsi128_si32(_mm_add_epi32(f, _mm_shuffle_epi32(f, 0xb1)));
        }
    }
}

// One activation row by the tiles [first, last) of a plane: q0a_decode_tile's, with its partial sums and scales.
static void q0a_decode_tiles(enum ggml_type type, const char * a, size_t nb01, int64_t ne01, const block_q8_0 * b,
                             const int32_t * bsum, int nb, int64_t first, int64_t last, float * c, __m256i * part,
                             ggml_half * h) {
    for (int64_t tile = first; tile < last; tile++) {
        const int64_t i0 = tile * QG_LANES;
        const char * w[QG_LANES];
        qg_weight_rows(a, nb01, ne01, i0, w);
        float out[QG_LANES];
#define Q0A_DECODE(T) q0a_decode_tile(T, w, b, bsum, nb, part, h)
        _mm256_storeu_ps(out, Q0A_BY_TYPE(type, Q0A_DECODE));
#undef Q0A_DECODE
        memcpy(c + i0, out, MIN(QG_LANES, ne01 - i0) * sizeof(float));
    }
}

// Activation rows [j0, j1) of a plane by the tiles [first, last), each tile's panel unpacked once for them all.
static void q0a_panel_tiles(enum ggml_type type, const char * a, size_t nb01, int64_t ne01, const block_q8_0 * b,
                            size_t ldb, const int32_t * bsum, int nb, int64_t first, int64_t last, int64_t j0,
                            int64_t j1, float * c, size_t ldc, q0a_panel * p) {
    for (int64_t tile = first; tile < last; tile++) {
        const int64_t i0 = tile * QG_LANES;
        const int rows = (int) MIN(QG_LANES, ne01 - i0);
        const char * w[QG_LANES];
        qg_weight_rows(a, nb01, ne01, i0, w);
#define Q0A_UNPACK(T) q0a_unpack_panel(T, w, nb, p)
        Q0A_BY_TYPE(type, Q0A_UNPACK);
#undef Q0A_UNPACK
        for (int64_t j = j0; j < j1; j += QG_PANEL_COLS) {
            const int cols = (int) MIN(QG_PANEL_COLS, j1 - j);
            const block_q8_0 * x[QG_PANEL_COLS];
            const int32_t * s[QG_PANEL_COLS];
            for (int k = 0; k < cols; k++) {
                x[k] = b + (j + k) * ldb;
                s[k] = bsum + (j + k) * nb;
            }
            float out[QG_PANEL_COLS * QG_LANES];
#define Q0A_COLS4(T) q0a_panel_cols(T, p, x, s, nb, out, QG_PANEL_COLS)
#define Q0A_COLS1(T) q0a_panel_cols(T, p, x + k, s + k, nb, out + k * QG_LANES, 1)
            if (cols == QG_PANEL_COLS) {
                Q0A_BY_TYPE(type, Q0A_COLS4);
            } else {  // the last 1-3 activation rows, one at a time
                for (int k = 0; k < cols; k++) {
                    Q0A_BY_TYPE(type, Q0A_COLS1);
                }
            }
#undef Q0A_COLS4
#undef Q0A_COLS1
            for (int k = 0; k < cols; k++) {
                memcpy(c + (j + k) * ldc + i0, out + k * QG_LANES, rows * sizeof(float));
            }
        }
    }
}

// dst = src0 x src1, src1 already in Q8_0 in wdata (as ggml leaves it for tinyBLAS). The work goes in chunks that
// the threads claim from ggml's shared counter, as quant-gemm-avx2's do (the caller set it to nth before its
// barrier, so chunk ith is this thread's first): a thread held up by anything else on the machine leaves its chunks
// to the others instead of keeping them waiting at the next barrier, and which thread computes a row does not touch
// its arithmetic. One activation row: qg_decode_chunk_rows a chunk, read by q0a_decode_tile. More: QG_PANEL_TILES
// tiles by QG_CHUNK_COLS activation rows, the tiles varying fastest so that the threads pass over the same
// activation rows while they are in cache.
static void ggml_q0_gemm_avx2(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_TENSOR_BINARY_OP_LOCALS

    const enum ggml_type type = src0->type;
    const int nb = (int) (ne00 / QK8_0);
    const size_t row_size = ggml_row_size(GGML_TYPE_Q8_0, ne10);
    const size_t ldb = row_size / sizeof(block_q8_0);
    const size_t ldc = nb1 / sizeof(float);
    const bool one_row = ne11 == 1;
    const int64_t tiles = (ne01 + QG_LANES - 1) / QG_LANES;
    const int64_t chunk_tiles = one_row ? qg_decode_chunk_rows(ne01, params->nth) / QG_LANES : QG_PANEL_TILES;
    const int64_t tile_chunks = (tiles + chunk_tiles - 1) / chunk_tiles;
    const int64_t col_chunks = (ne11 + QG_CHUNK_COLS - 1) / QG_CHUNK_COLS;
    const int64_t plane_chunks = tile_chunks * col_chunks;
    const int64_t chunks = plane_chunks * ne12 * ne13;
    if (params->ith >= chunks) {  // no chunk for this thread: its first would be ith
        return;
    }

    // One activation row needs decode's partial sums and scales; more need a panel.
    const size_t codes_size = (size_t) nb * Q0A_GROUPS * sizeof(__m256i);
    const size_t part_size = (size_t) nb * QG_LANES * sizeof(__m256i);
    q0a_panel p = {NULL, NULL, NULL};
    __m256i * part = NULL;
    ggml_half * h = NULL;
    if (one_row) {
        part = (__m256i *) ggml_aligned_malloc(part_size);
        h = (ggml_half *) malloc((size_t) nb * QG_LANES * sizeof(ggml_half));
        GGML_ASSERT(part && h);
    } else {
        p.codes = (__m256i *) ggml_aligned_malloc(codes_size);
        p.signs = type == GGML_TYPE_Q8_0 ? (__m256i *) ggml_aligned_malloc(codes_size) : NULL;
        p.d = (float *) malloc((size_t) nb * QG_LANES * sizeof(float));
        GGML_ASSERT(p.codes && (p.signs || type != GGML_TYPE_Q8_0) && p.d);
    }
    int32_t * bsum = (int32_t *) malloc((size_t) ne11 * nb * sizeof(int32_t));
    GGML_ASSERT(bsum);

    int64_t plane = -1;
    qg_plane at = {NULL, NULL, NULL};
    for (int64_t chunk = params->ith; chunk < chunks; chunk = ggml_threadpool_chunk_add(params->threadpool, 1)) {
        const bool moved = qg_chunk_plane(params, dst, chunk, plane_chunks, row_size, &plane, &at);
        const block_q8_0 * b = (const block_q8_0 *) at.b;
        if (moved && type == GGML_TYPE_Q5_0) {
            q0a_block_sums(b, ne11, ldb, nb, bsum);
        }
        const int64_t first = chunk % tile_chunks * chunk_tiles;
        const int64_t last = MIN(tiles, first + chunk_tiles);
        if (one_row) {
            q0a_decode_tiles(type, at.a, nb01, ne01, b, bsum, nb, first, last, at.c, part, h);
        } else {
            const int64_t j0 = chunk / tile_chunks % col_chunks * QG_CHUNK_COLS;
            q0a_panel_tiles(type, at.a, nb01, ne01, b, ldb, bsum, nb, first, last, j0, MIN(ne11, j0 + QG_CHUNK_COLS),
                            at.c, ldc, &p);
        }
    }

    if (one_row) {
        ggml_aligned_free(part, part_size);
        free(h);
    } else {
        ggml_aligned_free(p.codes, codes_size);
        if (p.signs) {
            ggml_aligned_free(p.signs, codes_size);
        }
        free(p.d);
    }
    free(bsum);
}
#endif
