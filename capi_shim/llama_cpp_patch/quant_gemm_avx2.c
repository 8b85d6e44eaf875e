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
// with q the unsigned codes, a the activation's Q8_K values (in [-127, 127]) and d_a its scale. Every integer
// fits in int32 (at most 128 * 63 * 127 * 256 < 2^31), so the order the SIMD lanes add them in does not matter: any
// tiling, any number of rows or threads, and any unit that sums exactly gives the same bits.
//
// Decode (one activation row) takes 8 weight rows at a time straight from their blocks, one row after the other,
// and the threads claim the weight rows in chunks as they go (see qg_decode). More activation rows take a panel of
// 8 weight rows, unpacked once, code group by code group, and passed over the activation rows four at a time, two
// panels together where the CPU has AVX-512 (see qg_panel_cols); the threads claim the weight rows in chunks too. A
// tile that runs past the last weight row repeats a valid one and does not store it.

// F16C converts 8 rows' fp16 scales at once; every CPU with AVX2 and FMA has it.
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define GGML_QUANT_GEMM_AVX2 1

// The build fingerprint (python_core/newrllama/engine/llama/reproducibility.py) finds this text in the library, and
// only where the kernel is compiled in.
const char newrllama_llama_cpp_patch_quant_gemm_avx2[] = "newrllama-llama-cpp-patch: quant-gemm-avx2";

enum {
    QG_LANES = 8,       // outputs per tile
    QG_RUNS = QK_K / 32, // runs of 32 codes per block
    QG_PREFETCH = 2048,  // how far ahead of its block decode asks for a row's bytes
    QG_DECODE_TILES = 8, // the fewest tiles of weight rows a thread claims at a time in decode
    QG_DECODE_CHUNKS = 4, // chunks of a decode plane per thread, where the matrix is large enough
};

// Weight rows a chunk of decode holds, for a matrix of `rows` rows and nth threads: QG_DECODE_TILES tiles at
// least, and more in a large matrix, so that each thread claims about QG_DECODE_CHUNKS chunks of it (a multiple of
// 16 rows, so whole tiles of 8 or 16 rows). Every chunk restarts a thread's stream of weights, whose prefetches ran
// ahead into rows another thread took: on an AMD EPYC with AVX-512, chunks of a few dozen rows kept one-prompt
// decode of a 1.5B model measurably short of the same kernel in larger chunks. With several chunks a thread, one
// held up by the machine still leaves most of its rows to the other.
static inline int64_t qg_decode_chunk_rows(int64_t rows, int nth) {
    const int64_t share = rows / ((int64_t) QG_DECODE_CHUNKS * nth);
    return MAX((int64_t) QG_DECODE_TILES * QG_LANES, (share + 15) / 16 * 16);
}

// A block of weights as the kernel reads it: the codes and what multiplies them. For Q4_K and Q5_K, sm holds the
// sub-blocks' 6-bit scales (bytes 0-7) and mins (bytes 8-15).
typedef struct {
    const void * b;
    uint8_t sm[16];
    float d;
    float dmin;
} qg_block;

// The 12 bytes of 6-bit scales and mins of a Q4_K or Q5_K block (read as 16: the 4 after them are codes, and go
// unused), spread to a byte each: scales 0-3 are the low 6 bits of bytes 0-3, scales 4-7 the low nibbles of bytes
// 8-11 under the top 2 bits of bytes 0-3; mins 0-3 the low 6 bits of bytes 4-7, mins 4-7 the high nibbles of bytes
// 8-11 under the top 2 bits of bytes 4-7.
static inline __m128i qg_scales_mins(const uint8_t * packed) {
    const __m128i v = _mm_loadu_si128((const __m128i *) packed);
    const __m128i low = _mm_and_si128(_mm_shuffle_epi8(v, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, -1, -1, -1, -1)),
                                      _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0));
    const __m128i nibbles = _mm_shuffle_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15)),
                                             _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m128i top = _mm_shuffle_epi8(_mm_and_si128(_mm_srli_epi16(v, 2), _mm_set1_epi8(0x30)),
                                         _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    return _mm_or_si128(_mm_or_si128(low, nibbles), top);
}

static inline qg_block qg_read(enum ggml_type type, const void * row, int l) {
    qg_block k;
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
    _mm_storeu_si128((__m128i *) k.sm, qg_scales_mins(packed));
    return k;
}

// Bits `from` and up of each byte moved to bit 4 and up (bits that cross into the next byte must be masked off).
static inline __m256i qg_to_bit4(__m256i v, int from) {
    return from <= 4 ? _mm256_slli_epi16(v, 4 - from) : _mm256_srli_epi16(v, from - 4);
}

// Codes 32j .. 32j + 31 of block b, unsigned. Q4_K and Q5_K: sub-block j, the low nibbles of 32 bytes for even j
// and their high nibbles for odd j (Q5_K: bit j of each of 32 bytes is the fifth bit). Q6_K: a half block (128
// codes) has 64 bytes of low nibbles and 32 of 2-bit pairs, and its four runs of 32 codes hold two sub-blocks of
// 16 each. Runs that share bytes load them again, which the compiler merges.
static inline __m256i qg_codes(enum ggml_type type, const void * b, int j) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    if (type == GGML_TYPE_Q6_K) {
        const block_q6_K * q6 = (const block_q6_K *) b;
        const int h = j / 4, i = j % 4;
        __m256i lo = _mm256_loadu_si256((const __m256i *) (q6->ql + 64 * h + 32 * (i % 2)));
        if (i >= 2) {
            lo = _mm256_srli_epi16(lo, 4);
        }
        const __m256i hi = _mm256_and_si256(_mm256_loadu_si256((const __m256i *) (q6->qh + 32 * h)),
                                            _mm256_set1_epi8((char) (3 << (2 * i))));
        return _mm256_or_si256(_mm256_and_si256(lo, low4), qg_to_bit4(hi, 2 * i));
    }
    const uint8_t * qs = type == GGML_TYPE_Q5_K ? ((const block_q5_K *) b)->qs : ((const block_q4_K *) b)->qs;
    __m256i q = _mm256_loadu_si256((const __m256i *) (qs + 32 * (j / 2)));
    q = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(q, 4) : q, low4);
    if (type == GGML_TYPE_Q5_K) {
        const __m256i h = _mm256_loadu_si256((const __m256i *) ((const block_q5_K *) b)->qh);
        q = _mm256_or_si256(q, _mm256_and_si256(qg_to_bit4(h, j), _mm256_set1_epi8(16)));
    }
    return q;
}

