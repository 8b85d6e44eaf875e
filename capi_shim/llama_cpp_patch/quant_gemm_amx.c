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
// Layout: C[weight row][activation row] += A[weight row][64 values] . B[16 groups of 4 values][activation row].
// A holds the lo or hi bytes of a panel of 16 weight rows, prepared once per panel and call and used by every
// activation row; B holds 16 activation rows in AMX's layout (a 16 x 16 transpose of 4-byte groups), prepared once
// per call. Two activation tiles share each A: tiles 0-3 hold C (lo and hi of each), 4-5 B, 6-7 A. Preparing the
// weights is most of what a call with few activation rows costs, so it does the least it can: no transpose, and
// for Q4_K (most of a Q4_K_M model's weights) the fold is a byte table lookup of sc * q for the 16 codes q. Every
// CPU with AMX-INT8 has AVX512-VBMI, whose byte permutes the fold uses.
//
// Tiles need the process's permission, asked for once (arch_prctl); where the kernel refuses it, or the CPU lacks
// AMX-INT8, or NEWRLLAMA_AMX=off, quant-gemm-avx2 takes every matmul with the same bits.

#if defined(GGML_QUANT_GEMM_AVX2) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && \
    defined(__AVX512VBMI__) && defined(__linux__) && defined(__x86_64__)
#define GGML_QUANT_GEMM_AMX 1

#include <cpuid.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

// The build fingerprint (python_core/newrllama/engine/llama/reproducibility.py) finds this text in the library.
const char newrllama_llama_cpp_patch_quant_gemm_amx[] = "newrllama-llama-cpp-patch: quant-gemm-amx";

enum {
    QA_ROWS = 16,                    // weight rows per panel, activation rows per tile
    QA_CHUNKS = QK_K / 64,           // tile products per block and part
    QA_TILE_BYTES = 16 * 64,
    QA_BLOCK_BYTES = QA_CHUNKS * 2 * QA_TILE_BYTES, // a panel's block: lo and hi of each chunk
    QA_MIN_ROWS = 8,                 // fewer activation rows go to quant-gemm-avx2 (below 8, it is faster)
    QA_CHUNK_PANELS = 4,             // panels a thread claims at a time (64 weight rows, as decode's chunks)
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
// hide them. tdpbusd: unsigned A bytes by signed B bytes; tdpbssd: both signed.
#define QA_LOAD(t, base, stride) \
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t :: "r"(base), "r"((int64_t) (stride)) : "memory")
#define QA_STORE(t, base) __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" :: "r"(base), "r"((int64_t) 64) : "memory")
#define QA_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::)
#define QA_DP_US(c, a, b) __asm__ volatile("tdpbusd %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)
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

// A panel of 16 weight rows, ready for the tiles: bytes + l * QA_BLOCK_BYTES + (2 c + part) * QA_TILE_BYTES is A
// for chunk c of block l (part 0 lo, 1 hi; row r: weight row r's 64 values); d and dmin[l * 16 + r];
// mins[(l * 16 + r) * 4 + p] row r's mins of sub-blocks 2p and 2p + 1 as an int16 pair (Q4_K and Q5_K).
typedef struct {
    uint8_t * bytes;
    float * d;
    float * dmin;
    int32_t * mins;
} qa_panel;

// 16 activation rows per tile t, ready for the tiles and the floats, per block l: bytes + ((t * nb + l) *
// QA_CHUNKS + c) * QA_TILE_BYTES is B for chunk c; d[(t * nb + l) * 16 + n] row n's scale; sums[((t * nb + l) * 4
// + p) * 16 + n] its sums of sub-blocks 2p and 2p + 1 as an int16 pair (Q4_K and Q5_K).
typedef struct {
    uint8_t * bytes;
    float * d;
    int32_t * sums;
} qa_activations;
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

