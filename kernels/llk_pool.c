/* llk_pool.c — the persistent thread pool: n-1 workers plus the calling thread.
 *
 * A job is a function over item ranges. Each thread owns a contiguous share of the items (its
 * memory streams stay sequential and its counter stays in its own cache line) and takes chunks
 * of it from its own atomic counter; a thread whose share is done takes chunks from the others'
 * counters, so uneven chunks and a descheduled thread still balance. A job ends when its chunks
 * are done, not when every worker has looked at it: a worker the OS has not run yet (another
 * process, the UI thread on the same core) costs the job nothing, the others take its share.
 * Between jobs workers spin for spin_ns, then sleep on a condition variable: an idle pool burns no
 * CPU. One thread drives a pool at a time (the engine's worker); llk_pool_abort may be called from
 * any thread.
 * Width: while the driver keeps waiting on threads the OS does not run (another process busy on
 * their cores), it narrows the pool, one thread at a time, and widens it again now and then to
 * see whether the cores came back. The results never depend on the width (every product row and
 * attention split is one thread's work, whichever thread).
 * Not here: the kernels themselves (llk_ops.c), which only see (begin, end, ith).
 */
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include "llk_internal.h"
#include "llk_threads.h"
#include "llk_pool.h"

#if defined(__linux__)
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#include <unistd.h>
#elif !defined(_WIN32)
#include <unistd.h>
#endif

#define CACHE_LINE 64
#define MAX_THREADS 512

typedef struct {
    _Alignas(CACHE_LINE) atomic_uint_fast64_t busy_ns;  /* time inside jobs */
    atomic_uint_fast64_t chunks;                         /* chunks done */
    atomic_int_fast64_t next;                            /* next item of this thread's share */
    int64_t end;                                         /* end of the share */
} thread_slot;

struct llk_pool {
    int n;                          /* threads including the caller */
    llk_thread *threads;            /* n - 1 workers */
    thread_slot *slots;             /* n, one cache line each */
    llk_mutex mu;
    llk_cond wake;
    int spin_ns;
    /* the job; written by the driver before gen is bumped */
    llk_job_fn fn;
    void *arg;
    int64_t n_items, chunk;
    _Alignas(CACHE_LINE) atomic_int gen;        /* job generation */
    atomic_int open;                            /* the generation workers may join; 0: none */
    _Alignas(CACHE_LINE) atomic_int_fast64_t chunks_left;   /* of the open job */
    _Alignas(CACHE_LINE) atomic_int active;     /* workers inside the job's state */
    _Alignas(CACHE_LINE) atomic_int abort_flag;
    atomic_int stop;
    atomic_int n_sleeping;
    atomic_int running;                         /* a job is in progress (one driver at a time) */
    atomic_uint_fast64_t jobs;
    atomic_uint_fast64_t wait_ns;               /* the driver's time waiting on others' chunks */
    atomic_uint_fast64_t stalls;                /* jobs whose driver waited more than STALL_NS */
    /* the width: threads 0 .. width-1 take part in jobs; only the driver changes it */
    atomic_int width;
    llk_cond wake_width;                        /* where threads beyond the width sleep */
    int adaptive;                               /* 0: the width stays n */
    uint64_t win_start_ns, win_wait_ns;         /* the current observation window */
    int bad_windows;                            /* windows in a row with too much waiting */
    uint64_t narrowed_ns;                       /* when the width last dropped */
};

/* WIDTH_BAD_WINDOWS windows of WIDTH_WINDOW_NS in a row, in each of which the driver spent more
 * than 1 / WIDTH_WAIT_SHARE of the time waiting on stalled threads, narrow the pool by one (one
 * hiccup of the OS is not a busy core); a narrowed pool tries one thread more after
 * WIDTH_PROBE_NS. A stall: the driver waited > STALL_NS, and longer than it worked. */
#define WIDTH_WINDOW_NS 50000000ull
#define WIDTH_BAD_WINDOWS 3
#define WIDTH_WAIT_SHARE 4
#define WIDTH_PROBE_NS 1000000000ull
#define STALL_NS 100000ull

typedef struct { llk_pool *pool; int ith; } worker_arg;

static void set_width(llk_pool *p, int w);