// The 8 sums of 8 registers' int32 lanes, sum i in lane i.
static inline __m256i qg_fold8(const __m256i v[QG_LANES]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Int16 word j of each 128-bit lane of v, in all 8 words of that lane.
static inline __m256i qg_word(__m256i v, int j) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short) (0x0100 + 0x0202 * j)));
}

// What the decode tile needs of the activation block x, the same for every weight row: Q4_K and Q5_K the sums of
// 32 of its 8 sub-blocks (int16, at most 32 * 127), in the low 128 bits; Q6_K its 16 sums of 16, even ones in the
// low 128 bits and odd ones in the high, as the scales are in qg_block_sums.
static inline __m256i qg_activation_sums(enum ggml_type type, const block_q8_K * x) {
    if (type == GGML_TYPE_Q6_K) {
        const __m256i even_odd = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                                  0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
        const __m256i s = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *) x->bsums), even_odd);
        return _mm256_permute4x64_epi64(s, 0xd8);
    }
    const __m128i s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) x->bsums),
                                     _mm_loadu_si128((const __m128i *) (x->bsums + 8)));
    return _mm256_castsi128_si256(s);
}

// The sum over a block's 8 runs of 32 codes of (codes . activations) times the run's scale, one weight row's block
// b by the activation block x, in the 8 int32 lanes of vpmaddwd (exact: the lanes are only ever added). The run's
// scale comes from sc by a byte shuffle (qg_block_sums' layout).
#if defined(__AVX512F__) && defined(__AVX512BW__)
// With AVX-512, two runs at a time, run j in the low 256 bits and run j + 1 in the high: half the instructions of
// AVX2's loop, which bounds decode on CPUs whose memory is fast enough (Intel Xeon). The lanes of the two halves are
// added at the end, so each lane holds the same integer as AVX2's.

// The same bits in both halves of a 512-bit register, shifted left (count > 0) or right by a count for each half.
static inline __m512i qg_shift_halves(__m512i v, int low, int high) {
    if (low >= 0 && high >= 0) {
        return _mm512_sllv_epi16(v, _mm512_inserti64x4(_mm512_set1_epi16((short) low), _mm256_set1_epi16((short) high), 1));
    }
    return _mm512_srlv_epi16(v, _mm512_inserti64x4(_mm512_set1_epi16((short) -low), _mm256_set1_epi16((short) -high), 1));
}

// Codes of runs j and j + 1 (j even) of block b: qg_codes(j) in the low 256 bits, qg_codes(j + 1) in the high.
static inline __m512i qg_codes_pair(enum ggml_type type, const void * b, int j) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    if (type == GGML_TYPE_Q6_K) {
        // runs 4h + i and 4h + i + 1 (i = 0 or 2): the low nibbles (i = 0) or high nibbles of 64 bytes of ql, and
        // bits 2i, 2i + 1 and 2i + 2, 2i + 3 of the same 32 bytes of qh, moved to bits 4 and 5
        const block_q6_K * q6 = (const block_q6_K *) b;
        const int h = j / 4, i = j % 4;
        __m512i lo = _mm512_loadu_si512((const void *) (q6->ql + 64 * h));
        if (i == 2) {
            lo = _mm512_srli_epi16(lo, 4);
        }
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (q6->qh + 32 * h)));
        const __m512i bits = _mm512_and_si512(qh, _mm512_inserti64x4(_mm512_set1_epi8((char) (3 << (2 * i))),
                                                                      _mm256_set1_epi8((char) (3 << (2 * i + 2))), 1));
        return _mm512_or_si512(_mm512_and_si512(lo, low4), qg_shift_halves(bits, 4 - 2 * i, 2 - 2 * i));
    }
    const uint8_t * qs = type == GGML_TYPE_Q5_K ? ((const block_q5_K *) b)->qs : ((const block_q4_K *) b)->qs;
    // the same 32 bytes in both halves (a load, where inserting a half would take the shuffle port), the high
    // half shifted to its high nibbles
    const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) (qs + 32 * (j / 2))));
    __m512i v = _mm512_and_si512(_mm512_mask_srli_epi16(q, (__mmask32) 0xffff0000u, q, 4), low4);
    if (type == GGML_TYPE_Q5_K) {  // bit j, then bit j + 1, of each of 32 bytes of qh is the fifth bit
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) ((const block_q5_K *) b)->qh));
        v = _mm512_or_si512(v, _mm512_and_si512(qg_shift_halves(qh, 4 - j, 3 - j), _mm512_set1_epi8(16)));
    }
    return v;
}

static inline __m256i qg_runs_sum(enum ggml_type type, const void * b, const block_q8_K * x, __m256i sc) {
    const __m512i sc2 = _mm512_broadcast_i64x4(sc);
    __m512i s = _mm512_setzero_si512();
    for (int j = 0; j < QG_RUNS; j += 2) {
        const __m512i p = _mm512_maddubs_epi16(qg_codes_pair(type, b, j), _mm512_loadu_si512((const void *) (x->qs + 32 * j)));
        const __m512i word = _mm512_inserti64x4(_mm512_set1_epi16((short) (0x0100 + 0x0202 * j)),
                                                _mm256_set1_epi16((short) (0x0100 + 0x0202 * (j + 1))), 1);
        s = _mm512_add_epi32(s, _mm512_madd_epi16(p, _mm512_shuffle_epi8(sc2, word)));
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}
#else
static inline __m256i qg_runs_sum(enum ggml_type type, const void * b, const block_q8_K * x, __m256i sc) {
    const __m256i * a = (const __m256i *) x->qs;
    __m256i s = _mm256_setzero_si256();
    for (int j = 0; j < QG_RUNS; j++) {
        const __m256i p = _mm256_maddubs_epi16(qg_codes(type, b, j), _mm256_loadu_si256(a + j));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, qg_word(sc, j)));
    }
    return s;
}
#endif