// One weight row's block as w = lo + 256 hi, its scales folded in (see the top of the file): chunk c's 64 values
// at lo + 2c tiles and hi + 2c tiles, as the panel lays them out. Folding is most of a few-row step's work, so the
// two types of a Q4_K_M file take 64 values at a time with VBMI's byte permutes (vpermb, vpermt2b) where the
// split into lo and hi bytes would otherwise take a narrowing and a shift each.
static inline void qa_fold_scales(enum ggml_type type, const void * b, const qg_block * k, uint8_t * lo, uint8_t * hi) {
    const __m512i halves = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(1), 1);  // words 16-31: 1
    if (type == GGML_TYPE_Q4_K) {
        // chunk c: the low then the high nibbles of bytes 32c .. 32c + 31 (sub-blocks 2c and 2c + 1), looked up in
        // a table of their sc * q for the 16 codes q: bytes 0-15 and 16-31 the low bytes of sub-block 2c's and
        // 2c + 1's, bytes 32-63 their high bytes
        const __m512i q16 = _mm512_and_si512(_mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17,
                                                              16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                             _mm512_set1_epi16(15));
        const __m512i low_then_high_bytes = _mm512_set_epi8(
            63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11,
            9, 7, 5, 3, 1, 62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24, 22, 20, 18,
            16, 14, 12, 10, 8, 6, 4, 2, 0);
        const __m512i scales = _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(_mm_loadl_epi64((const __m128i *) k->sm)));
        const __m512i nibble_shift = _mm512_slli_epi16(halves, 2);                  // the high nibbles in bytes 32-63
        const __m512i second_table = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi8(16), 1);
        const uint8_t * qs = ((const block_q4_K *) b)->qs;
        for (int c = 0; c < QA_CHUNKS; c++) {
            const __m512i sc = _mm512_permutexvar_epi16(_mm512_add_epi16(halves, _mm512_set1_epi16((short) (2 * c))), scales);
            const __m512i table = _mm512_permutexvar_epi8(low_then_high_bytes, _mm512_mullo_epi16(q16, sc));
            const __m512i v = _mm512_srlv_epi16(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (qs + 32 * c))),
                                                nibble_shift);
            // (v & 15) | 16 in bytes 32-63: the second sub-block's entries
            const __m512i codes = _mm512_ternarylogic_epi32(v, _mm512_set1_epi8(15), second_table, 0xea);
            _mm512_store_si512(lo + 2 * c * QA_TILE_BYTES, _mm512_permutexvar_epi8(codes, table));
            _mm512_store_si512(hi + 2 * c * QA_TILE_BYTES,
                               _mm512_permutexvar_epi8(_mm512_or_si512(codes, _mm512_set1_epi8(32)), table));
        }
        return;
    }
    const __m512i low_bytes = _mm512_set_epi8(
        126, 124, 122, 120, 118, 116, 114, 112, 110, 108, 106, 104, 102, 100, 98, 96, 94, 92, 90, 88, 86, 84, 82, 80, 78,
        76, 74, 72, 70, 68, 66, 64, 62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24, 22,
        20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i high_bytes = _mm512_add_epi8(low_bytes, _mm512_set1_epi8(1));
    if (type == GGML_TYPE_Q6_K) {
        // chunk c: runs 2c and 2c + 1 (sub-blocks 4c .. 4c + 3, 16 codes each): the low or high nibbles of 64 bytes
        // of ql (half block c / 2), under bits 4i, 4i + 1 (run 2c) and 4i + 2, 4i + 3 (run 2c + 1) of its 32 bytes of
        // qh, i = c % 2, moved to bits 4 and 5
        const block_q6_K * q6 = (const block_q6_K *) b;
        const __m512i scales = _mm512_broadcast_i64x4(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) q6->scales)));
        for (int c = 0; c < QA_CHUNKS; c++) {
            const int h = c / 2, i = c % 2;
            __m512i low = _mm512_loadu_si512(q6->ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (q6->qh + 32 * h)));
            __m512i top;
            if (i == 0) {  // bits 0-1 and 2-3 up by 4 and 2
                top = _mm512_sllv_epi16(qh, _mm512_sub_epi16(_mm512_set1_epi16(4), _mm512_slli_epi16(halves, 1)));
            } else {       // bits 4-5 where they are, 6-7 down by 2
                low = _mm512_srli_epi16(low, 4);
                top = _mm512_srlv_epi16(qh, _mm512_slli_epi16(halves, 1));
            }
            // bits 0-3 of low and 4-5 of top, less 32: q - 32 in [-32, 31]
            const __m512i codes = _mm512_and_si512(_mm512_ternarylogic_epi32(low, top, _mm512_set1_epi8(15), 0xe4),
                                                _mm512_set1_epi8(63));
            const __m512i q = _mm512_sub_epi8(codes, _mm512_set1_epi8(32));
            const __m512i w0 = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_castsi512_si256(q)),
                _mm512_permutexvar_epi16(_mm512_add_epi16(halves, _mm512_set1_epi16((short) (4 * c))), scales));
            const __m512i w1 = _mm512_mullo_epi16(_mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(q, 1)),
                _mm512_permutexvar_epi16(_mm512_add_epi16(halves, _mm512_set1_epi16((short) (4 * c + 2))), scales));
            _mm512_store_si512(lo + 2 * c * QA_TILE_BYTES, _mm512_permutex2var_epi8(w0, low_bytes, w1));
            _mm512_store_si512(hi + 2 * c * QA_TILE_BYTES, _mm512_permutex2var_epi8(w0, high_bytes, w1));
        }
        return;
    }
    for (int c = 0; c < QA_CHUNKS; c++) {  // Q5_K: runs 2c and 2c + 1, a scale each
        const __m512i w0 = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(qg_codes(type, b, 2 * c)), _mm512_set1_epi16(k->sm[2 * c]));
        const __m512i w1 = _mm512_mullo_epi16(_mm512_cvtepu8_epi16(qg_codes(type, b, 2 * c + 1)),
                                              _mm512_set1_epi16(k->sm[2 * c + 1]));
        _mm512_store_si512(lo + 2 * c * QA_TILE_BYTES, _mm512_permutex2var_epi8(w0, low_bytes, w1));
        _mm512_store_si512(hi + 2 * c * QA_TILE_BYTES, _mm512_permutex2var_epi8(w0, high_bytes, w1));
    }
}

