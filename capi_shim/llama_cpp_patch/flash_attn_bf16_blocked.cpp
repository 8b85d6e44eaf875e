// newrllama's patch of llama.cpp's CPU attention over bf16 K and V (capi_shim/llama_cpp_patch/apply.py puts it in
// ggml/src/ggml-cpu/ops.cpp). newrllama keeps K and V in bf16 because llama.cpp then attends a row cell by cell
// whatever the number of rows, so that a row's numbers do not depend on the rows beside it; but cell by cell,
// with a function call, a widening and a pass over the row's sums per cell, attention was the largest cost after
// the matmuls in documents after a long instruction (docs/benchmarks.md, "Attention over bf16 cells"). This does
// the same kind of arithmetic in blocks: a row takes its
// visible cells in blocks of FA_BLOCK cells fixed by cell index, with one online-softmax rescale per block and
// the block's values added in cell order, and the rows of a chunk that share a KV head take each block together,
// so that a cell is read and widened once for them and a row's sums stay in registers across the block. A row's
// arithmetic depends only on its query, its visible cells and their indices, never on the other rows of the step.

#if defined(GGML_SIMD) && !defined(__ARM_FEATURE_SVE) && !defined(__riscv_v_intrinsic)
#define GGML_FA_BF16_BLOCKED 1

// The build fingerprint (python_core/newrllama/engine/llama/reproducibility.py) finds this text in the library, and
// only where the kernel is compiled in: on SVE, RISC-V V or builds without SIMD llama.cpp attends cell by cell.
extern "C" const char newrllama_llama_cpp_patch[] = "newrllama-llama-cpp-patch: flash-attn-bf16-blocked";

static constexpr int FA_BLOCK = 8;  // cells per online-softmax block
// Rows that take a block together, its cells widened once for them: a prompt's rows of one KV head are its tokens
// times the heads that share it, and groups of 16 widened each cell four times as often.
static constexpr int FA_GROUP = 64;
// A row's dots with this many cells are taken side by side, and this many vectors of its V sums stay in registers
// while the block's cells are added: as many as the vector registers hold beside what they work on.
static constexpr int FA_DOTS  = GGML_F32_EPR >= 16 ? 4 : 2;
static constexpr int FA_VREGS = 8;

// The dots of one query with NC cells (rows k_stride floats apart), each with ggml_vec_dot_f32's arithmetic: its
// accumulators, their reduction and its leftovers, so each dot has the bits that function gives it; side by side,
// one cell's reduction overlaps the other cells' multiply-adds, where a call per cell ran them one after another.
template <int NC>
static inline void fa_dots(int64_t n, const float * q, const float * k, int64_t k_stride, float * out) {
    const int64_t np = n & ~((int64_t) GGML_F32_STEP - 1);
    GGML_F32_VEC sum[NC][GGML_F32_ARR];
    for (int c = 0; c < NC; ++c) {
        for (int j = 0; j < GGML_F32_ARR; ++j) {
            sum[c][j] = GGML_F32_VEC_ZERO;
        }
    }
    for (int64_t i = 0; i < np; i += GGML_F32_STEP) {
        for (int j = 0; j < GGML_F32_ARR; ++j) {
            const GGML_F32_VEC qj = GGML_F32_VEC_LOAD(q + i + j*GGML_F32_EPR);
            for (int c = 0; c < NC; ++c) {
                sum[c][j] = GGML_F32_VEC_FMA(sum[c][j], qj, GGML_F32_VEC_LOAD(k + c*k_stride + i + j*GGML_F32_EPR));
            }
        }
    }
    for (int c = 0; c < NC; ++c) {
        float sumf = 0.0f;
        GGML_F32_VEC_REDUCE(sumf, sum[c]);
        for (int64_t i = np; i < n; ++i) {
            sumf += q[i]*k[c*k_stride + i];
        }
        out[c] = sumf;
    }
}

// acc[d, d + R vectors) += p[c]*V[c] over the block's visible cells, in cell order for every element, the R vectors
// held in registers across the cells (where a pass over acc per cell loaded and stored them for each).
template <int R>
static inline void fa_add_value_vectors(int64_t DV, int64_t d, float * acc, const float * Vf, const float * p,
                                        const float * s, int nc) {
    GGML_F32_VEC a[R];
    for (int r = 0; r < R; ++r) {
        a[r] = GGML_F32_VEC_LOAD(acc + d + r*GGML_F32_EPR);
    }
    for (int c = 0; c < nc; ++c) {
        if (s[c] == -INFINITY) {
            continue;
        }
        const GGML_F32_VEC pc = GGML_F32_VEC_SET1(p[c]);
        for (int r = 0; r < R; ++r) {
            a[r] = GGML_F32_VEC_FMA(a[r], GGML_F32_VEC_LOAD(Vf + c*DV + d + r*GGML_F32_EPR), pc);
        }
    }
    for (int r = 0; r < R; ++r) {
        GGML_F32_VEC_STORE(acc + d + r*GGML_F32_EPR, a[r]);
    }
}

