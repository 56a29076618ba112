/*
 * core/core.h - what the core subsystem (src/core/: init, config, error, device,
 * context, json) offers to the other subsystems of libascendcl.so, plus the
 * header-only helpers every subsystem and library uses (monotonic deadlines,
 * condition waits, the handle registry). Every function declared here starts
 * with core_. Helpers used only inside src/core/ are in core/core_private.h.
 *
 * Nothing declared here is exported from the shared library: the build uses
 * -fvisibility=hidden and only functions declared in the public headers
 * (ACL_FUNC_VISIBILITY / ACLMOCK_API) are visible. libmsprofiler.so and
 * libascend_dump.so include this header for the static inline helpers only
 * (they cannot call the hidden functions of libascendcl.so).
 *
 * Rule for every public entry point (see DESIGN):
 *   validate arguments -> MOCK_ENTER (fault injection, device lost) -> act ->
 *   on failure return core_error(...) which sets the thread's last error and
 *   recent message.
 * Shared state is guarded by the narrowest lock that works; every lock is a
 * mock_mutex / mock_rwlock declared with its id from core/lock_order.h, which
 * gives the one lock order (checked at run time in the test builds); no lock
 * is held while user code or a stream task runs. A lower layer reaches a
 * higher one only through the subsystem hooks below ("subsystem.c").
 */
#ifndef MOCK_CORE_H
#define MOCK_CORE_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "core/lock_order.h"

#define MOCK_HIDDEN __attribute__((visibility("hidden")))
#define MOCK_MAX_DEVICES 64

/* The runtime objects behind aclrtContext / aclrtStream / aclrtEvent handles
 * (defined in core/context.c, stream/stream.c, stream/event.c). */
typedef struct mock_context mock_context;
typedef struct mock_stream mock_stream;
typedef struct mock_event mock_event;

/* ------------------------------------------------------- shared helpers */
/* Small pieces every subsystem uses, kept here so that no subsystem includes
 * another one's private header. */

static inline uint64_t core_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Absolute CLOCK_MONOTONIC deadline `ms` milliseconds from now. */
static inline struct timespec core_deadline_ms(int64_t ms)
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
 * with the deadline and returns buf. For core_cond_wait_until/stream_task_wait. */
static inline const struct timespec *core_deadline_opt(int64_t timeout_ms, struct timespec *buf)
{
    if (timeout_ms < 0) {
        return NULL;
    }
    *buf = core_deadline_ms(timeout_ms);
    return buf;
}

/* Every condition variable of the mock uses CLOCK_MONOTONIC (deadlines above). */
static inline void core_cond_init(pthread_cond_t *cv)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &a);
    pthread_condattr_destroy(&a);
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
    uint64_t op_timeout_interval_us;     /* ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US (aclrtGetOpTimeOutInterval) */
} mock_config;

MOCK_HIDDEN const mock_config *core_config_get(void);

/* ------------------------------------------------------------------- error.c */

/* Record a failure of `func`: sets the calling thread's last error (for
 * aclrtGetLastError/PeekAtLastError) and recent message (aclGetRecentErrMsg,
 * formatted as "<func>: <message>" naming the bad argument), returns `code`. */
