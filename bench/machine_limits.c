// What the machine allows, measured by loops that do nothing else: the rate at which one thread reads memory,
// and the int8 multiply-adds one thread's widest unit finishes per second. bench/machine_limits.py compiles this
// for the CPU it runs on (-march=native) and runs one copy per thread at once.
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#if defined(__AMX_INT8__) && defined(__AMX_TILE__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

// Reads n bytes (a multiple of 256) reps times with the widest loads, four streams of them so that loads, not the
// adds, set the pace; returns a value built from every byte so that no load can be dropped.
uint64_t limits_read(const void *p, size_t n, int reps) {
    if (p == NULL || n % 256 != 0 || reps < 1) return 0;
#if defined(__AVX512F__)
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (int r = 0; r < reps; r++) {
        for (const char *q = p, *end = (const char *) p + n; q < end; q += 256) {
            a = _mm512_xor_si512(a, _mm512_load_si512((const void *) q));
            b = _mm512_xor_si512(b, _mm512_load_si512((const void *) (q + 64)));
            c = _mm512_xor_si512(c, _mm512_load_si512((const void *) (q + 128)));
            d = _mm512_xor_si512(d, _mm512_load_si512((const void *) (q + 192)));
        }
    }
    __m512i x = _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d));
    uint64_t lanes[8];
    _mm512_storeu_si512((void *) lanes, x);
#else
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (int r = 0; r < reps; r++) {
        for (const char *q = p, *end = (const char *) p + n; q < end; q += 128) {
            a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *) q));
            b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *) (q + 32)));
            c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *) (q + 64)));
            d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *) (q + 96)));
        }
    }
    __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *) lanes, x);
#endif
    uint64_t sum = 0;
    for (size_t i = 0; i < sizeof lanes / sizeof lanes[0]; i++) sum ^= lanes[i];
    return sum;
}

// The unit limits_vector_macs uses, as the results name it.
const char *limits_vector_unit(void) {
#if defined(__AVX512VNNI__)
    return "AVX512-VNNI vpdpbusd, 64 int8 multiply-adds an instruction";
#elif defined(__AVXVNNI__)
    return "AVX-VNNI vpdpbusd, 32 int8 multiply-adds an instruction";
#else
    return "AVX2 vpmaddubsw, 32 int8 multiply-adds an instruction";
#endif
}

// Runs iters rounds of 12 independent int8 dot-product instructions (more than their latency times their
// throughput, so the unit never waits; unrolled, so that the accumulators stay in registers) and returns the
// multiply-adds done; *sink keeps the results alive.
int64_t limits_vector_macs(int64_t iters, int32_t *sink) {
    if (iters < 1 || sink == NULL) return -1;
#if defined(__AVX512VNNI__)
    const __m512i u = _mm512_set1_epi8(3), s = _mm512_set1_epi8(-2);
    __m512i acc[12];
    _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) acc[k] = _mm512_set1_epi32(k);
    for (int64_t i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) acc[k] = _mm512_dpbusd_epi32(acc[k], u, s);
    _Pragma("GCC unroll 12") for (int k = 1; k < 12; k++) acc[0] = _mm512_add_epi32(acc[0], acc[k]);
    *sink = _mm512_reduce_add_epi32(acc[0]);
    return iters * 12 * 64;
#elif defined(__AVXVNNI__)
    const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
    __m256i acc[12];
    _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) acc[k] = _mm256_set1_epi32(k);
    for (int64_t i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) acc[k] = _mm256_dpbusd_avx_epi32(acc[k], u, s);
    _Pragma("GCC unroll 12") for (int k = 1; k < 12; k++) acc[0] = _mm256_add_epi32(acc[0], acc[k]);
    int32_t lanes[8];
    _mm256_storeu_si256((__m256i *) lanes, acc[0]);
    *sink = lanes[0];
    return iters * 12 * 32;
#else
    // vpmaddubsw's pairwise sums stay in 16 bits, which is all its peak counts; kernels add vpmaddwd after it.
    const __m256i u = _mm256_set1_epi8(3), s = _mm256_set1_epi8(-2);
    __m256i acc[12];
    _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) acc[k] = _mm256_set1_epi16((short) k);
    for (int64_t i = 0; i < iters; i++)
        _Pragma("GCC unroll 12") for (int k = 0; k < 12; k++) acc[k] = _mm256_add_epi16(acc[k], _mm256_maddubs_epi16(u, s));
    _Pragma("GCC unroll 12") for (int k = 1; k < 12; k++) acc[0] = _mm256_add_epi16(acc[0], acc[k]);
    int16_t lanes[16];
    _mm256_storeu_si256((__m256i *) lanes, acc[0]);
    *sink = lanes[0];
    return iters * 12 * 32;
#endif
}

#if defined(__AMX_INT8__) && defined(__AMX_TILE__)
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} limits_tile_config;
#endif

// Runs iters rounds of four independent 16x16x64 int8 tile products and returns the multiply-adds done, or -1
// where the CPU has no AMX or Linux refuses this thread the tiles.
int64_t limits_amx_macs(int64_t iters, int32_t *sink) {
    if (iters < 1 || sink == NULL) return -1;
#if defined(__AMX_INT8__) && defined(__AMX_TILE__)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return -1;
    limits_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    static const int8_t zeros[16 * 64];
    int32_t out[16 * 16];
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, zeros, 64);
    _tile_loadd(5, zeros, 64);
    _tile_loadd(6, zeros, 64);
    _tile_loadd(7, zeros, 64);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    *sink = out[0];
    return iters * 4 * 16 * 16 * 64;
#else
    (void) iters;
    return -1;
#endif
}
