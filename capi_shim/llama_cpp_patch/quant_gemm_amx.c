// newrllama's patch of ggml's CPU matmul: Q4_K, Q5_K and Q6_K weights by many activation rows with AMX tiles
// (capi_shim/llama_cpp_patch/apply.py puts it in ggml/src/ggml-cpu/ggml-cpu.c after quant-gemm-avx2, whose
// helpers it uses and whose arithmetic it gives bit for bit). Prefill and wide batches are nearly all of an
// annotation job's work, and a tile product takes 16 x 16 x 64 byte products in one instruction.
//
// Why the bits are quant-gemm-avx2's: a tile adds its byte products exactly in int32, so only the integers it is
// given matter. A weight's sub-block scale is folded into its code first, w = sc * q (Q6_K: sc * (q - 32)), which
// takes up to 13 bits; w is split into its low byte (unsigned) and the rest (signed, |hi| <= 16), w = lo + 256 hi,
// and two tile products give S = (lo . a) + 256 (hi . a): the integer S that quant-gemm-avx2 sums sub-block by
// sub-block. M (Q4_K and Q5_K) comes from the activations' sums of 32, with vpdpwssd, exactly. The floats follow in
// the same order, acc = fma(float(S), d * d_a, acc), then acc = fma(-float(M), dmin * d_a, acc), block by block.
//
// Layout: C[activation row][weight row] += A[activation row][64 values] . B[16 groups of 4 values][weight row].
// A is read straight from the Q8_K activation rows. B holds the lo or hi bytes of a panel of 16 weight rows, each
// 64 values as 16 groups of 4 (AMX's layout: a 16 x 16 transpose of 4-byte groups), prepared once per panel and
// used by every activation row. Two activation tiles share each B: tiles 0-3 hold C (lo and hi of each), 4-5 A,
// 6-7 B.
//
// Tiles need the process's permission, asked for once (arch_prctl); where the kernel refuses it, or the CPU lacks
// AMX-INT8, or NEWRLLAMA_AMX=off, quant-gemm-avx2 takes every matmul with the same bits.

#if defined(GGML_QUANT_GEMM_AVX2) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && \
    defined(__linux__) && defined(__x86_64__)
#define GGML_QUANT_GEMM_AMX 1

#include <cpuid.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

// The build fingerprint (python_core/newrllama/engine/reproducibility.py) finds this text in the library.
const char newrllama_llama_cpp_patch_quant_gemm_amx[] = "newrllama-llama-cpp-patch: quant-gemm-amx";

enum {
    QA_ROWS = 16,                    // weight rows per panel, activation rows per tile
    QA_CHUNKS = QK_K / 64,           // tile products per block and part
    QA_TILE_BYTES = 16 * 64,
    QA_BLOCK_BYTES = QA_CHUNKS * 2 * QA_TILE_BYTES, // a panel's block: lo and hi of each chunk
    QA_MIN_ROWS = 16,                // fewer activation rows go to quant-gemm-avx2
    QA_ARCH_REQ_XCOMP_PERM = 0x1023, // arch_prctl code and the tile data's state component (Linux uapi)
    QA_XFEATURE_XTILEDATA = 18,
};

// 1 once the process may use tiles, -1 if it may not, 0 until a many-row matmul first asks; every thread that asks
// gets the same answer, so the threads of a matmul agree on its kernel.
static atomic_int qa_permission;

static bool qa_usable(void) {
    int state = atomic_load_explicit(&qa_permission, memory_order_relaxed);
    if (state == 0) {
        unsigned a, b, c, d;
        const char * setting = getenv("NEWRLLAMA_AMX");
        const bool wanted = setting == NULL || strcmp(setting, "off") != 0;
        const bool has = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 25 & 1);
        state = wanted && has && syscall(SYS_arch_prctl, QA_ARCH_REQ_XCOMP_PERM, QA_XFEATURE_XTILEDATA) == 0 ? 1 : -1;
        atomic_store_explicit(&qa_permission, state, memory_order_relaxed);
    }
    return state == 1;
}

static bool ggml_quant_gemm_amx_takes(const struct ggml_tensor * dst) {
    return dst->src[1]->ne[1] >= QA_MIN_ROWS && qa_usable();
}

