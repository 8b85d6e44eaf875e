/* AMX tiles in software, for checking newrllama's AMX kernel (quant-gemm-amx) on CPUs without AMX: linked into a
 * static program with -Wl,--wrap=syscall, and with cpuid_with_amx.h included before every C file of ggml-cpu, it
 * makes the program see a CPU with AMX-TILE and AMX-INT8 whose kernel grants the tiles (arch_prctl), and it carries
 * out each tile instruction the CPU refuses (SIGILL) on tiles kept per thread, by the Intel SDM's definitions:
 * LDTILECFG, STTILECFG, TILERELEASE, TILEZERO, TILELOADD(T1), TILESTORED and the four TDPB*D. The integer products
 * of TDPB*D are exact in int32 (wrapping), as the hardware's are, so a kernel whose bits hold here holds them on
 * the hardware, provided it keeps to these instructions. scripts/check_kernels_emulated.py builds it in.
 * Anything else that raises SIGILL stops the program with a message naming the bytes. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

enum { TILES = 8, TILE_ROWS = 16, TILE_BYTES_PER_ROW = 64, XTILECFG = 17, XTILEDATA = 18 };

typedef struct {
    bool configured;
    uint8_t config[64];  /* as LDTILECFG took it, for STTILECFG */
    uint8_t rows[TILES];
    uint16_t bytes_per_row[TILES];
    uint8_t data[TILES][TILE_ROWS][TILE_BYTES_PER_ROW];
} tile_state;

static __thread tile_state tiles;
static volatile sig_atomic_t tiles_granted;

/* The kernel's side: ARCH_REQ_XCOMP_PERM for the tile data is granted, and ARCH_GET_XCOMP_PERM then says so. Where
 * the kernel itself grants it (a CPU with AMX), the hardware runs the tiles and nothing here is needed. */
long __real_syscall(long number, ...);
long __wrap_syscall(long number, ...) {
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++) {
        a[i] = va_arg(ap, long);
    }
    va_end(ap);
    if (number == SYS_arch_prctl && a[0] == 0x1023 && a[1] == XTILEDATA) {
        if (__real_syscall(number, a[0], a[1]) != 0) {
            tiles_granted = 1;
        }
        return 0;
    }
    if (number == SYS_arch_prctl && a[0] == 0x1022) {
        long done = __real_syscall(number, a[0], a[1]);
        if (done == 0 && tiles_granted) {
            *(unsigned long long *) a[1] |= 1ull << XTILECFG | 1ull << XTILEDATA;
        }
        return done;
    }
    return __real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static const int greg_of[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP, REG_RSI, REG_RDI,
                                REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15};

static _Noreturn void refuse(const uint8_t *at, const char *why) {
    fprintf(stderr, "amx_on_sigill: %s at %p:", why, (const void *) at);
    for (int i = 0; i < 8; i++) {
        fprintf(stderr, " %02x", at[i]);
    }
    fprintf(stderr, "\n");
    _exit(134);
}

/* One decoded tile instruction: opcode, pp (0 none, 1 66, 2 F3, 3 F2), the ModRM fields, and for a memory operand
 * its address and the stride of SIB's index (base + disp, index * scale). */
typedef struct {
    uint8_t opcode, pp, mod, reg, rm, vvvv;
    uint64_t address, stride;
    int length;
} instruction;