// One weight row's block b by the activation block x, to what the block's floats need of its exact sums:
// Q4_K and Q5_K 4 partial sums of S then 4 of M, Q6_K 8 partial sums of S (with its -32 (sum of a) terms).
// xs is qg_activation_sums(x). The run's scales come from one register by a byte shuffle: Q4_K and Q5_K the 8
// scales as int16 in both 128-bit lanes (run j: scale j for all 32 codes), Q6_K the even sub-blocks' scales in the
// low lane and the odd ones' in the high (run j: sub-blocks 2j and 2j + 1, its first and last 16 codes).
static inline __m256i qg_block_sums(enum ggml_type type, const void * b, const block_q8_K * x, __m256i xs) {
    if (type == GGML_TYPE_Q6_K) {
        const __m128i even_odd = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        const __m256i sc = _mm256_cvtepi8_epi16(
            _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *) ((const block_q6_K *) b)->scales), even_odd));
        return _mm256_sub_epi32(qg_runs_sum(type, b, x, sc), _mm256_slli_epi32(_mm256_madd_epi16(sc, xs), 5));
    }
    const __m128i sm = qg_scales_mins(type == GGML_TYPE_Q5_K ? ((const block_q5_K *) b)->scales
                                                             : ((const block_q4_K *) b)->scales);
    const __m256i s = qg_runs_sum(type, b, x, _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(sm, sm)));
    const __m128i m = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(sm, sm)), _mm256_castsi256_si128(xs));
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(s4), m, 1);
}

// Decode: 8 weight rows (w) by one activation row (x, its blocks' qg_activation_sums in xs), straight from the
// blocks. Each row is read whole before the next, one stream (8 rows block by block were 8 streams, and slower);
// the hardware prefetcher alone left it short of the memory's speed, so each block asks for the bytes
// QG_PREFETCH ahead (the rows of a thread follow one another, so past a row's end is the next row). Its blocks'
// qg_block_sums wait in part (per block and row) and their d and dmin, as stored (fp16), in h, for the floats,
// taken 8 rows at a time.
static inline __attribute__((always_inline)) __m256 qg_tile_rows(enum ggml_type type, const char * const * w,
                                                                  const block_q8_K * x, const __m256i * xs, int nb,
                                                                  __m256i * part, uint16_t * h) {
    const size_t block_size = type == GGML_TYPE_Q6_K ? sizeof(block_q6_K)
                              : type == GGML_TYPE_Q5_K ? sizeof(block_q5_K) : sizeof(block_q4_K);
    for (int r = 0; r < QG_LANES; r++) {
        for (int l = 0; l < nb; l++) {
            const char * b = w[r] + l * block_size;
            for (size_t o = 0; o < block_size; o += 64) {
                _mm_prefetch(b + QG_PREFETCH + o, _MM_HINT_T0);
            }
            part[l * QG_LANES + r] = qg_block_sums(type, b, x + l, xs[l]);
            if (type == GGML_TYPE_Q6_K) {
                memcpy(h + l * QG_LANES + r, &((const block_q6_K *) b)->d, sizeof(ggml_half));
            } else {  // d then dmin, at the start of the block
                memcpy(h + 2 * (l * QG_LANES + r), b, 2 * sizeof(ggml_half));
            }
        }
    }
    __m256 acc = _mm256_setzero_ps();
    for (int l = 0; l < nb; l++) {
        const __m256i * v = part + l * QG_LANES;
        const __m256 da = _mm256_set1_ps(x[l].d);
        if (type == GGML_TYPE_Q6_K) {
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (h + l * QG_LANES)));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(qg_fold8(v)), _mm256_mul_ps(d, da), acc);
            continue;
        }
        // rows 0-3 and 4-7: S of each row in the low 128 bits, M in the high
        const __m256i lo = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        const __m256i hi = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
        // the rows' d and dmin pairs to 8 d then 8 dmin
        const __m256i pairs = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *) (h + 2 * l * QG_LANES)),
                                                  _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                                                   0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
        const __m256i dm = _mm256_permute4x64_epi64(pairs, 0xd8);
        const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(dm));
        const __m256 dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(dm, 1));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_permute2x128_si256(lo, hi, 0x20)), _mm256_mul_ps(d, da), acc);
        acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_permute2x128_si256(lo, hi, 0x31)), _mm256_mul_ps(dmin, da), acc);
    }
    return acc;
}

// More activation rows take a panel of 8 weight rows, unpacked once per pass over the activations: for each group
// of 4 codes, one register holding the 8 rows' 4 codes (lane r: row r), so that one instruction multiplies 8 rows
// by 4 broadcast activations. With AVX2 that is vpmaddubsw, whose int16 pair sums add up exactly over a unit of
// groups before vpmaddwd widens them with the rows' scales: 8 groups (a sub-block) of Q4_K codes up to 15, 4 of
// Q5_K up to 31, 2 of Q6_K up to 63, as the activations of Q8_K lie in [-127, 127] (2 * 2 * 63 * 127 < 32768).
// Where the CPU has VNNI (AVX512-VNNI, or AVX-VNNI on AVX2 machines), vpdpbusd adds the 4 products straight into
// int32 lanes, so a unit is a whole sub-block and vpmulld applies its scale: half the instructions per code, and
// the same exact integers. A lane's int32 sum is then its row's S, with no folding across lanes.
enum {
    QG_GROUPS = QK_K / 4,            // groups of 4 codes per block
    QG_PANEL_COLS = 4,               // activation rows a panel takes together
    QG_CHUNK_COLS = 64,              // activation rows per chunk of work, kept in cache (the fewest, for K-quants)
    QG_CHUNK_COLS_MAX = 256,         // the most activation rows of a K-quant chunk
    QG_CHUNK_BYTES = 512 * 1024,     // the activation bytes a K-quant chunk may hold
    QG_PANEL_TILES = 4,              // tiles per chunk of work
};