// The weight rows of a thread follow one another in memory, and a panel reads its 16 rows block by block, 16 places
// at once, which the hardware prefetcher does not follow: the first loads of a block were the hottest instructions
// of a 16-row step. So while it folds one panel it asks for the next one's bytes (next, next_size), a share per
// block.
static inline __attribute__((always_inline)) void qa_prepare_panel(enum ggml_type type, const char * const * w,
                                                                    int nb, const char * next, size_t next_size,
                                                                    qa_panel * p) {
    const size_t block_size = type == GGML_TYPE_Q6_K ? sizeof(block_q6_K)
                              : type == GGML_TYPE_Q5_K ? sizeof(block_q5_K) : sizeof(block_q4_K);
    const size_t share = (next_size / (size_t) nb + 64) & ~(size_t) 63;
    for (int l = 0; l < nb; l++) {
        for (size_t o = share * l; o < MIN(share * (l + 1), next_size); o += 64) {
            _mm_prefetch(next + o, _MM_HINT_T1);
        }
        uint8_t * block = p->bytes + (size_t) l * QA_BLOCK_BYTES;
        for (int r = 0; r < QA_ROWS; r++) {
            const qg_block k = qg_read(type, w[r], l);
            qa_fold_scales(type, w[r] + l * block_size, &k, block + 64 * r, block + QA_TILE_BYTES + 64 * r);
            p->d[l * QA_ROWS + r] = k.d;
            p->dmin[l * QA_ROWS + r] = k.dmin;
            for (int i = 0; i < 4 && type != GGML_TYPE_Q6_K; i++) {
                p->mins[(l * QA_ROWS + r) * 4 + i] = k.sm[8 + 2 * i] | k.sm[8 + 2 * i + 1] << 16;
            }
        }
    }
}