static instruction decode(const uint8_t *p, const greg_t *g) {
    instruction in;
    memset(&in, 0, sizeof(in));
    if (p[0] != 0xc4 || (p[1] & 0x1f) != 2 || (p[2] & 0x80) || (p[2] & 0x04)) {
        refuse(p, "not a tile instruction (VEX.128.0F38.W0)");
    }
    const int r_ext = (~p[1] >> 7 & 1) << 3, x_ext = (~p[1] >> 6 & 1) << 3, b_ext = (~p[1] >> 5 & 1) << 3;
    in.vvvv = ~p[2] >> 3 & 15;
    in.pp = p[2] & 3;
    in.opcode = p[3];
    const uint8_t modrm = p[4];
    in.mod = modrm >> 6;
    in.reg = (modrm >> 3 & 7) | r_ext;
    in.rm = modrm & 7;
    int at = 5;
    if (in.mod == 3) {
        in.rm |= b_ext;
        in.length = at;
        return in;
    }
    int64_t base = 0;
    if (in.rm == 4) {  /* SIB */
        const uint8_t sib = p[at++];
        const int scale = 1 << (sib >> 6), index = (sib >> 3 & 7) | x_ext, b = (sib & 7) | b_ext;
        if (index != 4) {
            in.stride = (uint64_t) g[greg_of[index]] * (uint64_t) scale;
        }
        if ((sib & 7) == 5 && in.mod == 0) {
            int32_t d;
            memcpy(&d, p + at, 4);
            at += 4;
            base = d;
        } else {
            base = g[greg_of[b]];
        }
    } else if (in.rm == 5 && in.mod == 0) {  /* RIP-relative: from the next instruction's address */
        int32_t d;
        memcpy(&d, p + at, 4);
        at += 4;
        in.length = at;
        in.address = (uint64_t) (g[REG_RIP] + at + d);
        return in;
    } else {
        base = g[greg_of[in.rm | b_ext]];
    }
    if (in.mod == 1) {
        base += (int8_t) p[at++];
    } else if (in.mod == 2) {
        int32_t d;
        memcpy(&d, p + at, 4);
        at += 4;
        base += d;
    }
    in.address = (uint64_t) base;
    in.length = at;
    return in;
}

static void configure(const uint8_t *p, const uint8_t *cfg) {
    if (cfg[0] == 0) {  /* palette 0: tiles off */
        memset(&tiles, 0, sizeof(tiles));
        return;
    }
    if (cfg[0] != 1 || cfg[1] != 0) {
        refuse(p, "LDTILECFG with a palette other than 1 or a start row");
    }
    memset(&tiles, 0, sizeof(tiles));
    memcpy(tiles.config, cfg, 64);
    for (int t = 0; t < TILES; t++) {
        memcpy(&tiles.bytes_per_row[t], cfg + 16 + 2 * t, 2);
        tiles.rows[t] = cfg[48 + t];
        if (tiles.rows[t] > TILE_ROWS || tiles.bytes_per_row[t] > TILE_BYTES_PER_ROW) {
            refuse(p, "LDTILECFG beyond 16 rows of 64 bytes");
        }
    }
    tiles.configured = true;
}

static int tile_of(const uint8_t *p, int t) {
    if (!tiles.configured) {
        refuse(p, "a tile instruction before LDTILECFG");
    }
    if (t >= TILES) {
        refuse(p, "a tile register past tmm7");
    }
    return t;
}

/* C += A . B over groups of 4 bytes: C[m][n] (int32) += sum_i A[m][4k + i] * B[k][4n + i]; a_signed and b_signed
 * choose the bytes' types (TDPBUSD: A unsigned, B signed). Rows and columns of C past its shape are zeroed. */
static void dot_product(const uint8_t *p, int c, int a, int b, bool a_signed, bool b_signed) {
    const int rows = tiles.rows[c], n = tiles.bytes_per_row[c] / 4, k = tiles.bytes_per_row[a] / 4;
    if (tiles.rows[a] != rows || tiles.rows[b] != k || tiles.bytes_per_row[b] != tiles.bytes_per_row[c]) {
        refuse(p, "TDPB*D on tiles whose shapes do not fit");
    }
    uint8_t out[TILE_ROWS][TILE_BYTES_PER_ROW];
    memset(out, 0, sizeof(out));
    for (int m = 0; m < rows; m++) {
        for (int j = 0; j < n; j++) {
            int32_t acc;
            memcpy(&acc, tiles.data[c][m] + 4 * j, 4);
            for (int kk = 0; kk < k; kk++) {
                for (int i = 0; i < 4; i++) {
                    const uint8_t x = tiles.data[a][m][4 * kk + i], y = tiles.data[b][kk][4 * j + i];
                    const int32_t xv = a_signed ? (int8_t) x : x, yv = b_signed ? (int8_t) y : y;
                    acc = (int32_t) ((uint32_t) acc + (uint32_t) (xv * yv));
                }
            }
            memcpy(out[m] + 4 * j, &acc, 4);
        }
    }
    memcpy(tiles.data[c], out, sizeof(out));
}