// Panels that pass over the same activation rows together, sharing each broadcast of 4 activations: two where
// AVX-512 gives 32 vector registers (two panels by 4 rows hold 24 sums), one with AVX2's 16. One broadcast a
// multiply-add kept prefill on an AMD EPYC with AVX-512 waiting on the loads; two panels halve those loads.
#if defined(__AVX512VL__)
#define QG_PANELS 2
#else
#define QG_PANELS 1
#endif

// Codes per sub-block: 32 for Q4_K and Q5_K, 16 for Q6_K.
static inline int qg_sub_codes(enum ggml_type type) {
    return type == GGML_TYPE_Q6_K ? 16 : 32;
}

// The panel kernel's unit, the only part of it where VNNI and AVX2 differ: how many groups of 4 codes it adds up,
// how a group's products join it, the layout of the scales and how a sub-block's scale multiplies it (int32 lanes
// and vpmulld with VNNI; int16 pairs and vpmaddwd without).
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
static inline int qg_unit_groups(enum ggml_type type) {
    return qg_sub_codes(type) / 4;
}

static inline __m256i qg_unit_add(__m256i unit, __m256i codes, __m256i a) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(unit, codes, a);
#else
    return _mm256_dpbusd_avx_epi32(unit, codes, a);
#endif
}

// A scale (int32 lanes, from qg_column) as qg_unit_scaled takes it.
static inline __m256i qg_unit_scale(__m256i scale) {
    return scale;
}

static inline __m256i qg_unit_scaled(__m256i unit, __m256i scale) {
    return _mm256_mullo_epi32(unit, scale);
}
#else
static inline int qg_unit_groups(enum ggml_type type) {
    return type == GGML_TYPE_Q4_K ? 8 : type == GGML_TYPE_Q5_K ? 4 : 2;
}

static inline __m256i qg_unit_add(__m256i unit, __m256i codes, __m256i a) {
    return _mm256_add_epi16(unit, _mm256_maddubs_epi16(codes, a));
}

