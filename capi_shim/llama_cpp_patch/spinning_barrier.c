// newrllama's patch of ggml's barrier (capi_shim/llama_cpp_patch/apply.py puts it in ggml/src/ggml-cpu/ggml-cpu.c,
// before ggml_barrier, and makes ggml_barrier wait here in every build): the threads of a decode meet at a barrier
// after every op, hundreds of times a token. Built with OpenMP, ggml met at "#pragma omp barrier", and libgomp
// spins there only while the process holds no more of its threads than it has cores. Any other thread that has
// run an OpenMP region keeps a team (the C driver called on the main thread, R's data.table, llama-cpp-python), and
// from then on libgomp spins only briefly and sleeps in the kernel at every barrier: a token of the embedded model
// took a quarter longer on 2 cores. ggml's own barrier, the one it builds without OpenMP, is counters that the
// threads spin on; this takes it with OpenMP too. A thread that has spun for about a millisecond yields its core
// between looks, so that a peer the scheduler took off the core gets it back. It changes no bits, so only this
// comment carries the patch's marker, not the built library, and the build fingerprint does not name it:
// newrllama-llama-cpp-patch: spinning-barrier
enum { GGML_BARRIER_SPINS_BEFORE_YIELDING = 1 << 16 };

static void ggml_barrier_wait(struct ggml_threadpool * tp, int n_passed) {
    for (int spins = 0; atomic_load_explicit(&tp->n_barrier_passed, memory_order_relaxed) == n_passed; spins++) {
        if (spins < GGML_BARRIER_SPINS_BEFORE_YIELDING) {
            ggml_thread_cpu_relax();
        } else {
            spins = GGML_BARRIER_SPINS_BEFORE_YIELDING;  // no overflow, however long the wait
            sched_yield();
        }
    }
}