// acc += p[c]*V[c] over the block's visible cells: FA_VREGS vectors at a time, then the rest one by one.
static inline void fa_add_values(int64_t DV, float * acc, const float * Vf, const float * p, const float * s, int nc) {
    int64_t d = 0;
    for (; d + FA_VREGS*GGML_F32_EPR <= DV; d += FA_VREGS*GGML_F32_EPR) {
        fa_add_value_vectors<FA_VREGS>(DV, d, acc, Vf, p, s, nc);
    }
    for (; d < DV; d += GGML_F32_EPR) {
        fa_add_value_vectors<1>(DV, d, acc, Vf, p, s, nc);
    }
}

static bool ggml_fa_bf16_blocked_supports(const ggml_tensor * q, const ggml_tensor * k, const ggml_tensor * v) {
    return q->type == GGML_TYPE_F32 && k->type == GGML_TYPE_BF16 && v->type == GGML_TYPE_BF16 &&
           v->ne[0] % GGML_F32_EPR == 0;
}

static void ggml_compute_forward_flash_attn_ext_bf16_blocked(
        const ggml_compute_params * params,
        ggml_tensor * dst,
        int ir0, int ir1) {
    GGML_UNUSED(params);
    const ggml_tensor * q     = dst->src[0];
    const ggml_tensor * k     = dst->src[1];
    const ggml_tensor * v     = dst->src[2];
    const ggml_tensor * mask  = dst->src[3];
    const ggml_tensor * sinks = dst->src[4];

    GGML_TENSOR_LOCALS(int64_t, neq, q,   ne)
    GGML_TENSOR_LOCALS(size_t,  nbq, q,   nb)
    GGML_TENSOR_LOCALS(int64_t, nek, k,   ne)
    GGML_TENSOR_LOCALS(size_t,  nbk, k,   nb)
    GGML_TENSOR_LOCALS(int64_t, nev, v,   ne)
    GGML_TENSOR_LOCALS(size_t,  nbv, v,   nb)
    GGML_TENSOR_LOCALS(int64_t, ne,  dst, ne)
    GGML_TENSOR_LOCALS(size_t,  nb,  dst, nb)

    const int64_t DK = nek0;
    const int64_t DV = nev0;

    const int64_t rk2 = neq2/nek2;
    const int64_t rk3 = neq3/nek3;
    const int64_t rv2 = neq2/nev2;
    const int64_t rv3 = neq3/nev3;

    float scale         = 1.0f;
    float max_bias      = 0.0f;
    float logit_softcap = 0.0f;

    memcpy(&scale,         (float *) dst->op_params + 0, sizeof(float));
    memcpy(&max_bias,      (float *) dst->op_params + 1, sizeof(float));
    memcpy(&logit_softcap, (float *) dst->op_params + 2, sizeof(float));

    if (logit_softcap != 0) {
        scale /= logit_softcap;
    }

    const uint32_t n_head      = neq2;
    const uint32_t n_head_log2 = 1u << (uint32_t) floor(log2(n_head));

    const float m0 = powf(2.0f, -(max_bias       ) / n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);

    // per thread, grown once: the block's cells widened to f32 (K, then V), then the V sums of the group's rows
    static thread_local std::vector<float> scratch;
    const size_t n_floats = (size_t) FA_BLOCK*(DK + DV) + (size_t) FA_GROUP*DV;
    if (scratch.size() < n_floats) {
        scratch.resize(n_floats);
    }
    float * Kf  = scratch.data();
    float * Vf  = Kf + FA_BLOCK*DK;
    float * VKQ = Vf + FA_BLOCK*DV;

    for (int ir = ir0; ir < ir1; ) {
        // the group: consecutive rows whose heads share a KV head
        int           n = 0;
        int64_t       iq1s[FA_GROUP];
        int64_t       iq2s[FA_GROUP];
        const int64_t iq3 = ir/(neq2*neq1);
        const int64_t iq2 = (ir - iq3*neq2*neq1)/neq1; // the first row's head
        const int64_t ik2 = iq2/rk2;
        while (n < FA_GROUP && ir + n < ir1) {
            const int64_t r   = ir + n;
            const int64_t r3  = r/(neq2*neq1);
            const int64_t r2  = (r - r3*neq2*neq1)/neq1;
            if (r3 != iq3 || r2/rk2 != ik2) {
                break;
            }
            iq1s[n] = r - r3*neq2*neq1 - r2*neq1;
            iq2s[n] = r2;
            ++n;
        }

        const int64_t ik3 = iq3/rk3;
        const int64_t iv2 = iq2/rv2;
        const int64_t iv3 = iq3/rv3;

        float               S[FA_GROUP];
        float               M[FA_GROUP];
        float               slope[FA_GROUP];
        const float       * pq[FA_GROUP];
        const ggml_fp16_t * mp[FA_GROUP];

        for (int g = 0; g < n; ++g) {
            const uint32_t h = iq2s[g];
            slope[g] = (max_bias > 0.0f) ? h < n_head_log2 ? powf(m0, h + 1) : powf(m1, 2*(h - n_head_log2) + 1) : 1.0f;
            S[g] = 0.0f;
            M[g] = -INFINITY;
            memset(VKQ + g*DV, 0, DV*sizeof(float));
            pq[g] = (const float *) ((const char *) q->data + (iq1s[g]*nbq1 + iq2s[g]*nbq2 + iq3*nbq3));
            mp[g] = mask ? (const ggml_fp16_t *) ((const char *) mask->data + iq1s[g]*mask->nb[1] +
                                                  (iq2s[g]%mask->ne[2])*mask->nb[2] + (iq3%mask->ne[3])*mask->nb[3])
                         : NULL;
        }

        for (int64_t ic0 = 0; ic0 < nek1; ic0 += FA_BLOCK) {
            const int nc = (int) std::min<int64_t>(FA_BLOCK, nek1 - ic0);

            float mv[FA_GROUP][FA_BLOCK];
            bool  seen[FA_BLOCK] = { false };
            bool  any = false;
            for (int g = 0; g < n; ++g) {
                for (int c = 0; c < nc; ++c) {
                    mv[g][c] = mp[g] ? slope[g]*GGML_CPU_FP16_TO_FP32(mp[g][ic0 + c]) : 0.0f;
                    const bool visible = mv[g][c] != -INFINITY;
                    seen[c] = seen[c] || visible;
                    any     = any || visible;
                }
            }
            if (!any) {
                continue;
            }

            for (int c = 0; c < nc; ++c) {
                if (seen[c]) {
                    ggml_cpu_bf16_to_fp32((const ggml_bf16_t *) ((const char *) k->data + ((ic0 + c)*nbk1 + ik2*nbk2 + ik3*nbk3)),
                                          Kf + c*DK, DK);
                    ggml_cpu_bf16_to_fp32((const ggml_bf16_t *) ((const char *) v->data + ((ic0 + c)*nbv1 + iv2*nbv2 + iv3*nbv3)),
                                          Vf + c*DV, DV);
                }
            }

            for (int g = 0; g < n; ++g) {
                float dot[FA_BLOCK];
                int c0 = 0;
                for (; c0 + FA_DOTS <= nc; c0 += FA_DOTS) {
                    bool visible = false;
                    for (int c = c0; c < c0 + FA_DOTS; ++c) {
                        visible = visible || mv[g][c] != -INFINITY;
                    }
                    if (visible) {
                        fa_dots<FA_DOTS>(DK, pq[g], Kf + c0*DK, DK, dot + c0);
                    }
                }
                for (; c0 < nc; ++c0) {
                    if (mv[g][c0] != -INFINITY) {
                        fa_dots<1>(DK, pq[g], Kf + c0*DK, DK, dot + c0);
                    }
                }

                float s[FA_BLOCK];
                float block_max = -INFINITY;
                for (int c = 0; c < nc; ++c) {
                    if (mv[g][c] == -INFINITY) {
                        s[c] = -INFINITY;
                        continue;
                    }
                    float x = dot[c];
                    x *= scale;
                    if (logit_softcap != 0.0f) {
                        x = logit_softcap*tanhf(x);
                    }
                    s[c] = x + mv[g][c];
                    block_max = std::max(block_max, s[c]);
                }
                if (block_max == -INFINITY) {
                    continue;
                }

                float * acc = VKQ + g*DV;
                if (block_max > M[g]) {
                    const float ms = expf(M[g] - block_max);
                    M[g] = block_max;
                    ggml_vec_scale_f32(DV, acc, ms);
                    S[g] *= ms;
                }

                float p[FA_BLOCK];
                for (int c = 0; c < nc; ++c) {
                    p[c] = s[c] == -INFINITY ? 0.0f : expf(s[c] - M[g]);
                    S[g] += p[c];
                }

                fa_add_values(DV, acc, Vf, p, s, nc);
            }
        }

        for (int g = 0; g < n; ++g) {
            float * acc = VKQ + g*DV;

            if (sinks) {
                const float s = ((float *)((char *) sinks->data))[iq2s[g]];

                float ms = 1.0f;
                float vs = 1.0f;

                if (s > M[g]) {
                    ms = expf(M[g] - s);
                    M[g] = s;
                    ggml_vec_scale_f32(DV, acc, ms);
                } else {
                    vs = expf(s - M[g]);
                }

                S[g] = S[g]*ms + vs;
            }

            const float S_inv = S[g] == 0.0f ? 0.0f : 1.0f/S[g];
            ggml_vec_scale_f32(DV, acc, S_inv);

            // permute(0, 2, 1, 3)
            memcpy((char *) dst->data + (iq3*ne2*ne1 + iq2s[g] + iq1s[g]*ne1)*nb1, acc, nb1);
        }

        ir += n;
    }
}
#endif