// Activation rows x (rows of them, nb blocks each, ldb blocks apart) into a; the last tile's rows past the end repeat
// the last row.
static void qa_prepare_activations(enum ggml_type type, const block_q8_K * x, size_t ldb, int64_t rows, int nb,
                                   qa_activations * a) {
    for (int64_t t = 0; t * QA_ROWS < rows; t++) {
        const block_q8_K * xr[QA_ROWS];
        for (int n = 0; n < QA_ROWS; n++) {
            xr[n] = x + MIN(t * QA_ROWS + n, rows - 1) * ldb;
        }
        for (int l = 0; l < nb; l++) {
            for (int n = 0; n < QA_ROWS; n++) {
                a->d[(t * nb + l) * QA_ROWS + n] = xr[n][l].d;
                if (type == GGML_TYPE_Q6_K) {
                    continue;
                }
                int32_t pairs[4];
                _mm_storeu_si128((__m128i *) pairs, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) xr[n][l].bsums),
                                                                   _mm_loadu_si128((const __m128i *) (xr[n][l].bsums + 8))));
                for (int i = 0; i < 4; i++) {
                    a->sums[((t * nb + l) * 4 + i) * QA_ROWS + n] = pairs[i];
                }
            }
            for (int c = 0; c < QA_CHUNKS; c++) {
                __m512i in[QA_ROWS], out[QA_ROWS];
                for (int n = 0; n < QA_ROWS; n++) {
                    in[n] = _mm512_loadu_si512(xr[n][l].qs + 64 * c);
                }
                qa_transpose16(in, out);
                uint8_t * b = a->bytes + ((t * nb + l) * QA_CHUNKS + c) * QA_TILE_BYTES;
                for (int g = 0; g < QA_ROWS; g++) {
                    _mm512_store_si512(b + 64 * g, out[g]);
                }
            }
        }
    }
}

// The floats of block l for the panel's rows by activation tile t (C stored in lo and hi) into acc[weight row],
// a lane per activation row.
static inline __attribute__((always_inline)) void qa_block_floats(enum ggml_type type, const qa_panel * p,
                                                                   const qa_activations * a, int64_t t, int nb, int l,
                                                                   const int32_t * lo, const int32_t * hi,
                                                                   __m512 * acc) {
    const __m512 da = _mm512_loadu_ps(a->d + (t * nb + l) * QA_ROWS);
    const int32_t * sums = a->sums + (t * nb + l) * 4 * QA_ROWS;
    for (int r = 0; r < QA_ROWS; r++) {
        const __m512i s = _mm512_add_epi32(_mm512_load_si512(lo + 16 * r), _mm512_slli_epi32(_mm512_load_si512(hi + 16 * r), 8));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(_mm512_set1_ps(p->d[l * QA_ROWS + r]), da), acc[r]);
        if (type != GGML_TYPE_Q6_K) {
            const int32_t * mins = p->mins + (l * QA_ROWS + r) * 4;
            __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(sums), _mm512_set1_epi32(mins[0]));
            m = _mm512_dpwssd_epi32(m, _mm512_loadu_si512(sums + QA_ROWS), _mm512_set1_epi32(mins[1]));
            m = _mm512_dpwssd_epi32(m, _mm512_loadu_si512(sums + 2 * QA_ROWS), _mm512_set1_epi32(mins[2]));
            m = _mm512_dpwssd_epi32(m, _mm512_loadu_si512(sums + 3 * QA_ROWS), _mm512_set1_epi32(mins[3]));
            acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m),
                                      _mm512_mul_ps(_mm512_set1_ps(p->dmin[l * QA_ROWS + r]), da), acc[r]);
        }
    }
}

// The integer products of block l of the panel by activation tile t0, and t0 + 1 if two, left in tiles 0-3.
static inline __attribute__((always_inline)) void qa_products(const qa_panel * p, int nb, int l,
                                                               const qa_activations * a, int64_t t0, bool two) {
    QA_ZERO(0);
    QA_ZERO(1);
    QA_ZERO(2);
    QA_ZERO(3);
    for (int k = 0; k < QA_CHUNKS; k++) {
        const uint8_t * w = p->bytes + (size_t) l * QA_BLOCK_BYTES + (size_t) 2 * k * QA_TILE_BYTES;
        QA_LOAD(6, w, 64);
        QA_LOAD(7, w + QA_TILE_BYTES, 64);
        QA_LOAD(4, a->bytes + ((t0 * nb + l) * QA_CHUNKS + k) * QA_TILE_BYTES, 64);
        QA_DP_US(0, 6, 4);
        QA_DP_SS(1, 7, 4);
        if (two) {
            QA_LOAD(5, a->bytes + (((t0 + 1) * nb + l) * QA_CHUNKS + k) * QA_TILE_BYTES, 64);
            QA_DP_US(2, 6, 5);
            QA_DP_SS(3, 7, 5);
        }
    }
}