/* Zeroed memory on a cache-line boundary (the pool and its slots are cache-line aligned types). */
static void *calloc_lines(size_t bytes) {
    bytes = (bytes + CACHE_LINE - 1) & ~(size_t)(CACHE_LINE - 1);
#if defined(_WIN32)
    void *p = _aligned_malloc(bytes, CACHE_LINE);
#else
    void *p = NULL;
    if (posix_memalign(&p, CACHE_LINE, bytes)) p = NULL;
#endif
    if (p) memset(p, 0, bytes);
    return p;
}
static void free_lines(void *p) {
#if defined(_WIN32)
    _aligned_free(p);
#else
    free(p);
#endif
}

/* --- CPU counts ------------------------------------------------------------------------------ */

#if defined(__linux__)
/* A container's CPU quota (cgroup v2 cpu.max, or v1 cfs quota/period) as whole CPUs; 0: none. */
static int cgroup_cpu_limit(void) {
    long long quota = -1, period = 0;
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        char q[32] = {0};
        if (fscanf(f, "%31s %lld", q, &period) == 2 && strcmp(q, "max") != 0) quota = atoll(q);
        fclose(f);
    } else if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r"))) {
        if (fscanf(f, "%lld", &quota) != 1) quota = -1;
        fclose(f);
        if ((f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r"))) {
            if (fscanf(f, "%lld", &period) != 1) period = 0;
            fclose(f);
        }
    }
    if (quota <= 0 || period <= 0) return 0;
    long long cpus = (quota + period - 1) / period;
    return cpus > 0 && cpus < 65536 ? (int)cpus : 0;
}
#endif

int llk_cpu_count_allowed(void) {
#if defined(__linux__)
    int c = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) c = CPU_COUNT(&set);
    if (c <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        c = n > 0 ? (int)n : 1;
    }
    int limit = cgroup_cpu_limit();
    return limit > 0 && limit < c ? limit : c;
#elif defined(_WIN32)
    DWORD_PTR proc, sys;
    if (GetProcessAffinityMask(GetCurrentProcess(), &proc, &sys)) {
        int c = 0;
        for (; proc; proc >>= 1) c += (int)(proc & 1);
        if (c > 0) return c;
    }
    SYSTEM_INFO si; GetSystemInfo(&si);
    return si.dwNumberOfProcessors > 0 ? (int)si.dwNumberOfProcessors : 1;
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
#endif
}

#if defined(__linux__)
static int read_int_file(const char *path, int *out) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fscanf(f, "%d", out) == 1;
    fclose(f);
    return ok ? 0 : -1;
}
#endif

int llk_cpu_count_physical(void) {
    int allowed = llk_cpu_count_allowed();
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return allowed;
    int keys[1024], nk = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && nk < 1024; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        char path[128]; int core, pkg;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
        if (read_int_file(path, &core)) return allowed;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
        if (read_int_file(path, &pkg)) pkg = 0;
        int key = pkg * 65536 + core, seen = 0;
        for (int i = 0; i < nk; i++) if (keys[i] == key) { seen = 1; break; }
        if (!seen) keys[nk++] = key;
    }
    return nk > 0 && nk <= allowed ? nk : allowed;   /* a CPU quota below the core count wins */
#elif defined(__APPLE__)
    int v = 0; size_t len = sizeof v;
    if (sysctlbyname("hw.physicalcpu", &v, &len, NULL, 0) == 0 && v > 0 && v <= allowed) return v;
    return allowed;
#else
    return allowed;
#endif
}

/* --- the pool --------------------------------------------------------------------------------- */

static void run_chunks(llk_pool *p, int ith) {
    uint64_t t0 = llk_now_ns(), nch = 0;
    for (int k = 0; k < p->n; k++) {            /* its own share first, then the others' */
        thread_slot *s = &p->slots[(ith + k) % p->n];
        for (;;) {
            if (atomic_load_explicit(&p->abort_flag, memory_order_relaxed)) break;
            int64_t b = atomic_fetch_add_explicit(&s->next, p->chunk, memory_order_relaxed);
            if (b >= s->end) break;
            int64_t e = b + p->chunk < s->end ? b + p->chunk : s->end;
            p->fn(p->arg, b, e, ith);
            nch++;
        }
    }
    if (nch) atomic_fetch_sub(&p->chunks_left, (int_fast64_t)nch);
    atomic_fetch_add_explicit(&p->slots[ith].busy_ns, llk_now_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->slots[ith].chunks, nch, memory_order_relaxed);
}

