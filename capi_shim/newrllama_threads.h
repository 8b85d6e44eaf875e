/* The C11 <threads.h> pieces the shim uses, over pthreads: macOS's libc has no <threads.h> (nor has
 * glibc before 2.28), and pthreads are on every platform the shim builds on. */
#ifndef NEWRLLAMA_THREADS_H
#define NEWRLLAMA_THREADS_H

#include <pthread.h>

typedef pthread_mutex_t mtx_t;
typedef pthread_once_t once_flag;
enum { mtx_plain = 0 };
enum { thrd_success = 0, thrd_error = 2 };
#define ONCE_FLAG_INIT PTHREAD_ONCE_INIT

static inline int mtx_init(mtx_t *m, int type) {
    (void)type; /* only mtx_plain, pthreads' default mutex */
    return pthread_mutex_init(m, NULL) == 0 ? thrd_success : thrd_error;
}
static inline int mtx_lock(mtx_t *m) { return pthread_mutex_lock(m) == 0 ? thrd_success : thrd_error; }
static inline int mtx_unlock(mtx_t *m) { return pthread_mutex_unlock(m) == 0 ? thrd_success : thrd_error; }
static inline void mtx_destroy(mtx_t *m) { pthread_mutex_destroy(m); }
static inline void call_once(once_flag *flag, void (*func)(void)) { pthread_once(flag, func); }

#endif