// One step of a panel: block l by activation tiles t and t + 1 (if two).
typedef struct {
    int l;
    int64_t t;
    bool two;
} qa_step;

// Step i of a panel's walk over pairs of activation tiles: block i / pairs by the pair i % pairs.
static inline qa_step qa_step_at(int64_t i, int64_t pairs, int64_t tiles) {
    const int64_t t = i % pairs * 2;
    return (qa_step) { (int) (i / pairs), t, t + 1 < tiles };
}

// The panel by every activation tile into acc (16 registers' worth per tile), block by block: a block's weights
// (8 KiB of tiles) stay in the first-level cache while every activation tile passes them, where a whole panel
// does not; each sum still takes the blocks in order, so the floats are the same. The tiles do not wait for the
// floats: a step's products are under way while the floats of the step before are taken from the sums it stored.
static inline __attribute__((always_inline)) void qa_panel_by_tiles(enum ggml_type type, const qa_panel * p, int nb,
                                                                     const qa_activations * a, int64_t tiles,
                                                                     __m512 * acc) {
    int32_t c[2][4][QA_ROWS * QA_ROWS] __attribute__((aligned(64)));
    const int64_t pairs = (tiles + 1) / 2;
    const int64_t steps = (int64_t) nb * pairs;
    qa_step done = qa_step_at(0, pairs, tiles);
    qa_products(p, nb, done.l, a, done.t, done.two);
    for (int64_t i = 0; i < steps; i++) {
        int32_t (*sums)[QA_ROWS * QA_ROWS] = c[i % 2];
        QA_STORE(0, sums[0]);
        QA_STORE(1, sums[1]);
        if (done.two) {
            QA_STORE(2, sums[2]);
            QA_STORE(3, sums[3]);
        }
        const qa_step next = qa_step_at(i + 1, pairs, tiles);
        if (i + 1 < steps) {
            qa_products(p, nb, next.l, a, next.t, next.two);
        }
        qa_block_floats(type, p, a, done.t, nb, done.l, sums[0], sums[1], acc + done.t * QA_ROWS);
        if (done.two) {
            qa_block_floats(type, p, a, done.t + 1, nb, done.l, sums[2], sums[3], acc + (done.t + 1) * QA_ROWS);
        }
        done = next;
    }
}