MOCK_HIDDEN aclError core_error(const char *func, aclError code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fault injection: returns 0, or the injected code (already recorded with
 * core_error) when the Nth call of `func` was told to fail. Cheap when no
 * fault is configured (one relaxed atomic load). */
MOCK_HIDDEN aclError core_fault_check(const char *func);

#define MOCK_ENTER(func)                                 \
    do {                                                 \
        aclError mock_enter_rc_ = core_fault_check(func); \
        if (mock_enter_rc_ != ACL_SUCCESS) {             \
            return mock_enter_rc_;                       \
        }                                                \
    } while (0)

/* Argument validation shared by every entry point: a NULL pointer argument is
 * ACL_ERROR_INVALID_PARAM (100000) with the message "argument '<name>' is NULL". */
#define MOCK_REQUIRE_NONNULL(func, arg)                                                      \
    do {                                                                                 \
        if ((arg) == NULL) {                                                             \
            return core_error((func), ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", #arg); \
        }                                                                                \
    } while (0)

/* The `timeout` argument of aclrtSynchronize{Stream,Event,Device}WithTimeout and
 * aclrtStreamWaitEventWithTimeout (RT impl stream.cpp/event.cpp, acl_abi.md §5.4):
 * -1 = forever, > 0 = milliseconds; 0 is not rejected by the reference and the
 * runtime treats it like -1 (its internal "no timeout"); < -1 is
 * ACL_ERROR_RT_PARAM_INVALID (recorded under `func`). On success *ms is -1
 * (forever) or the milliseconds. */
static inline aclError core_check_timeout(const char *func, int32_t timeout, int32_t *ms)
{
    if (timeout < -1) {
        return core_error(func, ACL_ERROR_RT_PARAM_INVALID, "argument 'timeout' is %d (must be -1 or >= 0)",
                          timeout);
    }
    *ms = timeout <= 0 ? -1 : timeout;
    return ACL_SUCCESS;
}

/* Shared front of aclrtSynchronize{Device,Stream,Event}[WithTimeout]: checks `timeout`
 * with core_check_timeout (the variants without a timeout pass -1), runs the fault hook
 * of `fn`, then returns sync(fn, handle, ms) (ms -1 = forever). */
typedef aclError (*mock_sync_fn)(const char *fn, void *handle, int64_t timeout_ms);
static inline aclError core_sync_with_timeout(const char *fn, void *handle, int32_t timeout, mock_sync_fn sync)
{
    int32_t ms = -1;
    aclError rc = core_check_timeout(fn, timeout, &ms);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    return sync(fn, handle, ms);
}

/* ------------------------------------------------------------ handle registry */
/* The one set of live handle pointers used by every subsystem
 * (streams, events, data buffers, allocator descriptors, exception infos,
 * profiling configs/step infos/stamps).
 *
 * A handle given to the user is a pointer to a heap object; every public entry
 * point looks the pointer up here *before* dereferencing it, so a garbage or
 * already destroyed handle gets an error instead of a crash. Lookups compare
 * pointer values only.
 *
 * Header-only (static inline) because libmsprofiler.so and libascend_dump.so are
 * built from their own sources and cannot call hidden helpers of libascendcl.so.
 * Depends on nothing but libc and pthreads.
 *
 *   mock_registry    the bare set: open addressing, linear probing, backward-shift
 *                    deletion (no tombstones). Not locked: the owner guards it with
 *                    its own mutex (streams and events keep counters under it too).
 *   mock_handle_set  a mock_registry with its own mutex, for owners that need
 *                    nothing else under the lock.
 */

/* bare set */

typedef struct mock_registry {
    uintptr_t *slots; /* 0 = empty */
    size_t cap;       /* power of two, or 0 before the first insert */
    size_t count;     /* live entries */
} mock_registry;

#define MOCK_REGISTRY_EMPTY { NULL, 0, 0 }

static inline size_t core_registry_hash_(uintptr_t p, size_t cap)
{
    uint64_t h = (uint64_t)p;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

static inline bool core_registry_contains(const mock_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (p == 0 || r->cap == 0) {
        return false;
    }
    for (size_t i = core_registry_hash_(p, r->cap);; i = (i + 1) & (r->cap - 1)) {
        if (r->slots[i] == 0) {
            return false;
        }
        if (r->slots[i] == p) {
            return true;
        }
    }
}

/* `ptr` as a live handle, or NULL. */
static inline void *core_registry_find(const mock_registry *r, const void *ptr)
{
    return core_registry_contains(r, ptr) ? (void *)(uintptr_t)ptr : NULL;
}

static inline bool core_registry_grow_(mock_registry *r)
{
    size_t ncap = r->cap ? r->cap * 2 : 64;
    uintptr_t *ns = (uintptr_t *)calloc(ncap, sizeof(uintptr_t));
    if (ns == NULL) {
        return false;
    }
    for (size_t j = 0; j < r->cap; j++) {
        uintptr_t p = r->slots[j];
        if (p != 0) {
            size_t i = core_registry_hash_(p, ncap);
            while (ns[i] != 0) {
                i = (i + 1) & (ncap - 1);
            }
            ns[i] = p;
        }
    }
    free(r->slots);
    r->slots = ns;
    r->cap = ncap;
    return true;
}

/* false only when out of memory (inserting a present pointer is a no-op). */
static inline bool core_registry_insert(mock_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if ((r->count + 1) * 2 > r->cap && !core_registry_grow_(r)) {
        return false;
    }
    size_t i = core_registry_hash_(p, r->cap);
    while (r->slots[i] != 0) {
        if (r->slots[i] == p) {
            return true;
        }
        i = (i + 1) & (r->cap - 1);
    }
    r->slots[i] = p;
    r->count++;
    return true;
}

/* false if `ptr` was not in the set. Do not erase while walking the slots
 * (entries move back): collect first, then erase. */
static inline bool core_registry_erase(mock_registry *r, const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if (p == 0 || r->cap == 0) {
        return false;
    }
    size_t mask = r->cap - 1;
    size_t i = core_registry_hash_(p, r->cap);
    while (r->slots[i] != p) {
        if (r->slots[i] == 0) {
            return false;
        }
        i = (i + 1) & mask;
    }
    /* backward-shift deletion keeps every probe chain intact */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (r->slots[j] == 0) {
            break;
        }
        size_t home = core_registry_hash_(r->slots[j], r->cap);
        /* can slots[j] move to i?  yes unless home lies cyclically in (i, j] */
        bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            r->slots[i] = r->slots[j];
            i = j;
        }
    }
    r->slots[i] = 0;
    r->count--;
    return true;
}

/* Iteration: for (size_t i = 0; i < r->cap; i++) { void *h = core_registry_slot(r, i); if (h) ... } */
static inline void *core_registry_slot(const mock_registry *r, size_t i)
{
    return (void *)r->slots[i];
}

/* Empties the set and frees its storage. */
static inline void core_registry_release(mock_registry *r)
{
    free(r->slots);
    r->slots = NULL;
    r->cap = 0;
    r->count = 0;
}

/* set with its lock */

typedef struct mock_handle_set {
    mock_mutex mu;
    mock_registry reg;
} mock_handle_set;

/* `lock_id`: the set's entry in core/lock_order.h. */
#define MOCK_HANDLE_SET_INIT(lock_id) { MOCK_MUTEX_INIT(lock_id), MOCK_REGISTRY_EMPTY }

static inline void core_handle_set_lock(mock_handle_set *s) { core_mutex_lock(&s->mu); }
static inline void core_handle_set_unlock(mock_handle_set *s) { core_mutex_unlock(&s->mu); }

/* Caller holds the lock. */
static inline bool core_handle_set_contains_locked(const mock_handle_set *s, const void *ptr)
{
    return core_registry_contains(&s->reg, ptr);
}
static inline bool core_handle_set_add_locked(mock_handle_set *s, const void *ptr)
{
    return core_registry_insert(&s->reg, ptr);
}
static inline bool core_handle_set_remove_locked(mock_handle_set *s, const void *ptr)
{
    return core_registry_erase(&s->reg, ptr);
}

/* Locking variants. add: false only when out of memory; remove: false if absent. */
static inline bool core_handle_set_add(mock_handle_set *s, const void *ptr)
{
    core_handle_set_lock(s);
    bool ok = core_handle_set_add_locked(s, ptr);
    core_handle_set_unlock(s);
    return ok;
}
static inline bool core_handle_set_remove(mock_handle_set *s, const void *ptr)
{
    core_handle_set_lock(s);
    bool ok = core_handle_set_remove_locked(s, ptr);
    core_handle_set_unlock(s);
    return ok;
}
static inline bool core_handle_set_contains(mock_handle_set *s, const void *ptr)
{
    core_handle_set_lock(s);
    bool ok = core_handle_set_contains_locked(s, ptr);
    core_handle_set_unlock(s);
    return ok;
}

/* ------------------------------------------------------------------- gate.c */
/* The resource gate (acl_next_semantics.md section 5.4, D-SNAP 5.2): while it is closed
 * (aclrtSnapShotProcessLock until aclrtSnapShotProcessUnlock), every entry point that
 * changes device resources - set/reset device, malloc/free, copies and memsets,
 * creating/destroying contexts, streams, events, notifies, kernel launches - blocks its
 * calling thread at MOCK_ENTER until the gate opens; queries and synchronizations pass.
 * Checked by core_fault_check (one relaxed atomic load while open). Closing waits for
 * nothing: calls already past their MOCK_ENTER finish. */
MOCK_HIDDEN void core_gate_close(void);
MOCK_HIDDEN void core_gate_open(void);
/* True for an entry point the closed gate holds (the list is in gate.c). */
MOCK_HIDDEN bool core_gate_holds(const char *func);
/* Called by core_fault_check: waits while the gate is closed and holds `func`. */
MOCK_HIDDEN void core_gate_pass(const char *func);
/* Synchronizes every context of every device (the ctx_sync hooks, waiting at most
 * timeout_ms each, -1 = forever); returns the first error. */
MOCK_HIDDEN aclError core_synchronize_all(int64_t timeout_ms);
/* Bit d set when user device d has a live context (primary or explicit). */
MOCK_HIDDEN uint64_t core_devices_in_use(void);

/* ------------------------------------------------------------------- init.c */

MOCK_HIDDEN bool core_is_initialized(void);

/* -------------------------------------------------------------- subsystem.c */
/* Subsystems and their hooks: the one way a lower layer reaches a higher one.
 *
 * The layers of libascendcl.so are core < stream < mem < misc (README "Source
 * layout"); a file calls only functions of its own or a lower layer. Where core
 * must act on what a higher subsystem owns - aclInit/aclFinalize, the work of a
 * context being synchronized, aborted or torn down - and where the stream
 * subsystem must tell higher ones about a stream going away or a task failing,
 * the higher subsystem registers a descriptor with the hooks it implements
 * (NULL = not interested), and the lower layer runs "every registered hook" for
 * that point through the core_subsystems_* calls below. The only upward calls
 * left are core/context.c -> stream_create_default / stream_destroy_default.
 *
 * Each subsystem defines its descriptor in src/<sub>/hooks.c and registers it
 * from a constructor (MOCK_REGISTER_SUBSYSTEM), so the registry is complete
 * before the first ACL call. Hooks run in ascending `level` (then name) for
 * set-up and work (init, ctx_sync, ctx_abort, task_failed) and in descending
 * order for teardown (init_undo, quiesce, release, ctx_teardown,
 * stream_destroyed): a subsystem is torn down before the ones it builds on.
 * No lock of the registry is held while a hook runs. A new subsystem picks a
 * level above the ones it calls (CORE_LEVEL_*), adds hooks.c, and needs no
 * change in the lower layers unless it needs a new hook point (add the member
 * here, its core_subsystems_* runner in subsystem.c, and call it from the owner
 * of that event). */

/* Layer levels (ascending = lower layer first). */
#define CORE_LEVEL_STREAM 100
#define CORE_LEVEL_MEM 200
#define CORE_LEVEL_MISC 300
#define CORE_LEVEL_KERNEL 600 /* above notify (400) and ipc (500), which it does not call */
#define CORE_LEVEL_GRAPH 700 /* above kernel (600): a kernel launch is one of the tasks it records */
#define CORE_LEVEL_DIAG 800  /* above graph (700) and all the others: it observes them all */

/* What aclInit passes to the init hooks: the function name for error messages and
 * the configuration file (path NULL and text NULL when aclInit got none). */
typedef struct core_init_info {
    const char *fn;
    const char *config_path;
    const char *config_text; /* NUL-terminated content of the file */
    size_t config_len;
} core_init_info;

/* (kernel, additive) What a failing task can tell the task_failed hooks and the
 * stream besides its code: a kernel launch names its function, the argument block the
 * kernel got, the exception callback of its binary and what went wrong. A task sets it
 * on the worker thread (core_task_set_detail) before returning its error; the object
 * must stay valid until the task's free_arg runs (the stream worker runs the
 * task_failed hooks first). */
typedef struct core_task_detail {
    void *func;            /* aclrtFuncHandle of a kernel launch, or NULL */
    void *args;            /* the argument block the kernel got, or NULL */
    uint32_t args_size;    /* its bytes */
    /* aclrtBinarySetExceptionCallback: called before the process-wide callbacks */
    void (*callback)(aclrtExceptionInfo *info, void *user_data);
    void *callback_data;
    const char *message;   /* what went wrong, for the synchronize error message; or NULL */
} core_task_detail;

/* A task that failed on a stream worker (for exception-info callbacks). */
typedef struct core_task_failure {
    int32_t device;
    uint32_t stream_id;
    uint32_t task_id;
    aclError code;
    const core_task_detail *detail; /* (kernel, additive) NULL unless the task set one */
} core_task_failure;

/* -------------------------------------------------- tasks and observations */
/* What a task is, for the diagnostics subsystem (src/diag/: timing model, profiler,
 * race sanitizer, dump, device log). The layer that builds a task describes it
 * (stream_enqueue_desc); tasks enqueued without a description count as
 * MOCK_TASK_OTHER. Everything is copied by the observer during the call. */
typedef enum mock_task_kind {
    MOCK_TASK_OTHER = 0,     /* unknown work: latency only                         */
    MOCK_TASK_COPY,          /* a copy; `link` says which link it uses             */
    MOCK_TASK_MEMSET,        /* memset / memset D32                                */
    MOCK_TASK_VALUE,         /* value write / value wait                           */
    MOCK_TASK_KERNEL,        /* compute: `cost_ns` (0 = the model's default)       */
    MOCK_TASK_EVENT_RECORD,  /* `event` recorded                                   */
    MOCK_TASK_EVENT_WAIT,    /* wait for the latest record of `event`              */
    MOCK_TASK_EVENT_RESET,
    MOCK_TASK_CALLBACK,      /* host callback / host function: real time           */
    MOCK_TASK_MARKER,        /* profiler marker (aclprofMarkEx, aclrtProfTrace)    */
    MOCK_TASK_KIND_COUNT
} mock_task_kind;

/* The link a copy moves its bytes over. */
typedef enum mock_link {
    MOCK_LINK_NONE = 0,
    MOCK_LINK_H2D,  /* PCIe, host to device   */
    MOCK_LINK_D2H,  /* PCIe, device to host   */
    MOCK_LINK_D2D,  /* HBM, within one device */
    MOCK_LINK_PEER, /* device link, between two devices */
    MOCK_LINK_H2H   /* host memory on both sides (the CPU copies) */
} mock_link;

#define MOCK_ACCESS_READ 1u
#define MOCK_ACCESS_WRITE 2u

/* One memory range a task reads and/or writes. dtype/ndim/dims describe it as a
 * tensor for the dump writer (ACL_DT_UNDEFINED / 0: raw bytes). */
typedef struct mock_access {
    const void *ptr;
    size_t size;
    uint32_t mode;     /* MOCK_ACCESS_READ | MOCK_ACCESS_WRITE */
    int32_t dtype;     /* aclDataType, or ACL_DT_UNDEFINED (-1) */
    uint32_t ndim;     /* <= 8 */
    int64_t dims[8];
} mock_access;

typedef struct mock_task_desc {
    mock_task_kind kind;
    const char *name;          /* the API or kernel name ("aclrtMemcpyAsync", ...) */
    uint64_t bytes;            /* bytes moved or set */
    mock_link link;            /* copies */
    bool pageable;             /* copies: one side is pageable host memory */
    int32_t peer_device;       /* MOCK_LINK_PEER: the other device, else -1 */
    uint64_t cost_ns;          /* kernels: declared cost, 0 = default */
    const void *event;         /* EVENT_*: the event (identity only) */
    const mock_access *access; /* the memory it touches */
    size_t naccess;
    bool dump_task;            /* kernels: ACL_RT_LAUNCH_KERNEL_ATTR_DATA_DUMP 1 (dump it
                                  whatever the layer list says, when a dump is on) */
} mock_task_desc;

/* Observations: the stream and memory layers (and core) report what happens to tasks,
 * memory, errors and devices to the subsystems that registered an `observe` hook
 * (the diagnostics subsystem). The task, sync and memory kinds are reported only while
 * core_observing() is true (one relaxed load when off); errors and device resets
 * always. Reported on the thread where it happens, with no lock of the reporter held. */
typedef enum core_obs_kind {
    CORE_OBS_TASK_SUBMIT,  /* host: a task is being queued on `stream` (desc `task`); the
                              observer returns its record of it, kept with the task, or
                              fills the inline one                                     */
    CORE_OBS_TASK_BEGIN,   /* worker: `record` is about to run; the observer may set
                              out_time_ns (modeled completion time) and out_fail       */
    CORE_OBS_TASK_END,     /* worker: `record` ran (rc) or was discarded (skipped)     */
    CORE_OBS_TASK_DROP,    /* host: the stream refused the task; `record` is released  */
    CORE_OBS_SYNC_STREAM,  /* host: the caller has seen every task of `stream` submitted
                              so far complete (synchronize, query, pageable copy; `flag`:
                              a destroy that drained it)                               */
    CORE_OBS_SYNC_EVENT,   /* host: the caller has seen the latest record of `event`   */
    CORE_OBS_HOST_OP,      /* host: a synchronous operation done on the calling thread
                              (sync copy / memset), desc `task`, on `device`           */
    CORE_OBS_MEM_ALLOC,    /* host: [ptr, ptr+size) allocated on `device` (-1 host)    */
    CORE_OBS_MEM_FREE,     /* host: [ptr, ptr+size) is being freed                     */
    CORE_OBS_ERROR,        /* any thread: `func` failed with `rc`, message `text`      */
    CORE_OBS_DEVICE_RESET  /* host: `device` was reset (`flag`: forced)                */
} core_obs_kind;

/* Room in each queued task for an observer's small record (CORE_OBS_TASK_SUBMIT may
 * fill o->inline_rec instead of allocating one): the cheap path of the profiler. */
#define CORE_OBS_INLINE_BYTES 96

typedef struct core_obs {
    core_obs_kind kind;
    mock_stream *stream;
    int32_t device;
    int32_t stream_id;
    const mock_task_desc *task;
    void *record;
    aclError rc;
    bool skipped;
    bool flag;
    const void *event;
    const void *ptr;
    size_t size;
    const char *func;
    const char *text;
    /* TASK_*: the task's inline record (CORE_OBS_INLINE_BYTES, 8-byte aligned); SUBMIT
     * sets out_inline when it filled it. TASK_BEGIN: `flag` is true when the worker
     * waited for work before this task (it did not follow another one at once). */
    void *inline_rec;
    bool out_inline;
    /* TASK_BEGIN results */
    bool out_timed;       /* out_time_ns is set                                      */
    uint64_t out_time_ns; /* modeled time of the task (event timestamps)             */
    aclError out_fail;    /* nonzero: do not run the task, fail it with this code  */
} core_obs;

/* Who wants the task, sync and memory observations: one bit per feature, set and
 * cleared by its owner (core_set_observing). core_observing() is true while any is. */
#define CORE_OBSERVE_TIMING 0x1u    /* diag: timing model in virtual or paced mode */
#define CORE_OBSERVE_PROFILER 0x2u  /* diag: a profiling collection or subscription runs */
#define CORE_OBSERVE_SANITIZER 0x4u /* diag: race sanitizer */
#define CORE_OBSERVE_DUMP 0x8u      /* misc: a data dump is configured */
MOCK_HIDDEN extern atomic_uint core_observing_mask_;
static inline bool core_observing(void)
{
    return __builtin_expect(atomic_load_explicit(&core_observing_mask_, memory_order_relaxed) != 0, 0);
}
MOCK_HIDDEN void core_set_observing(unsigned bit, bool on);
/* Runs every registered observe hook (ascending level); returns the first non-NULL
 * result (TASK_SUBMIT: the task's record). Lock-free: the observer list is complete
 * before the first ACL call (constructors) and never changes afterwards. */
MOCK_HIDDEN void *core_observe(core_obs *o);
/* Shorthand for the simple kinds. */
static inline void core_observe_simple(core_obs_kind kind, mock_stream *s, const void *event, const void *ptr,
                                       size_t size, int32_t device)
{
    core_obs o = {0};
    o.kind = kind;
    o.stream = s;
    o.event = event;
    o.ptr = ptr;
    o.size = size;
    o.device = device;
    (void)core_observe(&o);
}

typedef struct core_subsystem {
    const char *name; /* "stream", "mem", "misc", ... */
    int level;        /* CORE_LEVEL_* */
    /* aclInit, after core accepted the configuration, under the init lock: apply this
     * subsystem's part of it. An error fails aclInit (recorded under info->fn); the
     * subsystems initialized before get init_undo. Must leave nothing behind on error. */
    aclError (*init)(const core_init_info *info);
    /* A later step of the same aclInit failed: forget what init applied. */
    void (*init_undo)(void);
    /* aclFinalize, before the contexts (with their streams) are torn down: stop
     * delivering work to user code (e.g. report subscriptions). */
    void (*quiesce)(void);
    /* aclFinalize, after the contexts are gone: release everything still alive. */
    void (*release)(void);
    /* Device synchronize / task abort / context teardown: act on everything of `ctx`
     * this subsystem owns. ctx_sync waits at most timeout_ms (-1 = forever) and returns
     * the first error; ctx_teardown runs before the context's default stream goes. */
    aclError (*ctx_sync)(mock_context *ctx, int64_t timeout_ms);
    void (*ctx_abort)(mock_context *ctx);
    void (*ctx_teardown)(mock_context *ctx);
    /* Raised by the stream subsystem: a stream is being destroyed (after its worker
     * stopped), and a task failed (on the worker, no lock held). */
    void (*stream_destroyed)(mock_stream *s);
    void (*task_failed)(const core_task_failure *failure);
    /* Observations (core_observe above): what happens to tasks, memory, errors and
     * devices. For CORE_OBS_TASK_SUBMIT the hook returns its record of the task (or
     * NULL); other kinds return NULL. Called with no lock of the reporter held, except
     * CORE_OBS_ERROR, which may come with any lock held (an error is recorded
     * anywhere): its handling takes only locks that may be taken under any other. */
    void *(*observe)(core_obs *o);
} core_subsystem;

/* (kernel, additive) The detail of the task running on the calling stream worker: set
 * by the task (NULL clears), taken (and cleared) by the worker after the task returns. */
MOCK_HIDDEN void core_task_set_detail(const core_task_detail *detail);
MOCK_HIDDEN const core_task_detail *core_task_take_detail(void);

/* Adds a descriptor (static storage; at most 16). Called from constructors only. */
MOCK_HIDDEN void core_subsystem_register(const core_subsystem *sub);
/* Defines the constructor that registers `desc` (a static const core_subsystem). */
#define MOCK_REGISTER_SUBSYSTEM(desc)                                           \
    __attribute__((constructor)) static void desc##_register_(void)           \
    {                                                                          \
        core_subsystem_register(&(desc));                                      \
    }

/* Runners: each calls that hook of every registered subsystem, in the order above. */
MOCK_HIDDEN aclError core_subsystems_init(const core_init_info *info);
MOCK_HIDDEN void core_subsystems_init_undo(void);
MOCK_HIDDEN void core_subsystems_quiesce(void);
MOCK_HIDDEN void core_subsystems_release(void);
MOCK_HIDDEN aclError core_subsystems_ctx_sync(mock_context *ctx, int64_t timeout_ms);
MOCK_HIDDEN void core_subsystems_ctx_abort(mock_context *ctx);
MOCK_HIDDEN void core_subsystems_ctx_teardown(mock_context *ctx);
MOCK_HIDDEN void core_subsystems_stream_destroyed(mock_stream *s);
MOCK_HIDDEN void core_subsystems_task_failed(const core_task_failure *failure);

/* ------------------------------------------------------------- stream workers */
/* Which stream's tasks the calling thread runs, if any. The stream subsystem sets it
 * for the life of each worker thread (core_worker_enter at start, core_worker_leave at
 * exit); entry points that would wait for the caller's own stream (destroying or
 * synchronizing its context or device, aclFinalize) refuse with 107000 instead of
 * deadlocking. Implemented in context.c. */
MOCK_HIDDEN void core_worker_enter(mock_stream *s, mock_context *ctx, int32_t device);
MOCK_HIDDEN void core_worker_leave(void);
/* The stream whose worker is the calling thread, or NULL. */
MOCK_HIDDEN mock_stream *core_worker_stream(void);
/* (diagnostics, additive) Lock-free: the device of the calling worker's stream, else
 * of the context last made current on this thread (it may be gone since), else -1.
 * For attributing an error to a device log under any lock. */
MOCK_HIDDEN int32_t core_thread_device(void);
/* True when the calling thread is the worker of a stream of `ctx` / on `device`. */
MOCK_HIDDEN bool core_worker_in_context(const mock_context *ctx);
MOCK_HIDDEN bool core_worker_on_device(int32_t device);

/* ------------------------------------------------------- device.c context.c */

/* Number of visible devices (0 when none / invalid list). */
MOCK_HIDDEN uint32_t core_visible_count(void);
/* Validates a user (logical) device id against the visible count and the
 * device-lost state. Records and returns the error (107001 bad id, sticky
 * 507xxx for a lost device). */
MOCK_HIDDEN aclError core_device_check(const char *func, int32_t device);
/* 0 or the sticky code set by aclmockSetDeviceLost. */
MOCK_HIDDEN aclError core_device_lost_code(int32_t device);

/* The calling thread's current context or NULL. */
MOCK_HIDDEN mock_context *core_ctx_current(void);
/* Current context, or records and returns ACL_ERROR_RT_CONTEXT_NULL (107002);
 * also fails with the sticky code when its device is lost. */
MOCK_HIDDEN aclError core_ctx_require(const char *func, mock_context **out);
MOCK_HIDDEN int32_t core_ctx_device(const mock_context *ctx);
MOCK_HIDDEN mock_stream *core_ctx_default_stream(mock_context *ctx);
/* Streams `device` occupies besides the streams of the stream subsystem: 1 while the
 * device has contexts but no primary (default) context - the device's own stream, which
 * a primary context uses as its default stream - else 0. Doc 06_stream_management.md,
 * aclrtGetStreamAvailableNum: the first aclrtCreateContext without aclrtSetDevice
 * occupies 2 streams (its default stream and the device's). */
MOCK_HIDDEN uint32_t core_device_hidden_streams(int32_t device);
/* (core, additive) ACL_STOP_ON_FAILURE "applies to all streams of that
 * context" (acl_abi.md §5.4): set by aclrtSetStreamFailureMode on any stream
 * of ctx, read by every stream of ctx. */
MOCK_HIDDEN void core_ctx_set_stop_on_failure(mock_context *ctx);
MOCK_HIDDEN bool core_ctx_stop_on_failure(const mock_context *ctx);

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
    MOCK_STAT_DEFAULT_CONTEXTS, /* subset of CONTEXTS: the default (primary) contexts */
    MOCK_STAT_DEFAULT_STREAMS,  /* subset of STREAMS: every context's default stream */
    MOCK_STAT_COUNT
} mock_stat;
MOCK_HIDDEN void core_stat_add(int32_t device, mock_stat which, int64_t delta);

/* ------------------------------------------------------------------- json.c */
/* A small strict JSON parser: parse a document into a tree, look members up,
 * free it. */

typedef enum mock_json_type {
    MOCK_JSON_NULL,
    MOCK_JSON_BOOL,
    MOCK_JSON_NUMBER,
    MOCK_JSON_STRING,
    MOCK_JSON_ARRAY,
    MOCK_JSON_OBJECT
} mock_json_type;

typedef struct mock_json {
    mock_json_type t;
    char *key;              /* member name when the parent is an object, else NULL */
    char *str;              /* STRING: decoded UTF-8 value; NUMBER: the literal text */
    bool boolean;           /* BOOL value */
    struct mock_json *kids; /* ARRAY / OBJECT children, in document order */
    struct mock_json *next; /* next sibling */
} mock_json;

/* Parses text[0..len) (a UTF-8 BOM is skipped). Returns the root, or NULL with
 * "line L column C: <what>" written to err (errlen bytes, may be 0). */
MOCK_HIDDEN mock_json *core_json_parse(const char *text, size_t len, char *err, size_t errlen);
MOCK_HIDDEN void core_json_free(mock_json *root);
/* The last member named `key` of an object (JSON allows duplicates; the last
 * wins, as in common parsers), or NULL (also when obj is not an object). */
MOCK_HIDDEN const mock_json *core_json_get(const mock_json *obj, const char *key);
/* "null", "a boolean", "a number", "a string", "an array", "an object". */
MOCK_HIDDEN const char *core_json_type_name(mock_json_type t);

/* Reads the JSON file `path` (a regular file of at most `max_bytes`) and parses
 * it: the one loader of the aclInit config and the aclmdlSetDump config. `what`
 * names the file in messages ("config file", "dump config file"). On success
 * *text is the malloc'd, NUL-terminated content (*len bytes; free it) and *root
 * the tree (core_json_free). Errors, recorded under `fn` (acl_abi.md §5.1/§5.10):
 * ACL_ERROR_INVALID_FILE (cannot open/read, not a regular file),
 * ACL_ERROR_INVALID_FILE_SIZE (larger than max_bytes), ACL_ERROR_PARSE_FILE
 * (empty, or not JSON: the message has line and column), ACL_ERROR_BAD_ALLOC. */
MOCK_HIDDEN aclError core_json_load_file(const char *fn, const char *what, const char *path, size_t max_bytes,
                                         char **text, size_t *len, mock_json **root);

/* -------------------------------------------------------------------- soc.c */
/* The product family of ASCEND_MOCK_SOC_NAME, for the per-product support matrices of
 * the API reference (950 = 950PR/950DT, A3, A2, 310P, 310B, 910 = training series). A
 * name the mock does not know is an A2 part. */
typedef enum core_soc_family {
    CORE_SOC_A2 = 0,
    CORE_SOC_A3,
    CORE_SOC_950PR,
    CORE_SOC_950DT,
    CORE_SOC_310P,
    CORE_SOC_310B,
    CORE_SOC_910
} core_soc_family;
#define CORE_SOC_BIT(f) (1u << (unsigned)(f))
#define CORE_SOC_950 (CORE_SOC_BIT(CORE_SOC_950PR) | CORE_SOC_BIT(CORE_SOC_950DT))
MOCK_HIDDEN core_soc_family core_soc_family_get(void);
MOCK_HIDDEN const char *core_soc_family_name(core_soc_family f);
/* ACL_SUCCESS when the family of this SoC is in `supported` (CORE_SOC_BIT ors), else
 * records and returns ACL_ERROR_RT_FEATURE_NOT_SUPPORT under `fn`, naming the SoC. */
MOCK_HIDDEN aclError core_soc_require(const char *fn, unsigned supported);

/* -------------------------------------------------------------------- shm.c */
/* Process-shared words: 64-byte zeroed slots of memfd-backed arenas mapped MAP_SHARED
 * (the state of IPC events and notifies), and shared futex wait/wake on a 32-bit word
 * (works on any memory, across processes for shared mappings). */
#define CORE_SHM_SLOT_BYTES 64u
typedef struct core_shm_slot {
    void *addr;      /* the slot in this process */
    int fd;          /* the arena's memfd (-1: cannot be shared with another process) */
    uint64_t offset; /* of the slot in that file */
    uint32_t number; /* internal */
} core_shm_slot;
/* false when no arena memory could be mapped. */
MOCK_HIDDEN bool core_shm_slot_alloc(core_shm_slot *out);
/* Returns the slot to the arena (no-op for an empty slot). The caller makes sure no
 * process maps it any more (src/ipc/ keeps the object alive while an importer does). */
MOCK_HIDDEN void core_shm_slot_free(const core_shm_slot *slot);
/* Sleeps while *word == expected, until woken or `deadline` (absolute CLOCK_MONOTONIC;
 * NULL = none). Returns ETIMEDOUT, or 0 (recheck: woken, value changed, interrupted). */
MOCK_HIDDEN int core_futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *deadline);
/* Wakes every waiter on `word`, in any process. */
MOCK_HIDDEN void core_futex_wake(_Atomic uint32_t *word);

#endif /* MOCK_CORE_H */