// The tile instructions, written out so that the build's -mno-amx-* (llama.cpp's own AMX kernels stay off) does not
// hide them. tdpbsud: signed A bytes by unsigned B bytes; tdpbssd: both signed.
#define QA_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t :: "r"(base), "r"((int64_t) (stride)) : "memory")
#define QA_STORE(t, base) __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" :: "r"(base), "r"((int64_t) 64) : "memory")
#define QA_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define QA_DP_SU(c, a, b) __asm__ volatile("tdpbsud %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
#define QA_DP_SS(c, a, b) __asm__ volatile("tdpbssd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} qa_tile_config;

static void qa_configure(void) {
    qa_tile_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.bytes_per_row[t] = 64;
        cfg.rows[t] = 16;
    }
    __asm__ volatile("ldtilecfg %0" :: "m"(cfg));
}

// A panel of 16 weight rows, ready for the tiles: bytes[(l * QA_CHUNKS + c) * 2 + part] is B for chunk c of block
// l (part 0 lo, 1 hi); d and dmin[l * 16 + r]; mins[l * 4 + p] the rows' mins of sub-blocks 2p and 2p + 1 as an
// int16 pair per lane (Q4_K and Q5_K).
typedef struct {
    uint8_t * bytes;
    float * d;
    float * dmin;
    __m512i * mins;
} qa_panel;

// 16 registers of 16 int32 transposed: out[g] lane n = in[n] lane g.
static inline void qa_transpose16(const __m512i in[16], __m512i out[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(in[i], in[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(in[i], in[i + 1]);
    }
    // u[4i + k]: in each 128-bit lane L, group 4L + k of rows 4i .. 4i + 3
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int k = 0; k < 4; k++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x44);
        const __m512i v1 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xee);
        const __m512i w0 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x44);
        const __m512i w1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xee);
        out[k] = _mm512_shuffle_i32x4(v0, w0, 0x88);
        out[4 + k] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
        out[8 + k] = _mm512_shuffle_i32x4(v1, w1, 0x88);
        out[12 + k] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
    }
}

// One weight row's block as w = lo + 256 hi, its scales folded in (see the top of the file).
static inline void qa_fold_scales(enum ggml_type type, const void * b, const qg_block * k, uint8_t * lo, uint8_t * hi) {
    for (int j = 0; j < QG_RUNS; j++) {
        __m512i w = _mm512_cvtepu8_epi16(qg_codes(type, b, j));
        __m512i sc;
        if (type == GGML_TYPE_Q6_K) {  // run j holds sub-blocks 2j and 2j + 1, 16 codes each
            const int8_t * s = ((const block_q6_K *) b)->scales;
            w = _mm512_sub_epi16(w, _mm512_set1_epi16(32));
            sc = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(s[2 * j])), _mm256_set1_epi16(s[2 * j + 1]), 1);
        } else {
            sc = _mm512_set1_epi16(k->sm[j]);
        }
        w = _mm512_mullo_epi16(w, sc);
        _mm256_storeu_si256((__m256i *) (lo + 32 * j), _mm512_cvtepi16_epi8(w));
        _mm256_storeu_si256((__m256i *) (hi + 32 * j), _mm512_cvtepi16_epi8(_mm512_srai_epi16(w, 8)));
    }
}

