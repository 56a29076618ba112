/*
 * mock_internal.h - contracts between the subsystems of mock_libascendcl.
 *
 * Every source file in src/ includes this header. Nothing declared here is
 * exported from the shared library: the build uses -fvisibility=hidden and only
 * functions declared in the public headers (ACL_FUNC_VISIBILITY / ACLMOCK_API)
 * are visible.
 *
 * Rule for every public entry point (see DESIGN):
 *   validate arguments -> MOCK_ENTER (fault injection, device lost) -> act ->
 *   on failure return mock_error(...) which sets the thread's last error and
 *   recent message.
 * Shared state is guarded by the narrowest lock that works; no lock is held
 * while a stream worker runs a task.
 */
#ifndef MOCK_INTERNAL_H
#define MOCK_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_registry.h" /* the handle registry (header-only, see there) */

#define MOCK_HIDDEN __attribute__((visibility("hidden")))
#define MOCK_MAX_DEVICES 64

/* ------------------------------------------------------- shared helpers */
/* Small pieces every subsystem uses, kept here so that no subsystem includes
 * another one's private header. */

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

/* `timeout_ms` < 0 means "no deadline": returns NULL; otherwise fills *buf
 * with the deadline and returns buf. For mock_cond_wait_until/mock_task_wait. */
static inline const struct timespec *mock_deadline_opt(int64_t timeout_ms, struct timespec *buf)
{
    if (timeout_ms < 0) {
        return NULL;
    }
    *buf = mock_deadline_ms(timeout_ms);
    return buf;
}

/* Every condition variable of the mock uses CLOCK_MONOTONIC (deadlines above). */
static inline void mock_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
}

/* One wait on cv (mu held) until signalled or `deadline` (NULL = none) passes.
 * Returns 0 (recheck your predicate) or ETIMEDOUT. Use in a loop:
 *     while (!ready) if (mock_cond_wait_until(cv, mu, dl) == ETIMEDOUT && !ready) -> timeout */
static inline int mock_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline)
{
    if (deadline == NULL) {
        pthread_cond_wait(cv, mu);
        return 0;
    }
    return pthread_cond_timedwait(cv, mu, deadline) == ETIMEDOUT ? ETIMEDOUT : 0;
}

/* ------------------------------------------------------------------ config.c */

/* Parsed once (pthread_once) from ASCEND_MOCK_* and ASCEND_RT_VISIBLE_DEVICES.
 * Bad values print one clear line on stderr and fall back to the default. */
typedef struct mock_config {
    uint32_t physical_count;             /* ASCEND_MOCK_DEVICE_COUNT, default 8 */
    uint32_t visible_count;              /* after ASCEND_RT_VISIBLE_DEVICES remap */
    int32_t visible_map[MOCK_MAX_DEVICES]; /* user (logical) id -> physical id */
    bool visible_invalid;                /* malformed list: count -> 207004 */
    uint64_t mem_per_device;             /* bytes, ASCEND_MOCK_MEM_PER_DEVICE, default 64 GiB */
    char soc_name[64];                   /* ASCEND_MOCK_SOC_NAME, default "Ascend910B1" */
    char cann_version[128];              /* ASCEND_MOCK_CANN_VERSION, default below */
    bool isolation;                      /* ASCEND_MOCK_ISOLATION=1 */
    bool leak_report;                    /* ASCEND_MOCK_LEAK_REPORT=1: print at aclFinalize */
} mock_config;

MOCK_HIDDEN const mock_config *mock_config_get(void);

/* ------------------------------------------------------------------- error.c */

/* Record a failure of `func`: sets the calling thread's last error (for
 * aclrtGetLastError/PeekAtLastError) and recent message (aclGetRecentErrMsg,
 * formatted as "<func>: <message>" naming the bad argument), returns `code`. */