static void on_sigill(int sig, siginfo_t *info, void *context) {
    (void) sig;
    (void) info;
    ucontext_t *uc = (ucontext_t *) context;
    greg_t *g = uc->uc_mcontext.gregs;
    const uint8_t *p = (const uint8_t *) g[REG_RIP];
    const instruction in = decode(p, g);
    if (in.opcode == 0x49 && in.mod != 3 && in.reg == 0 && in.vvvv == 0 && in.pp == 0) {        /* LDTILECFG */
        configure(p, (const uint8_t *) in.address);
    } else if (in.opcode == 0x49 && in.mod != 3 && in.reg == 0 && in.vvvv == 0 && in.pp == 1) { /* STTILECFG */
        if (tiles.configured) {
            memcpy((void *) in.address, tiles.config, 64);
        } else {
            memset((void *) in.address, 0, 64);
        }
    } else if (in.opcode == 0x49 && in.mod == 3 && in.reg == 0 && in.rm == 0 && in.pp == 0 && in.vvvv == 0) {
        memset(&tiles, 0, sizeof(tiles));                                                            /* TILERELEASE */
    } else if (in.opcode == 0x49 && in.mod == 3 && in.rm == 0 && in.pp == 3 && in.vvvv == 0) {  /* TILEZERO */
        memset(tiles.data[tile_of(p, in.reg)], 0, sizeof(tiles.data[0]));
    } else if (in.opcode == 0x4b && in.mod != 3 && in.rm == 4 && in.vvvv == 0 && in.pp != 0) {
        const int t = tile_of(p, in.reg);
        for (int r = 0; r < tiles.rows[t]; r++) {
            uint8_t *row = (uint8_t *) (in.address + (uint64_t) r * in.stride);
            if (in.pp == 2) {                                                                        /* TILESTORED */
                memcpy(row, tiles.data[t][r], tiles.bytes_per_row[t]);
            } else {                                                                          /* TILELOADD(T1) */
                memset(tiles.data[t][r], 0, TILE_BYTES_PER_ROW);
                memcpy(tiles.data[t][r], row, tiles.bytes_per_row[t]);
            }
        }
        if (in.pp != 2) {
            for (int r = tiles.rows[t]; r < TILE_ROWS; r++) {
                memset(tiles.data[t][r], 0, TILE_BYTES_PER_ROW);
            }
        }
    } else if (in.opcode == 0x5e && in.mod == 3) {  /* TDPB[SU][SU]D tmm(reg), tmm(rm), tmm(vvvv) */
        /* pp: NP UUD, 66 USD (A unsigned), F3 SUD (B unsigned), F2 SSD */
        const bool a_signed = in.pp == 2 || in.pp == 3, b_signed = in.pp == 1 || in.pp == 3;
        dot_product(p, tile_of(p, in.reg), tile_of(p, in.rm), tile_of(p, in.vvvv), a_signed, b_signed);
    } else {
        refuse(p, "an instruction this emulation does not carry out");
    }
    g[REG_RIP] += in.length;
}

/* The CPUID that cpuid_with_amx.h puts in place of <cpuid.h>'s: the CPU's own, with AMX-BF16, AMX-TILE and
 * AMX-INT8 (leaf 7, EDX bits 22, 24, 25). */
int newrllama_cpuid_with_amx(unsigned leaf, unsigned subleaf, unsigned *a, unsigned *b, unsigned *c, unsigned *d) {
    if (!__get_cpuid_count(leaf, subleaf, a, b, c, d)) {
        return 0;
    }
    if (leaf == 7 && subleaf == 0) {
        *d |= 1u << 22 | 1u << 24 | 1u << 25;
    }
    return 1;
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = on_sigill;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGILL, &action, NULL) != 0) {
        perror("amx_on_sigill: sigaction");
        _exit(134);
    }
}