static inline __m256i qg_unit_scale(__m256i scale) {
    return _mm256_or_si256(_mm256_and_si256(scale, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(scale, 16));
}

static inline __m256i qg_unit_scaled(__m256i unit, __m256i scale) {
    return _mm256_madd_epi16(unit, scale);
}
#endif

// Pairs of int16 that multiply the block's activation sums with vpmaddwd: Q4_K and Q5_K 4 pairs of mins (the
// sub-blocks' sums of 32 are taken in pairs), Q6_K 8 pairs of scales (the sums of 16).
static inline int qg_sum_pairs(enum ggml_type type) {
    return type == GGML_TYPE_Q6_K ? 8 : 4;
}

// 8 weight rows unpacked for the panel kernel: codes[l * QG_GROUPS + g] the rows' 4 codes of group g of block l;
// scales[l * sub-blocks + s] the rows' scale of sub-block s, a lane each as qg_unit_scale lays it out;
// pairs[l * qg_sum_pairs + i] the rows' i-th pair of what multiplies the activation sums; d and dmin[l * 8 + r].
typedef struct {
    __m256i * codes;
    __m256i * scales;
    __m256i * pairs;
    float * d;
    float * dmin;
} qg_panel;

// The 16 bytes of 8 rows (v[r]) transposed: cols[k] holds byte 2k of each row in its low 8 bytes and byte 2k + 1
// in its high 8 bytes, in row order.
static inline void qg_transpose_bytes(const __m128i v[QG_LANES], __m128i cols[QG_LANES]) {
    __m128i a[QG_LANES], b[QG_LANES];
    for (int i = 0; i < QG_LANES; i += 2) {
        a[i] = _mm_unpacklo_epi8(v[i], v[i + 1]);
        a[i + 1] = _mm_unpackhi_epi8(v[i], v[i + 1]);
    }
    for (int h = 0; h < 2; h++) {  // rows 0-3, then 4-7: bytes 0-3, 4-7, 8-11, 12-15 of 4 rows each
        b[4 * h] = _mm_unpacklo_epi16(a[4 * h], a[4 * h + 2]);
        b[4 * h + 1] = _mm_unpackhi_epi16(a[4 * h], a[4 * h + 2]);
        b[4 * h + 2] = _mm_unpacklo_epi16(a[4 * h + 1], a[4 * h + 3]);
        b[4 * h + 3] = _mm_unpackhi_epi16(a[4 * h + 1], a[4 * h + 3]);
    }
    for (int i = 0; i < 4; i++) {
        cols[2 * i] = _mm_unpacklo_epi32(b[i], b[i + 4]);
        cols[2 * i + 1] = _mm_unpackhi_epi32(b[i], b[i + 4]);
    }
}

// Byte j of the 8 rows (from qg_transpose_bytes), widened to int32 lanes, signed or not.
static inline __m256i qg_column(const __m128i cols[QG_LANES], int j, bool is_signed) {
    const __m128i c = j % 2 ? _mm_srli_si128(cols[j / 2], 8) : cols[j / 2];
    return is_signed ? _mm256_cvtepi8_epi32(c) : _mm256_cvtepu8_epi32(c);
}

// Bytes 2i and 2i + 1 of the 8 rows as an int16 pair per lane, signed or not.
static inline __m256i qg_column_pair(const __m128i cols[QG_LANES], int i, bool is_signed) {
    const __m128i c = _mm_unpacklo_epi8(cols[i], _mm_srli_si128(cols[i], 8));
    return is_signed ? _mm256_cvtepi8_epi16(c) : _mm256_cvtepu8_epi16(c);
}

// The 8x8 transpose of 32-bit groups: out[g] holds group g of each of the 8 registers, in lane order.
static inline void qg_transpose8(const __m256i v[QG_LANES], __m256i out[QG_LANES]) {
    __m256i t[QG_LANES], s[QG_LANES];
    for (int i = 0; i < QG_LANES; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < QG_LANES; i += 4) {
        s[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        s[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        s[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        s[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        out[i] = _mm256_permute2x128_si256(s[i], s[i + 4], 0x20);
        out[i + 4] = _mm256_permute2x128_si256(s[i], s[i + 4], 0x31);
    }
}

static inline __attribute__((always_inline)) void qg_unpack_panel(enum ggml_type type, const char * const * w, int nb,
                                                                   qg_panel * p) {
    const int npairs = qg_sum_pairs(type);
    for (int l = 0; l < nb; l++) {
        qg_block k[QG_LANES];
        for (int r = 0; r < QG_LANES; r++) {
            k[r] = qg_read(type, w[r], l);
            p->d[l * QG_LANES + r] = k[r].d;
            p->dmin[l * QG_LANES + r] = k[r].dmin;
        }
        for (int j = 0; j < QG_RUNS; j++) {
            __m256i v[QG_LANES];
            for (int r = 0; r < QG_LANES; r++) {
                v[r] = qg_codes(type, k[r].b, j);
            }
            qg_transpose8(v, p->codes + l * QG_GROUPS + 8 * j);
        }
        // the rows' 16 bytes of scales (Q4_K, Q5_K: 8 scales then 8 mins; Q6_K: 16 signed scales), transposed
        const bool q6 = type == GGML_TYPE_Q6_K;
        __m128i v[QG_LANES], cols[QG_LANES];
        for (int r = 0; r < QG_LANES; r++) {
            v[r] = _mm_loadu_si128((const __m128i *) (q6 ? (const uint8_t *) ((const block_q6_K *) k[r].b)->scales : k[r].sm));
        }
        qg_transpose_bytes(v, cols);
        for (int s = 0; s < QK_K / qg_sub_codes(type); s++) {
            p->scales[l * (QK_K / qg_sub_codes(type)) + s] = qg_unit_scale(qg_column(cols, s, q6));
        }
        for (int i = 0; i < npairs; i++) {
            p->pairs[l * npairs + i] = qg_column_pair(cols, q6 ? i : 4 + i, q6);
        }
    }
}

// The i-th pair of block x's activation sums, broadcast: Q6_K its sums of 16, 2i and 2i + 1; Q4_K and Q5_K the
// sums of 32 of sub-blocks 2i and 2i + 1.
static inline __m256i qg_activation_pair(enum ggml_type type, const block_q8_K * x, int i) {
    int32_t v;
    if (type == GGML_TYPE_Q6_K) {
        memcpy(&v, x->bsums + 2 * i, sizeof(v));
    } else {
        const int16_t s0 = (int16_t) (x->bsums[4 * i] + x->bsums[4 * i + 1]);
        const int16_t s1 = (int16_t) (x->bsums[4 * i + 2] + x->bsums[4 * i + 3]);
        v = (int32_t) ((uint32_t) (uint16_t) s0 | (uint32_t) (uint16_t) s1 << 16);
    }
    return _mm256_set1_epi32(v);
}

// What the panel's pairs (block l) make of activation block x's sums: Q4_K and Q5_K the rows' M, Q6_K their sums
// of scale times the sums of 16.
static inline __attribute__((always_inline)) __m256i qg_panel_pairs(enum ggml_type type, const qg_panel * p,
                                                                    const block_q8_K * x, int l) {
    const int npairs = qg_sum_pairs(type);
    __m256i m = _mm256_setzero_si256();
    for (int i = 0; i < npairs; i++) {
        m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_load_si256(p->pairs + l * npairs + i), qg_activation_pair(type, x, i)));
    }
    return m;
}

// The weight rows the next panels will unpack, asked for a few lines at a time while the current panels work. A row
// of a few hundred bytes is too short a stream for the hardware prefetcher: unpacking waited on memory at each row,
// on an AMD EPYC with AVX-512 about a fifth of the matmul time of documents after a shared instruction (short
// prefills, decode steps of 16 prompts). Asked for at once, a wide matrix's lines filled the core's queue of misses
// and the asking itself waited, so the panel kernel asks for a few of them at each block it passes.
typedef struct {
    const char * row;  // the row being asked for
    size_t nb01;       // bytes from one row to the next
    int64_t row_lines; // 64-byte lines that cover a row, wherever it starts
    int64_t line;      // the next line of the row
    int64_t left;      // lines not yet asked for
    int64_t per_part;  // lines to ask for at a time
} qg_ahead;

// Rows r0 to r1 (excluded; none where r1 <= r0) of a matrix at a, of row_bytes each, nb01 bytes apart, to be asked
// for in `parts` parts.
static inline qg_ahead qg_ahead_of(const char * a, size_t nb01, size_t row_bytes, int64_t r0, int64_t r1,
                                   int64_t parts) {
    qg_ahead h = {a, nb01, (int64_t) row_bytes / 64 + 1, 0, 0, 0};
    if (r1 > r0) {
        h.row = a + r0 * nb01;
        h.left = (r1 - r0) * h.row_lines;
        h.per_part = (h.left + parts - 1) / MAX(1, parts);
    }
    return h;
}

// Asks for the next part of the lines.
static inline void qg_ahead_part(qg_ahead * h) {
    for (int64_t n = MIN(h->per_part, h->left); n > 0; n--, h->left--) {
        _mm_prefetch(h->row + 64 * h->line, _MM_HINT_T0);
        if (++h->line == h->row_lines) {
            h->line = 0;
            h->row += h->nb01;
        }
    }
}

// P panels (p[0 .. P-1]) by C activation rows (x): out[(k * QG_PANEL_COLS + c) * 8 + r] = output of panel k's
// weight row r and activation row c. Each output's arithmetic is the same whatever P and C are. It asks for a part
// of ahead's lines at each block.
static inline __attribute__((always_inline)) void qg_panel_cols(enum ggml_type type, const qg_panel * p, const int P,
                                                                 const block_q8_K * const * x, int nb, float * out,
                                                                 const int C, qg_ahead * ahead) {
    const int G = qg_unit_groups(type);
    const int units = QG_GROUPS / G;
    const int subs = QK_K / qg_sub_codes(type);
    __m256 acc[QG_PANELS][QG_PANEL_COLS];
    for (int k = 0; k < P; k++) {
        for (int c = 0; c < C; c++) {
            acc[k][c] = _mm256_setzero_ps();
        }
    }
    for (int l = 0; l < nb; l++) {
        qg_ahead_part(ahead);
        __m256i s32[QG_PANELS][QG_PANEL_COLS];
        for (int k = 0; k < P; k++) {
            for (int c = 0; c < C; c++) {
                s32[k][c] = _mm256_setzero_si256();
            }
        }
        for (int u = 0; u < units; u++) {
            __m256i unit[QG_PANELS][QG_PANEL_COLS];
            for (int k = 0; k < P; k++) {
                for (int c = 0; c < C; c++) {
                    unit[k][c] = _mm256_setzero_si256();
                }
            }
            // counted from 0, so that GCC unrolls all G groups: counted from u * G, it kept a loop that copied the
            // sums from register to register at every group
#pragma GCC unroll 8
            for (int i = 0; i < G; i++) {
                const int g = u * G + i;
                __m256i w[QG_PANELS];
                for (int k = 0; k < P; k++) {
                    w[k] = _mm256_load_si256(p[k].codes + l * QG_GROUPS + g);
                }
                for (int c = 0; c < C; c++) {
                    int32_t a;
                    memcpy(&a, x[c][l].qs + 4 * g, sizeof(a));
                    const __m256i av = _mm256_set1_epi32(a);
                    for (int k = 0; k < P; k++) {
                        unit[k][c] = qg_unit_add(unit[k][c], w[k], av);
                    }
                }
            }
            for (int k = 0; k < P; k++) {
                const __m256i sc = _mm256_load_si256(p[k].scales + l * subs + u * G * 4 / qg_sub_codes(type));
                for (int c = 0; c < C; c++) {
                    s32[k][c] = _mm256_add_epi32(s32[k][c], qg_unit_scaled(unit[k][c], sc));
                }
            }
        }
        // S's floats, then (Q4_K, Q5_K) M's: M is summed only once S's sums are done with, to spare registers
        for (int k = 0; k < P; k++) {
            const __m256 d = _mm256_loadu_ps(p[k].d + l * QG_LANES);
            for (int c = 0; c < C; c++) {
                const __m256 da = _mm256_set1_ps(x[c][l].d);
                if (type == GGML_TYPE_Q6_K) {
                    s32[k][c] = _mm256_sub_epi32(s32[k][c], _mm256_slli_epi32(qg_panel_pairs(type, p + k, x[c] + l, l), 5));
                }
                acc[k][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[k][c]), _mm256_mul_ps(d, da), acc[k][c]);
            }
        }
        if (type != GGML_TYPE_Q6_K) {
            for (int k = 0; k < P; k++) {
                const __m256 dmin = _mm256_loadu_ps(p[k].dmin + l * QG_LANES);
                for (int c = 0; c < C; c++) {
                    const __m256 da = _mm256_set1_ps(x[c][l].d);
                    acc[k][c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(qg_panel_pairs(type, p + k, x[c] + l, l)),
                                                 _mm256_mul_ps(dmin, da), acc[k][c]);
                }
            }
        }
    }
    for (int k = 0; k < P; k++) {
        for (int c = 0; c < C; c++) {
            _mm256_storeu_ps(out + (k * QG_PANEL_COLS + c) * QG_LANES, acc[k][c]);
        }
    }
}

// The 8 weight rows of the tile from row i0 of a (ne01 rows, nb01 bytes apart); rows past the end repeat the last
// one, whose outputs are not stored.
static inline void qg_weight_rows(const char * a, size_t nb01, int64_t ne01, int64_t i0, const char * w[QG_LANES]) {
    for (int r = 0; r < QG_LANES; r++) {
        w[r] = a + MIN(i0 + r, ne01 - 1) * nb01;
    }
}

// Plane `plane` of a matmul (dst's dimensions 2 and 3 as one index): src0's matrix (broadcast over src1's planes),
// the first of src1's ne11 rows as the caller converted them into wdata (row_size bytes each), and dst's matrix.
typedef struct {
    const char * a;
    const char * b;
    float * c;
} qg_plane;

static inline qg_plane qg_plane_of(const struct ggml_compute_params * params, const struct ggml_tensor * dst,
                                   int64_t plane, size_t row_size) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    const int64_t i12 = plane % src1->ne[2], i13 = plane / src1->ne[2];
    qg_plane p;
    p.a = (const char *) src0->data + i12 / (src1->ne[2] / src0->ne[2]) * src0->nb[2] +
          i13 / (src1->ne[3] / src0->ne[3]) * src0->nb[3];
    p.b = (const char *) params->wdata + (i12 + i13 * src1->ne[2]) * src1->ne[1] * row_size;
    p.c = (float *) ((char *) dst->data + i12 * dst->nb[2] + i13 * dst->nb[3]);
    return p;
}

// The plane of chunk `chunk` (plane_chunks chunks a plane) in *at, where *plane says which one *at holds (-1: none
// yet): true when it moved there, for the caller to prepare what it needs of that plane's activation rows.
static inline bool qg_chunk_plane(const struct ggml_compute_params * params, const struct ggml_tensor * dst,
                                  int64_t chunk, int64_t plane_chunks, size_t row_size, int64_t * plane, qg_plane * at) {
    if (chunk / plane_chunks == *plane) {
        return false;
    }
    *plane = chunk / plane_chunks;
    *at = qg_plane_of(params, dst, *plane, row_size);
    return true;
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

// Decode: dst = src0 x one activation row (src1, already in Q8_K in wdata). The weight rows go in chunks of
// qg_decode_chunk_rows that the threads claim from ggml's shared counter, which the caller set to nth before its
// barrier (so chunk ith is this thread's first): a thread held up by anything else on the machine leaves its chunks
// to the others instead of keeping them waiting at the next barrier. Which thread computes a row does not touch
// its arithmetic. type, nb, row_size and tiles are ggml_quant_gemm_avx2's.
static void qg_decode(const struct ggml_compute_params * params, struct ggml_tensor * dst, enum ggml_type type,
                      int nb, size_t row_size, int64_t tiles) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_TENSOR_BINARY_OP_LOCALS

    const int64_t chunk_tiles = qg_decode_chunk_rows(ne01, params->nth) / QG_LANES;
    const int64_t plane_chunks = (tiles + chunk_tiles - 1) / chunk_tiles;
    const int64_t chunks = plane_chunks * ne12 * ne13;
    if (params->ith >= chunks) {  // no chunk for this thread: its first would be ith
        return;
    }
    // the activation blocks' sums, then each block's sums and its scales (fp16) per weight row
    const size_t part_size = (size_t) nb * ((QG_LANES + 1) * sizeof(__m256i) + 2 * QG_LANES * sizeof(ggml_half));
    __m256i * part = (__m256i *) ggml_aligned_malloc(part_size);
    GGML_ASSERT(part);
    __m256i * sums = part + QG_LANES * nb;
    uint16_t * h = (uint16_t *) (part + (QG_LANES + 1) * nb);

    int64_t plane = -1;
    qg_plane at = {NULL, NULL, NULL};
    for (int64_t chunk = params->ith; chunk < chunks; chunk = ggml_threadpool_chunk_add(params->threadpool, 1)) {
        const bool moved = qg_chunk_plane(params, dst, chunk, plane_chunks, row_size, &plane, &at);
        const block_q8_K * b = (const block_q8_K *) at.b;
        if (moved) {
            for (int l = 0; l < nb; l++) {
#define QG_SUMS(T) qg_activation_sums(T, b + l)
                sums[l] = QG_BY_TYPE(type, QG_SUMS);
#undef QG_SUMS
            }
        }
        const int64_t first = chunk % plane_chunks * chunk_tiles;
        for (int64_t tile = first; tile < MIN(tiles, first + chunk_tiles); tile++) {
            const int64_t i0 = tile * QG_LANES;
            const int rows = (int) MIN(QG_LANES, ne01 - i0);
            const char * w[QG_LANES];
            qg_weight_rows(at.a, nb01, ne01, i0, w);
            float out[QG_LANES];
#define QG_ROWS(T) qg_tile_rows(T, w, b, sums, nb, part, h)
            _mm256_storeu_ps(out, QG_BY_TYPE(type, QG_ROWS));
#undef QG_ROWS
            memcpy(at.c + i0, out, rows * sizeof(float));
        }
    }
    ggml_aligned_free(part, part_size);
}

// Activation rows per chunk of work for rows of nb blocks: as many as QG_CHUNK_BYTES of them hold, from
// QG_CHUNK_COLS to QG_CHUNK_COLS_MAX, in whole 16s. A tile's panels are unpacked again for every chunk of
// activation rows, and that unpacking took a measurable share of prefill in chunks of 64 rows; the bound keeps a
// chunk's activations within a core's L2 cache while the panels pass over them.
static inline int64_t qg_chunk_cols(int nb) {
    const int64_t fit = QG_CHUNK_BYTES / ((int64_t) nb * sizeof(block_q8_K)) / 16 * 16;
    return MAX((int64_t) QG_CHUNK_COLS, MIN((int64_t) QG_CHUNK_COLS_MAX, fit));
}

// P panels (1 or QG_PANELS) by C activation rows (1 to QG_PANEL_COLS), each count as a constant of its own code.
static inline void qg_panels_by_cols(enum ggml_type type, const qg_panel * p, int P, const block_q8_K * const * x,
                                     int nb, float * out, int C, qg_ahead * ahead) {
#define QG_COLS(T, NP, NC) qg_panel_cols(T, p, NP, x, nb, out, NC, ahead)
#define QG_BY_COLS(T, NP) \
    (C == 4 ? QG_COLS(T, NP, 4) : C == 3 ? QG_COLS(T, NP, 3) : C == 2 ? QG_COLS(T, NP, 2) : QG_COLS(T, NP, 1))
#define QG_ONE(T) QG_BY_COLS(T, 1)
#if QG_PANELS > 1
#define QG_TWO(T) QG_BY_COLS(T, 2)
    if (P == 2) {
        QG_BY_TYPE(type, QG_TWO);
        return;
    }
#undef QG_TWO
#endif
    QG_BY_TYPE(type, QG_ONE);
#undef QG_ONE
#undef QG_BY_COLS
#undef QG_COLS
}

// dst = src0 x src1, src1 already in Q8_K in wdata (ggml converts it before the barrier). One activation row is
// qg_decode's. More: the work goes in chunks of QG_PANEL_TILES tiles by qg_chunk_cols activation rows, which the
// threads claim from ggml's shared counter as qg_decode's do, so that a thread held up by the machine leaves its
// chunks to the others. The tiles vary fastest, so the threads pass over the same activation rows, which stay in
// cache while their panels pass over them.
static void ggml_quant_gemm_avx2(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * src1 = dst->src[1];
    GGML_TENSOR_BINARY_OP_LOCALS

    const enum ggml_type type = src0->type;
    const int nb = (int) (ne00 / QK_K);
    const size_t row_size = ggml_row_size(GGML_TYPE_Q8_K, ne10);
    const size_t ldb = row_size / sizeof(block_q8_K);
    const size_t ldc = nb1 / sizeof(float);
    const int64_t tiles = (ne01 + QG_LANES - 1) / QG_LANES;
    if (ne11 == 1) {
        qg_decode(params, dst, type, nb, row_size, tiles);
        return;
    }
    const int64_t tile_chunks = (tiles + QG_PANEL_TILES - 1) / QG_PANEL_TILES;
    const int64_t chunk_cols = qg_chunk_cols(nb);
    const int64_t col_chunks = (ne11 + chunk_cols - 1) / chunk_cols;
    const int64_t chunks = tile_chunks * col_chunks * ne12 * ne13;
    if (params->ith >= chunks) {  // no chunk for this thread: its first would be ith
        return;
    }

    const size_t codes_size = (size_t) nb * QG_GROUPS * sizeof(__m256i);
    const size_t scales_size = (size_t) nb * (QK_K / qg_sub_codes(type)) * sizeof(__m256i);
    const size_t pairs_size = (size_t) nb * qg_sum_pairs(type) * sizeof(__m256i);
    qg_panel p[QG_PANELS];
    for (int k = 0; k < QG_PANELS; k++) {
        p[k].codes = (__m256i *) ggml_aligned_malloc(codes_size);
        p[k].scales = (__m256i *) ggml_aligned_malloc(scales_size);
        p[k].pairs = (__m256i *) ggml_aligned_malloc(pairs_size);
        p[k].d = (float *) malloc((size_t) nb * QG_LANES * sizeof(float));
        p[k].dmin = (float *) malloc((size_t) nb * QG_LANES * sizeof(float));
        GGML_ASSERT(p[k].codes && p[k].scales && p[k].pairs && p[k].d && p[k].dmin);
    }

    const size_t weight_row_bytes = (size_t) nb * ggml_type_size(type);
    // Over few activation rows (a decode step of several prompts), a thread claims its next chunk when it starts the
    // last panels of this one, so that it can ask for the weight rows that chunk starts with while these panels
    // work. Over more, the panels' unpacking is a small share of their time, and a chunk claimed ahead, held while
    // the other threads run out of work, cost more than it saved.
    const bool claim_ahead = ne11 <= QG_CHUNK_COLS;
    for (int64_t chunk = params->ith, next = chunks; chunk < chunks; chunk = next) {
        const int64_t first = chunk % tile_chunks * QG_PANEL_TILES;
        const int64_t j0 = chunk / tile_chunks % col_chunks * chunk_cols;
        const int64_t j1 = MIN(ne11, j0 + chunk_cols);
        const qg_plane at = qg_plane_of(params, dst, chunk / (tile_chunks * col_chunks), row_size);
        const char * a = at.a;
        const block_q8_K * b = (const block_q8_K *) at.b;
        float * c = at.c;
        const int64_t last = MIN(tiles, first + QG_PANEL_TILES);
        for (int64_t tile = first; tile < last; tile += QG_PANELS) {
            const int np = (int) MIN(QG_PANELS, last - tile);
            for (int k = 0; k < np; k++) {
                const char * w[QG_LANES];
                qg_weight_rows(a, nb01, ne01, (tile + k) * QG_LANES, w);
#define QG_UNPACK(T) qg_unpack_panel(T, w, nb, p + k)
                QG_BY_TYPE(type, QG_UNPACK);
#undef QG_UNPACK
            }
            // the panels after these: the rest of this chunk's, or, where it claims ahead, the first of the next chunk
            const char * ahead_a = a;
            int64_t ahead_tile = tile + np, ahead_end = MIN(last, tile + np + QG_PANELS);
            if (ahead_tile >= last && claim_ahead) {
                next = ggml_threadpool_chunk_add(params->threadpool, 1);
                ahead_tile = next % tile_chunks * QG_PANEL_TILES;
                ahead_end = next < chunks ? MIN(tiles, ahead_tile + QG_PANELS) : ahead_tile;
                ahead_a = next < chunks ? qg_plane_of(params, dst, next / (tile_chunks * col_chunks), row_size).a : a;
            }
            const int64_t steps = (j1 - j0 + QG_PANEL_COLS - 1) / QG_PANEL_COLS;
            qg_ahead ahead = qg_ahead_of(ahead_a, nb01, weight_row_bytes, ahead_tile * QG_LANES,
                                         MIN(ne01, ahead_end * QG_LANES), steps * nb);
            float out[QG_PANELS * QG_PANEL_COLS * QG_LANES];
            for (int64_t j = j0; j < j1; j += QG_PANEL_COLS) {
                const int n = (int) MIN(QG_PANEL_COLS, j1 - j);
                const block_q8_K * x[QG_PANEL_COLS];
                for (int i = 0; i < n; i++) {
                    x[i] = b + (j + i) * ldb;
                }
                qg_panels_by_cols(type, p, np, x, nb, out, n, &ahead);
                for (int k = 0; k < np; k++) {
                    const int64_t i0 = (tile + k) * QG_LANES;
                    const int rows = (int) MIN(QG_LANES, ne01 - i0);
                    for (int i = 0; i < n; i++) {
                        memcpy(c + (j + i) * ldc + i0, out + (k * QG_PANEL_COLS + i) * QG_LANES, rows * sizeof(float));
                    }
                }
            }
        }
        if (!claim_ahead) {
            next = ggml_threadpool_chunk_add(params->threadpool, 1);
        }
    }

    for (int k = 0; k < QG_PANELS; k++) {
        ggml_aligned_free(p[k].codes, codes_size);
        ggml_aligned_free(p[k].scales, scales_size);
        ggml_aligned_free(p[k].pairs, pairs_size);
        free(p[k].d);
        free(p[k].dmin);
    }
}
#endif