static void worker_main(void *varg) {
    worker_arg wa = *(worker_arg *)varg;
    free(varg);
    llk_pool *p = wa.pool;
    int seen = 0;
    for (;;) {
        int g = atomic_load(&p->gen);
        if (g == seen && !atomic_load(&p->stop)) {
            uint64_t t0 = llk_now_ns();
            for (unsigned it = 1;; it++) {
                llk_pause();
                g = atomic_load(&p->gen);
                if (g != seen || atomic_load(&p->stop)) break;
                if ((it & 63) == 0 && llk_now_ns() - t0 > (uint64_t)p->spin_ns) break;
            }
        }
        if (g == seen && !atomic_load(&p->stop)) {
            llk_mutex_lock(&p->mu);
            atomic_fetch_add(&p->n_sleeping, 1);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
                llk_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->n_sleeping, 1);
            llk_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        if (wa.ith >= atomic_load(&p->width)) {   /* narrowed out: sleep until widened */
            llk_mutex_lock(&p->mu);
            while (wa.ith >= atomic_load(&p->width) && !atomic_load(&p->stop))
                llk_cond_wait(&p->wake_width, &p->mu);
            llk_mutex_unlock(&p->mu);
            seen = atomic_load(&p->gen);          /* jobs from now on, not the one that woke it */
            continue;
        }
        /* Join only while the job is open: the driver closes it (open = 0) before it waits for
         * active to drop to 0 and reuses the state, so a late worker either is counted in active
         * or sees the job closed (sequentially consistent: one of the two orders holds). */
        atomic_fetch_add(&p->active, 1);
        if (atomic_load(&p->open) == g) run_chunks(p, wa.ith);
        atomic_fetch_sub(&p->active, 1);
    }
}

static void wake_all(llk_pool *p) {
    if (atomic_load(&p->n_sleeping) > 0) {
        llk_mutex_lock(&p->mu);
        llk_cond_broadcast(&p->wake);
        llk_mutex_unlock(&p->mu);
    }
}

llk_status llk_pool_new(int n_threads, llk_pool **out) {
    if (!out) return LLK_ERR_ARG;
    *out = NULL;
    int allowed = llk_cpu_count_allowed();
    int n = n_threads > 0 ? n_threads : llk_cpu_count_physical();
    if (n > allowed) n = allowed;
    if (n > MAX_THREADS) n = MAX_THREADS;
    if (n < 1) n = 1;
    llk_pool *p = (llk_pool *)calloc_lines(sizeof *p);
    if (!p) return LLK_ERR_NOMEM;
    p->n = n;
    p->spin_ns = 200000;
    atomic_store(&p->width, n);
    p->adaptive = 1;
    p->slots = (thread_slot *)calloc_lines((size_t)n * sizeof(thread_slot));
    p->threads = (llk_thread *)calloc((size_t)n, sizeof(llk_thread));
    if (!p->slots || !p->threads) { free_lines(p->slots); free(p->threads); free_lines(p); return LLK_ERR_NOMEM; }
    if (llk_mutex_init(&p->mu)) { free_lines(p->slots); free(p->threads); free_lines(p); return LLK_ERR_THREAD; }
    if (llk_cond_init(&p->wake)) {
        llk_mutex_destroy(&p->mu); free_lines(p->slots); free(p->threads); free_lines(p); return LLK_ERR_THREAD;
    }
    if (llk_cond_init(&p->wake_width)) {
        llk_cond_destroy(&p->wake); llk_mutex_destroy(&p->mu);
        free_lines(p->slots); free(p->threads); free_lines(p); return LLK_ERR_THREAD;
    }
    for (int i = 1; i < n; i++) {
        worker_arg *wa = (worker_arg *)malloc(sizeof *wa);
        if (!wa || llk_thread_create(&p->threads[i], worker_main, wa ? (wa->pool = p, wa->ith = i, wa) : NULL)) {
            free(wa);
            p->n = i;           /* only threads 1..i-1 exist: stop those */
            llk_pool_free(p);
            return LLK_ERR_THREAD;
        }
    }
    *out = p;
    return LLK_OK;
}

void llk_pool_free(llk_pool *p) {
    if (!p) return;
    llk_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    llk_cond_broadcast(&p->wake);
    llk_cond_broadcast(&p->wake_width);
    llk_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) llk_thread_join(p->threads[i]);
    llk_cond_destroy(&p->wake_width);
    llk_cond_destroy(&p->wake);
    llk_mutex_destroy(&p->mu);
    free(p->threads);
    free_lines(p->slots);
    free_lines(p);
}

