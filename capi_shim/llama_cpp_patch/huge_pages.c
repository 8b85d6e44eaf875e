// newrllama's patch of ggml's aligned allocation (capi_shim/llama_cpp_patch/apply.py puts it in ggml/src/ggml.c,
// before ggml_aligned_malloc): on Linux, a buffer of a huge page or more is aligned to one and marked for
// transparent huge pages. Such buffers are the model's weights when it is loaded without mmap (newrllama's
// default), the KV cache and the compute buffers. Generating a token reads every weight once, a gigabyte or more:
// on 4 KiB pages that walk misses the TLB every 4 KiB. Linux's usual THP setting ("madvise") gives huge pages only
// to memory marked this way; where THP is off, the mark does nothing, and the bits are the same either way.
#if defined(__linux__)
#include <sys/mman.h>

const char newrllama_llama_cpp_patch_huge_pages[] = "newrllama-llama-cpp-patch: huge-pages";

enum { GGML_HUGE_PAGE = 2 * 1024 * 1024 };

static int ggml_posix_memalign_huge_pages(void ** memory, size_t alignment, size_t size) {
    if (size < GGML_HUGE_PAGE) {
        return posix_memalign(memory, alignment, size);
    }
    const int result = posix_memalign(memory, GGML_HUGE_PAGE, size);
    if (result == 0) {
        (void) madvise(*memory, size, MADV_HUGEPAGE);  // a hint: where it is refused, the pages stay small
    }
    return result;
}
#endif