// dst = src0 x src1 (src1 already in Q8_K in wdata), 8 activation rows and more. The panels go in chunks of
// QA_CHUNK_PANELS that the threads claim from ggml's shared counter, as quant-gemm-avx2's do (chunk ith is this
// thread's first): a thread held up by anything else on the machine leaves its panels to the others instead of
// keeping them waiting at the next barrier. A thread prepares a plane's activation rows once, when its first chunk
// of that plane comes; which thread computes a panel does not touch its arithmetic.
static void ggml_quant_gemm_amx(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_TENSOR_BINARY_OP_LOCALS

    const enum ggml_type type = src0->type;
    const int nb = (int) (ne00 / QK_K);
    const size_t row_size = ggml_row_size(GGML_TYPE_Q8_K, ne10);
    const size_t ldb = row_size / sizeof(block_q8_K);
    const size_t ldc = nb1 / sizeof(float);
    const int64_t panels = (ne01 + QA_ROWS - 1) / QA_ROWS;
    const int64_t plane_chunks = (panels + QA_CHUNK_PANELS - 1) / QA_CHUNK_PANELS;
    const int64_t chunks = plane_chunks * ne12 * ne13;
    if (params->ith >= chunks) {  // no chunk for this thread: its first would be ith
        return;
    }

    const int64_t tiles = (ne11 + QA_ROWS - 1) / QA_ROWS;
    const size_t panel_size = (size_t) nb * QA_BLOCK_BYTES;
    const size_t activations_size = (size_t) tiles * nb * QK_K * QA_ROWS;
    qa_panel p;
    qa_activations x;
    p.bytes = (uint8_t *) ggml_aligned_malloc(panel_size);
    p.d = (float *) malloc((size_t) nb * QA_ROWS * sizeof(float));
    p.dmin = (float *) malloc((size_t) nb * QA_ROWS * sizeof(float));
    p.mins = (int32_t *) malloc((size_t) nb * QA_ROWS * 4 * sizeof(int32_t));
    x.bytes = (uint8_t *) ggml_aligned_malloc(activations_size);
    x.d = (float *) malloc((size_t) tiles * nb * QA_ROWS * sizeof(float));
    x.sums = (int32_t *) malloc((size_t) tiles * nb * 4 * QA_ROWS * sizeof(int32_t));
    const size_t acc_size = (size_t) tiles * QA_ROWS * sizeof(__m512);
    __m512 * acc = (__m512 *) ggml_aligned_malloc(acc_size);
    GGML_ASSERT(p.bytes && p.d && p.dmin && p.mins && x.bytes && x.d && x.sums && acc);
    qa_configure();

    int64_t plane = -1;
    qg_plane at = {NULL, NULL, NULL};
    for (int64_t chunk = params->ith; chunk < chunks; chunk = ggml_threadpool_chunk_add(params->threadpool, 1)) {
        if (qg_chunk_plane(params, dst, chunk, plane_chunks, row_size, &plane, &at)) {
            qa_prepare_activations(type, (const block_q8_K *) at.b, ldb, ne11, nb, &x);
        }
        const int64_t first = chunk % plane_chunks * QA_CHUNK_PANELS;
        const int64_t last = MIN(panels, first + QA_CHUNK_PANELS);
        for (int64_t panel = first; panel < last; panel++) {
            const int64_t i0 = panel * QA_ROWS;
            const int rows = (int) MIN(QA_ROWS, ne01 - i0);
            const char * w[QA_ROWS];
            for (int r = 0; r < QA_ROWS; r++) {  // rows past the end repeat the last one
                w[r] = at.a + MIN(i0 + r, ne01 - 1) * nb01;
            }
            // the chunk's next panel, if any: its rows, to the end of the matrix
            const char * next = at.a + MIN(i0 + QA_ROWS, ne01 - 1) * nb01;
            const size_t next_size = panel + 1 < last ? (size_t) MIN(QA_ROWS, ne01 - i0 - QA_ROWS) * nb01 : 0;
#define QA_PREPARE(T) qa_prepare_panel(T, w, nb, next, next_size, &p)
            QG_BY_TYPE(type, QA_PREPARE);
#undef QA_PREPARE
            for (int64_t r = 0; r < tiles * QA_ROWS; r++) {
                acc[r] = _mm512_setzero_ps();
            }
#define QA_TILES(T) qa_panel_by_tiles(T, &p, nb, &x, tiles, acc)
            QG_BY_TYPE(type, QA_TILES);
#undef QA_TILES
            // acc[16 t + r] lane n is activation row 16t + n by weight row r: dst's rows are activation rows
            for (int64_t t = 0; t < tiles; t++) {
                __m512 out[QA_ROWS];
                qa_transpose16((const __m512i *) (acc + t * QA_ROWS), (__m512i *) out);
                for (int n = 0; n < QA_ROWS && t * QA_ROWS + n < ne11; n++) {
                    _mm512_mask_storeu_ps(at.c + (t * QA_ROWS + n) * ldc + i0, (__mmask16) ((1u << rows) - 1), out[n]);
                }
            }
        }
    }

    __asm__ volatile("tilerelease" ::);
    ggml_aligned_free(p.bytes, panel_size);
    free(p.d);
    free(p.dmin);
    free(p.mins);
    ggml_aligned_free(x.bytes, activations_size);
    free(x.d);
    free(x.sums);
    ggml_aligned_free(acc, acc_size);
}
#endif
