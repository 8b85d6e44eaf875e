/* Included before every C file of ggml-cpu in scripts/check_kernels_emulated.py's build (-include): <cpuid.h>'s
 * __get_cpuid_count, which quant-gemm-amx asks whether the CPU has AMX, answers from amx_on_sigill.c, whose CPU
 * has it. */
#include <cpuid.h>

int newrllama_cpuid_with_amx(unsigned leaf, unsigned subleaf, unsigned *a, unsigned *b, unsigned *c, unsigned *d);
#define __get_cpuid_count(leaf, subleaf, a, b, c, d) newrllama_cpuid_with_amx(leaf, subleaf, a, b, c, d)
