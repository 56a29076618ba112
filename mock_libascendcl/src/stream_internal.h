/*
 * stream_internal.h - private glue between stream.c, event.c and callback.c
 * (the streams subsystem). Other subsystems use only mock_internal.h.
 */
#ifndef MOCK_STREAM_INTERNAL_H
#define MOCK_STREAM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "mock_internal.h"

/* ---------------------------------------------------------------- time */

static inline uint64_t mock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Absolute CLOCK_MONOTONIC deadline `ms` milliseconds from now. */
static inline struct timespec mock_deadline_ms(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)((ms % 1000) * 1000000);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += 1;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Every condition variable of the subsystem uses CLOCK_MONOTONIC. */
MOCK_HIDDEN void mock_cond_init(pthread_cond_t *cv);

/* Waits on cv (mu held) until signalled, `deadline` (NULL = none) passes, or -
 * when called on a stream worker thread - the worker's stream is aborted
 * (destroy-force / aclrtStreamAbort). Returns 0 (recheck your predicate),
 * ETIMEDOUT or ECANCELED. Used by tasks that block a stream. */
MOCK_HIDDEN int mock_task_wait(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline);

/* ------------------------------------------------------------ registry */

/* Hash set of live handle pointers (open addressing). Not locked: the owner
 * guards it with its own mutex. Lookups compare pointer values only, so any
 * garbage pointer can be checked safely. */
typedef struct mock_registry {
    void **slots;
    size_t cap, used, live;
} mock_registry;
#define MOCK_REG_TOMB ((void *)(uintptr_t)1)
MOCK_HIDDEN void *mock_registry_find(const mock_registry *r, const void *p);
MOCK_HIDDEN bool mock_registry_insert(mock_registry *r, void *p);
MOCK_HIDDEN bool mock_registry_erase(mock_registry *r, const void *p);

/* ------------------------------------------------------------- streams */

/* Resolve with a reference held (release with mock_stream_put). `submit`:
 * the call enqueues work, which needs a current context on the stream's
 * device (107002 / 107003); otherwise any thread may use the handle. */
MOCK_HIDDEN aclError mock_stream_get(const char *func, aclrtStream handle, bool submit, mock_stream **out);
MOCK_HIDDEN void mock_stream_ref(mock_stream *s);
MOCK_HIDDEN void mock_stream_put(mock_stream *s);
MOCK_HIDDEN int32_t mock_stream_id(const mock_stream *s);
/* The stream whose worker is the calling thread, or NULL. */
MOCK_HIDDEN mock_stream *mock_stream_self(void);

/* ----------------------------------------------------------- callback.c */

/* Drops every report/host-func subscription of a stream being destroyed and
 * cancels its queued callbacks (waking blocked workers). */
MOCK_HIDDEN void mock_callbacks_stream_gone(mock_stream *s);
/* True if the calling thread processes reports or host funcs of stream s. */
MOCK_HIDDEN bool mock_callbacks_served_by_caller(const mock_stream *s);

#endif /* MOCK_STREAM_INTERNAL_H */