int llk_pool_size(const llk_pool *p) { return p ? p->n : 0; }
void llk_pool_abort(llk_pool *p) { if (p) atomic_store(&p->abort_flag, 1); }
void llk_pool_clear_abort(llk_pool *p) { if (p) atomic_store(&p->abort_flag, 0); }
int llk_pool_aborted(const llk_pool *p) {
    return p ? atomic_load(&((llk_pool *)p)->abort_flag) : 0;
}
uint64_t llk_pool_busy_ns(const llk_pool *p, int ith) {
    if (!p || ith < 0 || ith >= p->n) return 0;
    return atomic_load(&((llk_pool *)p)->slots[ith].busy_ns);
}
uint64_t llk_pool_chunks(const llk_pool *p, int ith) {
    if (!p || ith < 0 || ith >= p->n) return 0;
    return atomic_load(&((llk_pool *)p)->slots[ith].chunks);
}
uint64_t llk_pool_jobs(const llk_pool *p) { return p ? atomic_load(&((llk_pool *)p)->jobs) : 0; }
uint64_t llk_pool_wait_ns(const llk_pool *p) { return p ? atomic_load(&((llk_pool *)p)->wait_ns) : 0; }
uint64_t llk_pool_stalls(const llk_pool *p) { return p ? atomic_load(&((llk_pool *)p)->stalls) : 0; }
int llk_pool_width(const llk_pool *p) { return p ? atomic_load(&((llk_pool *)p)->width) : 0; }
void llk_pool_set_adaptive(llk_pool *p, int on) {
    if (!p) return;
    p->adaptive = on ? 1 : 0;
    if (!on && atomic_load(&p->width) != p->n) set_width(p, p->n);
}
void llk_pool_set_spin(llk_pool *p, int spin_us) {
    if (p) p->spin_ns = spin_us < 0 ? 0 : (spin_us > 1000000 ? 1000000000 : spin_us * 1000);
}

static void set_width(llk_pool *p, int w) {
    llk_mutex_lock(&p->mu);
    atomic_store(&p->width, w);
    llk_cond_broadcast(&p->wake_width);
    llk_mutex_unlock(&p->mu);
}

/* After a job of the width w: t0 start, t1 the driver's own chunks done, t2 all done. */
static void adapt_width(llk_pool *p, int w, uint64_t t0, uint64_t t1, uint64_t t2) {
    if (!p->adaptive) return;
    if (w < p->n && t2 - p->narrowed_ns > WIDTH_PROBE_NS) {   /* have the cores come back? */
        set_width(p, w + 1);
        p->narrowed_ns = t2;
        p->win_start_ns = t2; p->win_wait_ns = 0; p->bad_windows = 0;
        return;
    }
    if (t2 - t1 > STALL_NS && t2 - t1 > t1 - t0) p->win_wait_ns += t2 - t1;
    if (t2 - p->win_start_ns < WIDTH_WINDOW_NS) return;
    if (w > 1 && p->win_wait_ns * WIDTH_WAIT_SHARE > t2 - p->win_start_ns) {
        if (++p->bad_windows >= WIDTH_BAD_WINDOWS) {
            set_width(p, w - 1);
            p->narrowed_ns = t2;
            p->bad_windows = 0;
        }
    } else {
        p->bad_windows = 0;
    }
    p->win_start_ns = t2; p->win_wait_ns = 0;
}