static inline __attribute__((always_inline)) void qa_prepare_panel(enum ggml_type type, const char * const * w,
                                                                    int nb, qa_panel * p) {
    const size_t block_size = type == GGML_TYPE_Q6_K ? sizeof(block_q6_K)
                              : type == GGML_TYPE_Q5_K ? sizeof(block_q5_K) : sizeof(block_q4_K);
    uint8_t folded[2][QA_ROWS][QK_K];
    for (int l = 0; l < nb; l++) {
        uint16_t mins[4][QA_ROWS][2];
        for (int r = 0; r < QA_ROWS; r++) {
            const void * b = w[r] + l * block_size;
            const qg_block k = qg_read(type, w[r], l);
            qa_fold_scales(type, b, &k, folded[0][r], folded[1][r]);
            p->d[l * QA_ROWS + r] = k.d;
            p->dmin[l * QA_ROWS + r] = k.dmin;
            for (int i = 0; i < 4 && type != GGML_TYPE_Q6_K; i++) {
                mins[i][r][0] = k.sm[8 + 2 * i];
                mins[i][r][1] = k.sm[8 + 2 * i + 1];
            }
        }
        if (type != GGML_TYPE_Q6_K) {
            for (int i = 0; i < 4; i++) {
                p->mins[l * 4 + i] = _mm512_loadu_si512(mins[i]);
            }
        }
        for (int c = 0; c < QA_CHUNKS; c++) {
            for (int part = 0; part < 2; part++) {
                __m512i in[QA_ROWS], out[QA_ROWS];
                for (int r = 0; r < QA_ROWS; r++) {
                    in[r] = _mm512_loadu_si512(folded[part][r] + 64 * c);
                }
                qa_transpose16(in, out);
                uint8_t * dst = p->bytes + (size_t) ((l * QA_CHUNKS + c) * 2 + part) * QA_TILE_BYTES;
                for (int g = 0; g < QA_ROWS; g++) {
                    _mm512_store_si512(dst + 64 * g, out[g]);
                }
            }
        }
    }
}

// The activations' values, rows x of nb blocks, laid out for the A tiles: a tile's 16 rows of one chunk in 1024
// contiguous bytes, packed[((t * nb + l) * QA_CHUNKS + c) * QA_TILE_BYTES], for activation tile t (row 16t + m at
// offset 64m; rows past the end repeat the last one). Read in place, each 64-byte row of a tile spans two cache
// lines of rows 292 * nb bytes apart, and the loads, not the products, set the pace.
static void qa_pack_activations(const block_q8_K * x, size_t ldb, int64_t rows, int nb, uint8_t * packed) {
    const int64_t tiles = (rows + QA_ROWS - 1) / QA_ROWS;
    for (int64_t t = 0; t < tiles; t++) {
        for (int m = 0; m < QA_ROWS; m++) {
            const block_q8_K * xr = x + MIN(t * QA_ROWS + m, rows - 1) * ldb;
            for (int l = 0; l < nb; l++) {
                for (int c = 0; c < QA_CHUNKS; c++) {
                    _mm512_store_si512(packed + ((t * nb + l) * QA_CHUNKS + c) * QA_TILE_BYTES + 64 * m,
                                       _mm512_loadu_si512(xr[l].qs + 64 * c));
                }
            }
        }
    }
}

// The activation sums that M takes (Q4_K and Q5_K), for rows x of nb blocks: sums[(row * nb + l) * 4 + p] the sums
// of sub-blocks 2p and 2p + 1 of block l as an int16 pair, ready for vpdpwssd.
static void qa_activation_sums(const block_q8_K * x, size_t ldb, int64_t rows, int nb, int32_t * sums) {
    for (int64_t m = 0; m < rows; m++) {
        for (int l = 0; l < nb; l++) {
            const block_q8_K * xb = x + m * ldb + l;
            _mm_storeu_si128((__m128i *) (sums + (m * nb + l) * 4),
                             _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) xb->bsums),
                                            _mm_loadu_si128((const __m128i *) (xb->bsums + 8))));
        }
    }
}

// The floats of block l for 16 activation rows x (their C tiles stored in lo and hi, their qa_activation_sums in
// sums) into acc[m][weight row].
static inline __attribute__((always_inline)) void qa_block_floats(enum ggml_type type, const qa_panel * p,
                                                                   const block_q8_K * x, size_t ldb, int nb, int l,
                                                                   const int32_t * lo, const int32_t * hi,
                                                                   const int32_t * sums, __m512 * acc) {
    const __m512 d = _mm512_loadu_ps(p->d + l * QA_ROWS);
    const __m512 dmin = _mm512_loadu_ps(p->dmin + l * QA_ROWS);
    for (int m = 0; m < QA_ROWS; m++) {
        const __m512i s = _mm512_add_epi32(_mm512_load_si512(lo + 16 * m), _mm512_slli_epi32(_mm512_load_si512(hi + 16 * m), 8));
        const __m512 da = _mm512_set1_ps(x[m * ldb + l].d);
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, da), acc[m]);
        if (type != GGML_TYPE_Q6_K) {
            const int32_t * pairs = sums + (m * nb + l) * 4;
            __m512i mm = _mm512_dpwssd_epi32(_mm512_setzero_si512(), p->mins[l * 4], _mm512_set1_epi32(pairs[0]));
            mm = _mm512_dpwssd_epi32(mm, p->mins[l * 4 + 1], _mm512_set1_epi32(pairs[1]));
            mm = _mm512_dpwssd_epi32(mm, p->mins[l * 4 + 2], _mm512_set1_epi32(pairs[2]));
            mm = _mm512_dpwssd_epi32(mm, p->mins[l * 4 + 3], _mm512_set1_epi32(pairs[3]));
            acc[m] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mm), _mm512_mul_ps(dmin, da), acc[m]);
        }
    }
}

