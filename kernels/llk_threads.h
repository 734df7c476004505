/* llk_threads.h — the small threads shim: once, mutex, condition variable, thread start/join,
 * a CPU pause hint, a monotonic clock. POSIX threads everywhere but Windows, Win32 there.
 * Atomics come from C11 <stdatomic.h> (MSVC: /experimental:c11atomics, VS 2022 17.5+).
 */
#ifndef LLK_THREADS_H
#define LLK_THREADS_H

#include <stdint.h>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
typedef INIT_ONCE llk_once_flag;
#define LLK_ONCE_INIT INIT_ONCE_STATIC_INIT
typedef SRWLOCK llk_mutex;
typedef CONDITION_VARIABLE llk_cond;
typedef HANDLE llk_thread;
typedef void (*llk_once_fn)(void);
static BOOL CALLBACK llk_once_tramp(PINIT_ONCE o, PVOID p, PVOID *c) {
    (void)o; (void)c; ((llk_once_fn)p)(); return TRUE;
}
static inline void llk_call_once(llk_once_flag *f, llk_once_fn fn) {
    InitOnceExecuteOnce(f, llk_once_tramp, (PVOID)fn, NULL);
}
static inline int llk_mutex_init(llk_mutex *m) { InitializeSRWLock(m); return 0; }
static inline void llk_mutex_destroy(llk_mutex *m) { (void)m; }
static inline void llk_mutex_lock(llk_mutex *m) { AcquireSRWLockExclusive(m); }
static inline void llk_mutex_unlock(llk_mutex *m) { ReleaseSRWLockExclusive(m); }
static inline int llk_cond_init(llk_cond *c) { InitializeConditionVariable(c); return 0; }
static inline void llk_cond_destroy(llk_cond *c) { (void)c; }
static inline void llk_cond_wait(llk_cond *c, llk_mutex *m) { SleepConditionVariableSRW(c, m, INFINITE, 0); }
static inline void llk_cond_broadcast(llk_cond *c) { WakeAllConditionVariable(c); }
typedef struct { void (*fn)(void *); void *arg; } llk_thread_start;
static DWORD WINAPI llk_thread_tramp(LPVOID p) {
    llk_thread_start s = *(llk_thread_start *)p; HeapFree(GetProcessHeap(), 0, p); s.fn(s.arg); return 0;
}
static inline int llk_thread_create(llk_thread *t, void (*fn)(void *), void *arg) {
    llk_thread_start *s = (llk_thread_start *)HeapAlloc(GetProcessHeap(), 0, sizeof *s);
    if (!s) return -1;
    s->fn = fn; s->arg = arg;
    *t = CreateThread(NULL, 0, llk_thread_tramp, s, 0, NULL);
    if (!*t) { HeapFree(GetProcessHeap(), 0, s); return -1; }
    return 0;
}
static inline void llk_thread_join(llk_thread t) { WaitForSingleObject(t, INFINITE); CloseHandle(t); }
static inline void llk_yield(void) { SwitchToThread(); }
static inline uint64_t llk_now_ns(void) {
    LARGE_INTEGER f, c; QueryPerformanceFrequency(&f); QueryPerformanceCounter(&c);
    return (uint64_t)((double)c.QuadPart * 1e9 / (double)f.QuadPart);
}
#else
#include <pthread.h>
#include <stdlib.h>
#include <sched.h>
#include <time.h>
typedef pthread_once_t llk_once_flag;
#define LLK_ONCE_INIT PTHREAD_ONCE_INIT
typedef pthread_mutex_t llk_mutex;
typedef pthread_cond_t llk_cond;
typedef pthread_t llk_thread;
static inline void llk_call_once(llk_once_flag *f, void (*fn)(void)) { pthread_once(f, fn); }
static inline int llk_mutex_init(llk_mutex *m) { return pthread_mutex_init(m, NULL); }
static inline void llk_mutex_destroy(llk_mutex *m) { pthread_mutex_destroy(m); }
static inline void llk_mutex_lock(llk_mutex *m) { pthread_mutex_lock(m); }
static inline void llk_mutex_unlock(llk_mutex *m) { pthread_mutex_unlock(m); }
static inline int llk_cond_init(llk_cond *c) { return pthread_cond_init(c, NULL); }
static inline void llk_cond_destroy(llk_cond *c) { pthread_cond_destroy(c); }
static inline void llk_cond_wait(llk_cond *c, llk_mutex *m) { pthread_cond_wait(c, m); }
static inline void llk_cond_broadcast(llk_cond *c) { pthread_cond_broadcast(c); }
typedef struct { void (*fn)(void *); void *arg; } llk_thread_start;
static void *llk_thread_tramp(void *p) {
    llk_thread_start s = *(llk_thread_start *)p; free(p); s.fn(s.arg); return NULL;
}
static inline int llk_thread_create(llk_thread *t, void (*fn)(void *), void *arg) {
    llk_thread_start *s = (llk_thread_start *)malloc(sizeof *s);
    if (!s) return -1;
    s->fn = fn; s->arg = arg;
    if (pthread_create(t, NULL, llk_thread_tramp, s)) { free(s); return -1; }
    return 0;
}
static inline void llk_thread_join(llk_thread t) { pthread_join(t, NULL); }
static inline void llk_yield(void) { sched_yield(); }
static inline uint64_t llk_now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#include <immintrin.h>
static inline void llk_pause(void) { _mm_pause(); }
#elif defined(__aarch64__) && defined(__GNUC__)
static inline void llk_pause(void) { __asm__ volatile("yield"); }
#else
static inline void llk_pause(void) { }
#endif

#endif /* LLK_THREADS_H */