MOCK_HIDDEN aclError mock_error(const char *func, aclError code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fault injection: returns 0, or the injected code (already recorded with
 * mock_error) when the Nth call of `func` was told to fail. Cheap when no
 * fault is configured (one relaxed atomic load). */
MOCK_HIDDEN aclError mock_fault_check(const char *func);

#define MOCK_ENTER(func)                                 \
    do {                                                 \
        aclError mock_enter_rc_ = mock_fault_check(func); \
        if (mock_enter_rc_ != ACL_SUCCESS) {             \
            return mock_enter_rc_;                       \
        }                                                \
    } while (0)

/* Argument validation shared by every entry point: a NULL pointer argument is
 * ACL_ERROR_INVALID_PARAM (100000) with the message "argument '<name>' is NULL". */
#define MOCK_REQUIRE_NONNULL(func, arg)                                                      \
    do {                                                                                 \
        if ((arg) == NULL) {                                                             \
            return mock_error((func), ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", #arg); \
        }                                                                                \
    } while (0)

/* The `timeout` argument of aclrtSynchronize{Stream,Event,Device}WithTimeout and
 * aclrtStreamWaitEventWithTimeout (RT impl stream.cpp/event.cpp, acl_abi.md §5.4):
 * -1 = forever, > 0 = milliseconds; 0 is not rejected by the reference and the
 * runtime treats it like -1 (its internal "no timeout"); < -1 is
 * ACL_ERROR_RT_PARAM_INVALID (recorded under `func`). On success *ms is -1
 * (forever) or the milliseconds. */
static inline aclError mock_check_timeout(const char *func, int32_t timeout, int32_t *ms)
{
    if (timeout < -1) {
        return mock_error(func, ACL_ERROR_RT_PARAM_INVALID, "argument 'timeout' is %d (must be -1 or >= 0)",
                          timeout);
    }
    *ms = timeout <= 0 ? -1 : timeout;
    return ACL_SUCCESS;
}

/* Shared front of aclrtSynchronize{Device,Stream,Event}[WithTimeout] (stream.c): checks
 * `timeout` with mock_check_timeout (the variants without a timeout pass -1), runs the
 * fault hook of `fn`, then returns sync(fn, handle, ms) (ms -1 = forever). */
typedef aclError (*mock_sync_fn)(const char *fn, void *handle, int64_t timeout_ms);
MOCK_HIDDEN aclError mock_sync_with_timeout(const char *fn, void *handle, int32_t timeout, mock_sync_fn sync);

/* ------------------------------------------------------------------- init.c */

MOCK_HIDDEN bool mock_is_initialized(void);

/* ------------------------------------------------------- device.c context.c */

typedef struct mock_context mock_context;
typedef struct mock_stream mock_stream;
typedef struct mock_event mock_event;

/* Validates a user (logical) device id against the visible count and the
 * device-lost state. Records and returns the error (107001 bad id, sticky
 * 507xxx for a lost device). */
MOCK_HIDDEN aclError mock_device_check(const char *func, int32_t device);
/* 0 or the sticky code set by aclmockSetDeviceLost. */
MOCK_HIDDEN aclError mock_device_lost_code(int32_t device);
/* (core, additive; peer.c) True when `op` is an aclrtAtomicOperation value. */
MOCK_HIDDEN bool mock_atomic_op_valid(int op);

/* The calling thread's current context or NULL. */
MOCK_HIDDEN mock_context *mock_ctx_current(void);
/* Current context, or records and returns ACL_ERROR_RT_CONTEXT_NULL (107002);
 * also fails with the sticky code when its device is lost. */
MOCK_HIDDEN aclError mock_ctx_require(const char *func, mock_context **out);
MOCK_HIDDEN int32_t mock_ctx_device(const mock_context *ctx);
MOCK_HIDDEN mock_stream *mock_ctx_default_stream(mock_context *ctx);
/* (core, additive) ACL_STOP_ON_FAILURE "applies to all streams of that
 * context" (acl_abi.md §5.4): set by aclrtSetStreamFailureMode on any stream
 * of ctx, read by every stream of ctx. */
MOCK_HIDDEN void mock_ctx_set_stop_on_failure(mock_context *ctx);
MOCK_HIDDEN bool mock_ctx_stop_on_failure(const mock_context *ctx);

/* ------------------------------------------------------------------- stats */
/* Live-object counters per device (device -1 = host-side objects), read by the
 * aclmock* introspection API and the leak report. Implemented in device.c. */
typedef enum mock_stat {
    MOCK_STAT_CONTEXTS = 0,
    MOCK_STAT_STREAMS,
    MOCK_STAT_EVENTS,
    MOCK_STAT_ALLOCATIONS,
    MOCK_STAT_BYTES,
    MOCK_STAT_HOST_ALLOCATIONS,
    MOCK_STAT_HOST_BYTES,
    MOCK_STAT_COUNT
} mock_stat;
MOCK_HIDDEN void mock_stat_add(int32_t device, mock_stat which, int64_t delta);
MOCK_HIDDEN int64_t mock_stat_get(int32_t device, mock_stat which);

/* ------------------------------------------------------------------ stream.c */

/* A task runs on the stream's worker thread in FIFO order. A nonzero return
 * puts the stream into its error state (reported by the next synchronize /
 * query; with ACL_STOP_ON_FAILURE later tasks are discarded). `free_arg` (may
 * be NULL) is called exactly once, after the task ran or was discarded. */
typedef aclError (*mock_task_fn)(void *arg);

/* Resolve a user handle; NULL means the default stream of the calling thread's
 * current context (107002 without one). Records and returns the error. */
MOCK_HIDDEN aclError mock_stream_resolve(const char *func, aclrtStream handle, mock_stream **out);
MOCK_HIDDEN int32_t mock_stream_device(const mock_stream *s);
MOCK_HIDDEN aclError mock_stream_enqueue(mock_stream *s, mock_task_fn fn, void *arg,
                                         void (*free_arg)(void *arg));
/* Creates the default stream of a new context; destroys it (waiting for its
 * work) when the context goes away. */
MOCK_HIDDEN mock_stream *mock_stream_create_default(mock_context *ctx);
MOCK_HIDDEN void mock_stream_destroy_default(mock_stream *s);
/* Waits for every stream of `ctx` (device synchronize). timeout_ms -1 = forever. */
MOCK_HIDDEN aclError mock_streams_sync_context(mock_context *ctx, int32_t timeout_ms);
/* Destroys (after draining) every stream still alive on `ctx`. */
MOCK_HIDDEN void mock_streams_destroy_context(mock_context *ctx);
/* (streams, additive) mock_stream_enqueue calls free_arg exactly once in all
 * cases: also when the enqueue itself fails (the task is then discarded), so
 * callers must not free `arg` themselves after a failed enqueue. */
/* The per-stream overflow switch, shared by aclrtSet/GetStreamOverflowSwitch
 * (overflow.c) and ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK (stream.c). */
MOCK_HIDDEN uint32_t mock_stream_get_overflow_switch(const mock_stream *s);
MOCK_HIDDEN void mock_stream_set_overflow_switch(mock_stream *s, uint32_t on);
/* True when called from a stream worker whose stream is being aborted
 * (aclrtDestroyStreamForce, aclrtStreamAbort/Stop): a task that blocks for a
 * long time (aclrtValueWait) should poll this every few ms and return. */
MOCK_HIDDEN bool mock_stream_task_cancelled(void);
/* (streams, additive) aclrtStreamAbort on every stream of `ctx` (default one
 * included): discards the tasks not started yet, interrupts waiting tasks
 * (event waits, value waits), clears stream errors; streams stay usable.
 * For aclrtDeviceTaskAbort. Must not be called from a stream worker. */
MOCK_HIDDEN void mock_streams_abort_context(mock_context *ctx);
/* (shared helpers) For tasks that block a stream: like mock_cond_wait_until,
 * but when called on a stream worker thread it also returns ECANCELED as soon
 * as the worker's stream is aborted (destroy-force / aclrtStreamAbort). */
MOCK_HIDDEN int mock_task_wait(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline);
/* The stream whose worker is the calling thread, or NULL. */
MOCK_HIDDEN mock_stream *mock_stream_self(void);
/* (streams, additive) True for an ACL_STREAM_PERSISTENT stream: what is
 * enqueued on it is captured, never run (its free_arg runs when the stream is
 * destroyed), so a caller must not wait for such a task to complete. */
MOCK_HIDDEN bool mock_stream_is_persistent(const mock_stream *s);
/* (streams, additive) True when the calling thread is the worker of a stream of
 * `ctx` / of a stream on `device`: a call made from a task (host function,
 * callback run on the worker) that would tear down or wait for those streams
 * would wait for itself, so the entry points refuse it (107000) instead of
 * deadlocking. */
MOCK_HIDDEN bool mock_stream_self_in_context(const mock_context *ctx);
MOCK_HIDDEN bool mock_stream_self_on_device(int32_t device);

/* ------------------------------------------------------------------ memory.c */

typedef enum mock_mem_kind {
    MOCK_MEM_UNKNOWN = 0,   /* not ours: plain host memory (malloc, stack, numpy) */
    MOCK_MEM_DEVICE = 1,    /* aclrtMalloc* on device `device` */
    MOCK_MEM_HOST_PINNED = 2 /* aclrtMallocHost* */
} mock_mem_kind;

typedef struct mock_mem_info {
    mock_mem_kind kind;
    int32_t device;   /* for MOCK_MEM_DEVICE */
    uintptr_t base;   /* start of the allocation containing the pointer */
    size_t size;      /* usable bytes of that allocation (after rounding) */
} mock_mem_info;

/* Finds the live allocation containing `ptr`; false (kind UNKNOWN) if none. */
MOCK_HIDDEN bool mock_mem_lookup(const void *ptr, mock_mem_info *out);
/* Isolation mode: device pages are PROT_NONE outside runtime operations.
 * Bracket every host-side touch of device memory with these (refcounted, so
 * nested and concurrent use is fine). No-ops when isolation is off. */
MOCK_HIDDEN void mock_mem_access_begin(const void *ptr, size_t len);
MOCK_HIDDEN void mock_mem_access_end(const void *ptr, size_t len);

/* --------------------------------------------------------------- finalize */
/* Called by aclFinalize, in this order, before the leak report. */
MOCK_HIDDEN void mock_callbacks_finalize(void);
MOCK_HIDDEN void mock_devices_finalize(void);  /* contexts + their streams/events */
MOCK_HIDDEN void mock_memory_finalize(void);
/* (core, additive) event.c: destroys every event still alive, since aclFinalize
 * releases all resources (events are not owned by a context). aclFinalize calls it
 * right after mock_devices_finalize. */
MOCK_HIDDEN void mock_events_finalize(void);

/* ------------------------------------------------------ misc (additive) */
/* allocator.c: forgets the allocator registered (aclrtAllocatorRegister) on a
 * stream that is being destroyed. stream.c calls it from stream teardown. */
MOCK_HIDDEN void mock_misc_stream_destroyed(mock_stream *s);
/* dump.c: ends an aclmdlInitDump session; aclFinalize calls it (CANN stops
 * dumping at finalize, so a later aclInit + aclmdlInitDump succeeds). */
MOCK_HIDDEN void mock_dump_finalize(void);
/* dump.c: applies the "dump" section of an aclInit config file (CANN lets
 * acl.json configure dumping at init). `text` is the file content. No "dump"
 * key -> ACL_SUCCESS and nothing changes; an invalid section -> the error
 * (ACL_ERROR_INVALID_DUMP_CONFIG ..., recorded under `fn`, message naming the
 * key). Meant to be called by aclInit after its own validation. */
MOCK_HIDDEN aclError mock_dump_configure_from_init(const char *fn, const char *path, const char *text, size_t len);
/* exception.c: runs the exception-info callbacks registered with
 * aclrtSetExceptionInfoCallback / aclrtExceptionInfoCallbackRegister for a
 * failed task (call without holding locks, e.g. from the stream worker after
 * a task returned nonzero). */
MOCK_HIDDEN void mock_exception_report(int32_t device, uint32_t stream_id, uint32_t task_id, aclError code);
/* exception.c: records the id of the task the calling thread just submitted
 * (read back by aclrtGetThreadLastTaskId); call from mock_stream_enqueue. */
MOCK_HIDDEN void mock_note_task_submitted(uint32_t task_id);

#endif /* MOCK_INTERNAL_H */