// The panel by 16 or 32 activation rows (x0, and x1 unless NULL; each 16 rows of ldb blocks apart, their values
// as qa_pack_activations lays them out in a0 and a1 and their qa_activation_sums in s0 and s1) into acc[32][16].
static inline __attribute__((always_inline)) void qa_tiles(enum ggml_type type, const qa_panel * p, int nb,
                                                            const block_q8_K * x0, const block_q8_K * x1, size_t ldb,
                                                            const uint8_t * a0, const uint8_t * a1,
                                                            const int32_t * s0, const int32_t * s1, __m512 * acc) {
    int32_t c[4][QA_ROWS * QA_ROWS] __attribute__((aligned(64)));
    for (int l = 0; l < nb; l++) {
        QA_ZERO(0);
        QA_ZERO(1);
        QA_ZERO(2);
        QA_ZERO(3);
        for (int k = 0; k < QA_CHUNKS; k++) {
            const uint8_t * b = p->bytes + (size_t) ((l * QA_CHUNKS + k) * 2) * QA_TILE_BYTES;
            QA_LOAD(6, b, 64);
            QA_LOAD(7, b + QA_TILE_BYTES, 64);
            QA_LOAD(4, a0 + (l * QA_CHUNKS + k) * QA_TILE_BYTES, 64);
            QA_DP_SU(0, 4, 6);
            QA_DP_SS(1, 4, 7);
            if (x1) {
                QA_LOAD(5, a1 + (l * QA_CHUNKS + k) * QA_TILE_BYTES, 64);
                QA_DP_SU(2, 5, 6);
                QA_DP_SS(3, 5, 7);
            }
        }
        QA_STORE(0, c[0]);
        QA_STORE(1, c[1]);
        qa_block_floats(type, p, x0, ldb, nb, l, c[0], c[1], s0, acc);
        if (x1) {
            QA_STORE(2, c[2]);
            QA_STORE(3, c[3]);
            qa_block_floats(type, p, x1, ldb, nb, l, c[2], c[3], s1, acc + QA_ROWS);
        }
    }
}

