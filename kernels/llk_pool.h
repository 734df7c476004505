/* llk_pool.h — the pool's internal job interface, shared by llk_pool.c and llk_ops.c. */
#ifndef LLK_POOL_H
#define LLK_POOL_H
#include <stdint.h>
#include "llk.h"

/* A job body: items [begin, end) on thread ith (0 = the caller). */
typedef void (*llk_job_fn)(void *arg, int64_t begin, int64_t end, int ith);

/* Run fn over n_items in chunks across the pool (pool may be NULL: the caller does it all).
 * Returns LLK_ERR_ABORTED if the abort flag was set before or during the job. */
llk_status llk_pool_run(llk_pool *pool, int64_t n_items, int64_t chunk, llk_job_fn fn, void *arg);
#endif