static llk_status run_locked(llk_pool *p, int64_t n_items, int64_t chunk, llk_job_fn fn, void *arg) {
    if (atomic_load(&p->abort_flag)) return LLK_ERR_ABORTED;
    if (n_items == 0) return LLK_OK;
    atomic_fetch_add_explicit(&p->jobs, 1, memory_order_relaxed);
    p->fn = fn; p->arg = arg; p->n_items = n_items; p->chunk = chunk;
    /* shares in whole chunks over the width, as even as they go; published by the gen bump below */
    const int w = atomic_load(&p->width);
    int64_t n_chunks = (n_items + chunk - 1) / chunk;
    for (int i = 0; i < p->n; i++) {
        int64_t b = i < w ? n_chunks * i / w * chunk : 0, e = i < w ? n_chunks * (i + 1) / w * chunk : 0;
        atomic_store_explicit(&p->slots[i].next, b, memory_order_relaxed);
        p->slots[i].end = e < n_items ? e : n_items;
    }
    const uint64_t t0 = llk_now_ns();
    if (w == 1 || n_chunks == 1) {   /* one chunk or one thread: the caller, no one is woken */
        run_chunks(p, 0);
        if (w == 1) adapt_width(p, w, t0, t0, t0);
        return atomic_load(&p->abort_flag) ? LLK_ERR_ABORTED : LLK_OK;
    }
    atomic_store(&p->chunks_left, n_chunks);
    const int g = atomic_load(&p->gen) + 1;
    atomic_store(&p->open, g);
    atomic_store(&p->gen, g);         /* publishes the job (seq_cst) */
    wake_all(p);
    run_chunks(p, 0);
    const uint64_t t1 = llk_now_ns();
    /* wait for the chunks others have taken (an aborted job leaves some untaken) ... */
    for (unsigned it = 1; atomic_load(&p->chunks_left) > 0 && !atomic_load(&p->abort_flag); it++) {
        llk_pause();
        if ((it & 1023) == 0) llk_yield();
    }
    const uint64_t t2 = llk_now_ns();
    atomic_fetch_add_explicit(&p->wait_ns, t2 - t1, memory_order_relaxed);
    if (t2 - t1 > STALL_NS) atomic_fetch_add_explicit(&p->stalls, 1, memory_order_relaxed);
    /* ... then close it, and wait for any worker still inside its state */
    atomic_store(&p->open, 0);
    for (unsigned it = 1; atomic_load(&p->active) > 0; it++) {
        llk_pause();
        if ((it & 1023) == 0) llk_yield();
    }
    adapt_width(p, w, t0, t1, t2);
    return atomic_load(&p->abort_flag) ? LLK_ERR_ABORTED : LLK_OK;
}

llk_status llk_pool_run(llk_pool *p, int64_t n_items, int64_t chunk, llk_job_fn fn, void *arg) {
    if (!fn || n_items < 0) return LLK_ERR_ARG;
    if (chunk < 1) chunk = 1;
    if (!p) { /* no pool: run on the caller */
        for (int64_t b = 0; b < n_items; b += chunk) fn(arg, b, b + chunk < n_items ? b + chunk : n_items, 0);
        return LLK_OK;
    }
    int idle = 0;
    if (!atomic_compare_exchange_strong(&p->running, &idle, 1)) return LLK_ERR_BUSY;
    llk_status st = run_locked(p, n_items, chunk, fn, arg);
    atomic_store(&p->running, 0);
    return st;
}

/* --- a job for the tests: proves each item runs once, lets a job be long or short ------------ */

typedef struct { int64_t work; int32_t *counts; } test_job;

static void test_job_fn(void *varg, int64_t b, int64_t e, int ith) {
    (void)ith;
    test_job *j = (test_job *)varg;
    for (int64_t i = b; i < e; i++) {
        volatile float x = 1.0f;
        for (int64_t w = 0; w < j->work; w++) x = x * 0.999999f + 1e-7f;
        if (j->counts) atomic_fetch_add_explicit((_Atomic int32_t *)&j->counts[i], 1, memory_order_relaxed);
    }
}

/* A job for the width tests: items on threads other than the caller take stall_us each, as if
 * the OS had stopped those threads; the caller's take a sixth of that (long enough for a spinning
 * worker to claim its share first, so that the caller does wait on it). */
typedef struct { uint64_t stall_ns; int32_t *counts; } stall_job;

static void stall_job_fn(void *varg, int64_t b, int64_t e, int ith) {
    const stall_job *j = (const stall_job *)varg;
    for (int64_t i = b; i < e; i++) {
        const uint64_t ns = ith > 0 ? j->stall_ns : j->stall_ns / 6;
        for (uint64_t t0 = llk_now_ns(); llk_now_ns() - t0 < ns;) llk_pause();
        if (j->counts) atomic_fetch_add_explicit((_Atomic int32_t *)&j->counts[i], 1, memory_order_relaxed);
    }
}

llk_status llk_pool_test_stall_job(llk_pool *pool, int64_t n_items, int stall_us, int32_t *counts) {
    stall_job j = {(uint64_t)(stall_us > 0 ? stall_us : 0) * 1000u, counts};
    return llk_pool_run(pool, n_items, 1, stall_job_fn, &j);
}

llk_status llk_pool_test_job(llk_pool *pool, int64_t n_items, int64_t chunk, int64_t work,
                             int32_t *counts) {
    test_job j = {work, counts};
    return llk_pool_run(pool, n_items, chunk, test_job_fn, &j);
}

double llk_now_seconds(void) { return (double)llk_now_ns() * 1e-9; }
