/* Runs AMX tile instructions on any x86-64 Linux CPU, linked with scripts/emulated_amx/amx_on_sigill.c
 * (-Wl,--wrap=syscall), and compares what they leave with the Intel SDM's definitions computed here in plain C:
 * each TDPB[SU][SU]D on tiles of 12 rows (A: 48 bytes a row, B and C: 40), loaded and stored with a stride other
 * than a row's length, through base registers r8 and up, a displacement, and a RIP-relative tile configuration.
 * Prints one line per instruction checked, "name ok" or "name WRONG", then whether the process was granted the
 * tiles; exits 1 if anything is wrong. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ROWS = 12, A_BYTES = 48, BC_BYTES = 40, STRIDE = 72 };

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} tile_config;

/* tmm0: C, tmm4: B, tmm6: A; the rest 16 rows of 64 bytes */
static const tile_config config = {1, 0, {0}, {BC_BYTES, 64, 64, 64, BC_BYTES, 64, A_BYTES, 64},
                                   {ROWS, 16, 16, 16, ROWS, 16, ROWS, 16}};

static uint8_t a[ROWS][STRIDE], b[ROWS][STRIDE];
static int32_t c0[ROWS][STRIDE / 4], c[ROWS][STRIDE / 4], expected[ROWS][STRIDE / 4];

static int32_t byte_value(uint8_t v, int is_signed) { return is_signed ? (int8_t) v : v; }

static int check(const char *name, int a_signed, int b_signed) {
    memset(expected, 0, sizeof(expected));  /* a store writes each row's 40 bytes only */
    for (int m = 0; m < ROWS; m++) {
        for (int n = 0; n < BC_BYTES / 4; n++) {
            uint32_t acc = (uint32_t) c0[m][n];
            for (int k = 0; k < A_BYTES / 4; k++) {
                for (int i = 0; i < 4; i++) {
                    acc += (uint32_t) (byte_value(a[m][4 * k + i], a_signed) * byte_value(b[k][4 * n + i], b_signed));
                }
            }
            expected[m][n] = (int32_t) acc;
        }
    }
    const int ok = memcmp(c, expected, sizeof(c)) == 0;
    printf("%s %s\n", name, ok ? "ok" : "WRONG");
    return ok;
}

/* C (from c0, at c0 + 8 bytes: a displacement) += A . B by one instruction, stored to c; the operands' addresses
 * and the stride in r8-r11, r12, r13. */
#define PRODUCT(instruction)                                                                                       \
    do {                                                                                                          \
        register const void *pa __asm__("r8") = a, *pb __asm__("r9") = b;                                          \
        register const void *pc0 __asm__("r10") = (const void *) ((uintptr_t) c0 - 8);                             \
        register void *pc __asm__("r11") = c;                                                                      \
        register int64_t stride __asm__("r13") = STRIDE;                                                           \
        memset(c, 0, sizeof(c));                                                                                   \
        __asm__ volatile("ldtilecfg %5\n\t"                                                                    \
                         "tileloadd 8(%%r10,%%r13,1), %%tmm0\n\t"                                                  \
                         "tileloadd (%%r8,%%r13,1), %%tmm6\n\t"                                                    \
                         "tileloadd (%%r9,%%r13,1), %%tmm4\n\t" instruction " %%tmm4, %%tmm6, %%tmm0\n\t"          \
                         "tilestored %%tmm0, (%%r11,%%r13,1)\n\t"                                                  \
                         "tilerelease" ::"r"(pa), "r"(pb), "r"(pc0), "r"(pc), "r"(stride), "m"(config) : "memory");  \
    } while (0)

int main(void) {
    const int requested = syscall(SYS_arch_prctl, 0x1023, 18) == 0;  /* as quant-gemm-amx asks, before any tile */
    srand(7);
    for (int r = 0; r < ROWS; r++) {
        for (int i = 0; i < STRIDE; i++) {
            a[r][i] = (uint8_t) rand();
            b[r][i] = (uint8_t) rand();
        }
        for (int i = 0; i < STRIDE / 4; i++) {
            c0[r][i] = rand() - RAND_MAX / 2;
        }
    }
    int ok = 1;
    PRODUCT("tdpbusd");
    ok &= check("tdpbusd", 0, 1);
    PRODUCT("tdpbssd");
    ok &= check("tdpbssd", 1, 1);
    PRODUCT("tdpbsud");
    ok &= check("tdpbsud", 1, 0);
    PRODUCT("tdpbuud");
    ok &= check("tdpbuud", 0, 0);

    /* TILEZERO, then a store of all 16 rows of 64 bytes of tmm1 */
    uint8_t zero[16][64];
    memset(zero, 0xff, sizeof(zero));
    __asm__ volatile("ldtilecfg %2\n\ttilezero %%tmm1\n\ttilestored %%tmm1, (%0,%1,1)\n\ttilerelease"
                     ::"r"(zero), "r"((int64_t) 64), "m"(config) : "memory");
    int zeroed = 1;
    for (size_t i = 0; i < sizeof(zero); i++) {
        zeroed &= ((uint8_t *) zero)[i] == 0;
    }
    printf("tilezero %s\n", zeroed ? "ok" : "WRONG");
    ok &= zeroed;

    unsigned long long features = 0;
    const int granted = requested && syscall(SYS_arch_prctl, 0x1022, &features) == 0 && (features >> 18 & 1);
    printf("granted %s\n", granted ? "ok" : "WRONG");
    return ok && granted ? 0 : 1;
}
