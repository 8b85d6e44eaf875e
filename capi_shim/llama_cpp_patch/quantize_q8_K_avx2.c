// newrllama's patch of ggml's rounding of activations to Q8_K on x86 (capi_shim/llama_cpp_patch/apply.py puts it in
// ggml/src/ggml-cpu/arch/x86/quants.c, where ggml's x86 build calls the scalar reference). Every K-quant matmul
// rounds its activation rows first; once the AMX kernel took the products, that scalar loop was a fifth of a
// prefill matmul's time. This gives quantize_row_q8_K_ref's values bit for bit, so the K-quant kernels' arithmetic
// (and every test of it) is unchanged: per block of 256, the first value of the largest magnitude (max), iscale =
// -127 / max, each q = round-half-even(iscale * x) capped at 127 (the reference's nearest_int rounds by adding
// 1.5 * 2^23, which is round-half-even for these magnitudes, as vcvtps2dq is), the sums of 16 and d = 1 / iscale.
// A NaN is passed over in the search for max, as the reference's comparison passes it over (a NaN itself rounds to
// another code than there: no model gives one). A block of zeros gets d = 0 and zero codes, as there, and zero sums
// (the reference leaves them as they were; with d = 0 they add 0).

#if defined(__AVX2__)
#define GGML_QUANTIZE_Q8_K_AVX2 1

// The build fingerprint (python_core/newrllama/engine/llama/reproducibility.py) finds this text in the library.
const char newrllama_llama_cpp_patch_quantize_q8_K_avx2[] = "newrllama-llama-cpp-patch: quantize-q8_K-avx2";

static void ggml_quantize_q8_K_avx2(const float * GGML_RESTRICT x, block_q8_K * GGML_RESTRICT y, int64_t k) {
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t i = 0; i < k / QK_K; i++, x += QK_K) {
        __m256 top = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) {  // vmaxps returns its second operand where one is NaN
            top = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), magnitude), top);
        }
        __m128 t = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
        t = _mm_max_ps(t, _mm_movehl_ps(t, t));
        const float amax = _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
        if (amax == 0.0f) {
            y[i].d = 0;
            memset(y[i].qs, 0, sizeof(y[i].qs));
            memset(y[i].bsums, 0, sizeof(y[i].bsums));
            continue;
        }
        float max = 0.0f;
        for (int j = 0; j < QK_K; j += 8) {
            const int at = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), magnitude),
                                                            _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (at) {
                max = x[j + __builtin_ctz((unsigned) at)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 s = _mm256_set1_ps(iscale);
        const __m256i cap = _mm256_set1_epi32(127);
        for (int j = 0; j < QK_K; j += 32) {
            __m256i v[4];
            for (int u = 0; u < 4; u++) {
                v[u] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(s, _mm256_loadu_ps(x + j + 8 * u))), cap);
            }
            // packs work within 128-bit lanes: the dwords come out as 0 4 1 5 2 6 3 7
            const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
            const __m256i q = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *) (y[i].qs + j), q);
            // the sums of 16: pairs, then fours, then each 128-bit lane's four dwords
            __m256i sum = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1));
            sum = _mm256_hadd_epi32(sum, sum);
            sum = _mm256_hadd_epi32(sum, sum);
            y[i].bsums[j / 16] = (int16_t) _mm256_extract_epi32(sum, 0);
            y[i].bsums[j / 16 + 1] = (int16_t) _mm256_extract_epi32(sum, 4);
        }
        y[i].d = 1 / iscale;
    }
}
#endif
