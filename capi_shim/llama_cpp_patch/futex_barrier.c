// newrllama's patch of ggml's barrier (capi_shim/llama_cpp_patch/apply.py puts it in ggml/src/ggml-cpu/ggml-cpu.c,
// before ggml_barrier, and has ggml_barrier wait and release here): the threads of a decode meet at a barrier after
// every op, hundreds of times a token. Built with OpenMP, ggml met at "#pragma omp barrier", and libgomp spins there
// only while the process holds no more of its threads than it has cores. Any other thread that has run an OpenMP region
// keeps a team (the C driver called on the main thread, R's data.table, llama-cpp-python), and from then on libgomp
// spins for about a hundred looks and sleeps in the kernel at every barrier: a token of the embedded model took a
// quarter longer on 2 cores. A barrier that only spins is no answer either: where processes share the cores, a spinning
// thread keeps its core from the peer it waits for.
// So on Linux the threads meet at ggml's own counter barrier (the one it builds without OpenMP), whatever other teams
// the process holds: a waiter spins for some tens of microseconds, about as long as a decode's threads are apart at the
// end of an op while they have their cores, then sleeps on a futex, having set the passed count's top bit, so that the
// last thread in makes the wake-up call only when someone sleeps. Both the bit and the count change by sequentially
// consistent operations on one word, so the last thread either sees the bit or the sleeper sees the count move: no
// wake-up is lost. Elsewhere the counter barrier only spins, as ggml's does, and OpenMP builds keep libgomp's.
// It changes no bits, so only this comment carries the patch's marker, not the built library, and the build
// fingerprint does not name it:
// newrllama-llama-cpp-patch: futex-barrier
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

enum { GGML_BARRIER_SLEEPER = 1 << 30 };  // in n_barrier_passed: a thread sleeps until the count moves

// Where processes share the cores, a spinning waiter keeps its core from the peer it waits for: spinning for 2^13 looks
// (a fraction of a millisecond) made the test command, whose lanes decode at once on 2 cores, half as long again, and
// 2^18 (about libgomp's count in a process with one team) made it longer still. With 2^8 one prompt alone ran slower,
// its threads sleeping between ops. A test builds it with 0, so that every waiter sleeps.
#ifndef GGML_BARRIER_SPINS_BEFORE_SLEEP
#define GGML_BARRIER_SPINS_BEFORE_SLEEP (1 << 10)
#endif

static int ggml_barrier_passed(struct ggml_threadpool * tp) {
    return atomic_load_explicit(&tp->n_barrier_passed, memory_order_relaxed) & (GGML_BARRIER_SLEEPER - 1);
}

#if defined(__linux__)
// the futex is the atomic's own 32-bit word; the kernel reads it atomically
static int * ggml_barrier_futex(struct ggml_threadpool * tp) {
    return (int *) (uintptr_t) &tp->n_barrier_passed;
}
#endif

static void ggml_barrier_wait(struct ggml_threadpool * tp, int n_passed) {
#if defined(__linux__)
    for (int spins = 0; spins < GGML_BARRIER_SPINS_BEFORE_SLEEP; spins++) {
        if (ggml_barrier_passed(tp) != n_passed) {
            return;
        }
        ggml_thread_cpu_relax();
    }
    int expected = n_passed;
    atomic_compare_exchange_strong(&tp->n_barrier_passed, &expected, n_passed | GGML_BARRIER_SLEEPER);
    while (ggml_barrier_passed(tp) == n_passed) {
        // returns at once where the word is no longer "n_passed, someone sleeps"
        syscall(SYS_futex, ggml_barrier_futex(tp), FUTEX_WAIT_PRIVATE, n_passed | GGML_BARRIER_SLEEPER,
                NULL, NULL, 0);
    }
#else
    while (ggml_barrier_passed(tp) == n_passed) {
        ggml_thread_cpu_relax();
    }
#endif
}

static void ggml_barrier_release(struct ggml_threadpool * tp, int n_passed) {
    int next = (n_passed + 1) & (GGML_BARRIER_SLEEPER - 1);
    int before = atomic_exchange_explicit(&tp->n_barrier_passed, next, memory_order_seq_cst);
#if defined(__linux__)
    if (before & GGML_BARRIER_SLEEPER) {
        syscall(SYS_futex, ggml_barrier_futex(tp), FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
    }
#else
    (void) before;
#endif
}