static void ggml_quant_gemm_amx(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_TENSOR_BINARY_OP_LOCALS

    const enum ggml_type type = src0->type;
    const int nb = (int) (ne00 / QK_K);
    const size_t row_size = ggml_row_size(GGML_TYPE_Q8_K, ne10);
    const size_t ldb = row_size / sizeof(block_q8_K);
    const size_t ldc = nb1 / sizeof(float);
    const int64_t r2 = ne12 / ne02;
    const int64_t r3 = ne13 / ne03;
    const int64_t panels = (ne01 + QA_ROWS - 1) / QA_ROWS;
    const int64_t p0 = panels * params->ith / params->nth;
    const int64_t p1 = panels * (params->ith + 1) / params->nth;
    if (p0 == p1) {
        return;
    }

    const size_t bytes_size = (size_t) nb * QA_BLOCK_BYTES;
    const size_t mins_size = (size_t) nb * 4 * sizeof(__m512i);
    // activation rows past a multiple of 16 are copied into a tile of their own, its last row repeated
    const size_t ragged_size = ne11 % QA_ROWS ? (size_t) QA_ROWS * row_size : 0;
    qa_panel p;
    p.bytes = (uint8_t *) ggml_aligned_malloc(bytes_size);
    p.mins = (__m512i *) ggml_aligned_malloc(mins_size);
    p.d = (float *) malloc((size_t) nb * QA_ROWS * sizeof(float));
    p.dmin = (float *) malloc((size_t) nb * QA_ROWS * sizeof(float));
    block_q8_K * ragged = ragged_size ? (block_q8_K *) malloc(ragged_size) : NULL;
    const int64_t padded = (ne11 + QA_ROWS - 1) / QA_ROWS * QA_ROWS;
    const size_t sums_size = type == GGML_TYPE_Q6_K ? 0 : (size_t) padded * nb * 4 * sizeof(int32_t);
    int32_t * sums = sums_size ? (int32_t *) malloc(sums_size) : NULL;
    const size_t packed_size = (size_t) padded * nb * QK_K;
    uint8_t * packed = (uint8_t *) ggml_aligned_malloc(packed_size);
    GGML_ASSERT(p.bytes && p.mins && p.d && p.dmin && (ragged || !ragged_size) && (sums || !sums_size) && packed);
    qa_configure();

    for (int64_t i13 = 0; i13 < ne13; i13++) {
        for (int64_t i12 = 0; i12 < ne12; i12++) {
            const char * a = (const char *) src0->data + i12 / r2 * nb02 + i13 / r3 * nb03;
            const block_q8_K * b = (const block_q8_K *) ((const char *) params->wdata + (i12 * ne11 + i13 * ne12 * ne11) * row_size);
            float * c = (float *) ((char *) dst->data + i12 * nb2 + i13 * nb3);
            const int64_t full = ne11 / QA_ROWS * QA_ROWS;
            if (ragged) {
                for (int m = 0; m < QA_ROWS; m++) {
                    memcpy((char *) ragged + m * row_size, b + MIN(full + m, ne11 - 1) * ldb, row_size);
                }
            }
            qa_pack_activations(b, ldb, ne11, nb, packed);
            if (sums) {
                qa_activation_sums(b, ldb, full, nb, sums);
                if (ragged) {
                    qa_activation_sums(ragged, ldb, QA_ROWS, nb, sums + full * nb * 4);
                }
            }
            for (int64_t panel = p0; panel < p1; panel++) {
                const int64_t i0 = panel * QA_ROWS;
                const int rows = (int) MIN(QA_ROWS, ne01 - i0);
                const char * w[QA_ROWS];
                for (int r = 0; r < QA_ROWS; r++) {  // rows past the end repeat the last one
                    w[r] = a + MIN(i0 + r, ne01 - 1) * nb01;
                }
#define QA_PREPARE(T) qa_prepare_panel(T, w, nb, &p)
                QG_BY_TYPE(type, QA_PREPARE);
#undef QA_PREPARE
                for (int64_t j = 0; j < ne11; j += 2 * QA_ROWS) {
                    const block_q8_K * x0 = j < full ? b + j * ldb : ragged;
                    const block_q8_K * x1 = j + QA_ROWS >= ne11 ? NULL : j + QA_ROWS < full ? b + (j + QA_ROWS) * ldb : ragged;
                    __m512 acc[2 * QA_ROWS];
                    for (int m = 0; m < 2 * QA_ROWS; m++) {
                        acc[m] = _mm512_setzero_ps();
                    }
                    const int32_t * s0 = sums ? sums + j * nb * 4 : NULL;
                    const int32_t * s1 = sums && x1 ? sums + (j + QA_ROWS) * nb * 4 : NULL;
                    const uint8_t * a0 = packed + (size_t) j * nb * QK_K;
                    const uint8_t * a1 = a0 + (size_t) QA_ROWS * nb * QK_K;
#define QA_TILES(T) qa_tiles(T, &p, nb, x0, x1, ldb, a0, a1, s0, s1, acc)
                    QG_BY_TYPE(type, QA_TILES);
#undef QA_TILES
                    for (int m = 0; m < 2 * QA_ROWS && j + m < ne11; m++) {
                        _mm512_mask_storeu_ps(c + (j + m) * ldc + i0, (__mmask16) ((1u << rows) - 1), acc[m]);
                    }
                }
            }
        }
    }

    __asm__ volatile("tilerelease" ::);
    ggml_aligned_free(p.bytes, bytes_size);
    ggml_aligned_free(p.mins, mins_size);
    free(p.d);
    free(p.dmin);
    free(ragged);
    free(sums);
    ggml_aligned_free(packed, packed_size);
}
#endif
