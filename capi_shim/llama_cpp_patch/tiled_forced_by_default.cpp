// newrllama's patch of ggml's tiled matmul switch (capi_shim/llama_cpp_patch/apply.py puts it in
// ggml/src/ggml-cpu/tiled/tiled.cpp, before ggml_tiled_matmul_forced). ggml takes its tiled kernel for 8 rows and
// more and vec_dot below; the two round differently, so for the weight types newrllama's own kernels do not take
// (Q2_K, Q3_K, the IQ types, and the K-quants where the CPU lacks AVX2) a token's numbers would depend on how many
// tokens shared its step. Taking the tiled kernel for every row count holds batch invariance, slowly (one row is
// padded to sixteen). ggml does that only when GGML_CPU_TILED_MM_FORCE=1 is in the environment; newrllama used to
// set it there, where every child process inherited it (llama.cpp's own tools ran 4x slower). This build takes
// it by default instead, and the variable still decides when it is set: GGML_CPU_TILED_MM_FORCE=0 turns it off.
extern "C" const char newrllama_llama_cpp_patch_tiled_forced[] = "newrllama-llama-cpp-patch: tiled-forced-by-default";

