/*
 * stream.c - streams: one worker thread per stream running its tasks in FIFO
 * order, truly asynchronously (acl_abi.md §5.4).
 *
 * Design
 *  - A stream is a heap struct with a magic field, registered in a hash set of
 *    live handles. Every entry point looks the user's pointer up in the set
 *    before dereferencing it, so garbage or destroyed handles give an error,
 *    never a crash. Internal holders (API calls in progress, device sync,
 *    events, callbacks) keep a reference count; the struct is freed when the
 *    last reference goes.
 *  - Tasks live in a per-stream ring buffer (grown by doubling, never freed
 *    per task): enqueue is a mutex, a store and - only when the worker sleeps -
 *    one signal. Each task gets a sequence number; `completed` counts finished
 *    (or discarded) tasks, so "done" means completed == submitted.
 *  - The worker runs a task with no lock held. Waiters on completion are woken
 *    only when someone waits (waiters > 0); synchronising threads spin briefly
 *    before sleeping because most tasks are short (round-trip latency target).
 *  - Failure: a task returning nonzero sets the stream error. With
 *    ACL_CONTINUE_ON_FAILURE (default) the next synchronize reports it once;
 *    with ACL_STOP_ON_FAILURE later tasks are discarded, new submissions are
 *    refused with that error and it stays until aclrtStreamAbort (doc
 *    06_stream_management.md: "after a failure no new tasks can be submitted").
 *  - Abort (aclrtStreamAbort/Stop, aclrtDestroyStreamForce): the tasks not
 *    started are discarded and a blocking task is interrupted; every
 *    synchronize waiting on the stream meanwhile (or starting while the abort
 *    runs) returns ACL_ERROR_RT_STREAM_ABORT. A forced destroy does not wait:
 *    the handle is gone at once and the worker, an "orphan", finishes the task
 *    it is running (host code cannot be killed), discards the rest and frees
 *    the stream itself. Device synchronize and context teardown wait for the
 *    orphans of their context.
 *  - ACL_STREAM_PERSISTENT: tasks are captured, not executed (see
 *    stream_enqueue).
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "stream/stream_private.h"

#define STREAM_MAGIC 0x5354524d5354524dull /* "STRMSTRM" */
/* Max streams per device including the default stream: 1984 on
 * A2/A3/950 (doc 06_stream_management.md; acl_abi.md §5.4). */
#define STREAM_MAX_PER_DEVICE 1984u
/* Stream priority range: [0, 7], 0 highest (C++ wrapper doc, acl_abi.md §1.4
 * notes); aclrtDeviceGetStreamPriorityRange reports least=7 greatest=0. */
#define STREAM_PRIORITY_LEAST 7u
#define STREAM_KNOWN_FLAGS                                                     \
    (ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT |   \
     ACL_STREAM_HUGE | ACL_STREAM_CPU_SCHEDULE | ACL_STREAM_DEVICE_USE_ONLY)
#define RES_TYPES 2
/* bytes kept of what a failed task said (core_task_detail.message) */
#define STREAM_ERR_MSG 256

typedef struct mock_task {
    mock_task_fn fn;
    void *arg;
    void (*free_arg)(void *arg);
    void *diag;       /* the observer's record of the task (core_observe), or NULL */
    bool has_inline;  /* ... or its small record, kept here (no allocation) */
    _Alignas(8) unsigned char inline_rec[CORE_OBS_INLINE_BYTES];
} mock_task;

/* A thread inside stream_wait with work still pending, on the stream's list
 * (stack allocated, under the stream lock). An abort marks the waiters whose
 * target it interrupts. */
typedef struct sync_waiter {
    struct sync_waiter *next;
    uint64_t target;
    bool aborted;
} sync_waiter;

struct mock_stream {
    uint64_t magic;
    atomic_int refs;
    mock_context *ctx;
    int32_t device;
    int32_t id;
    uint32_t priority;
    uint32_t flags;
    bool is_default;

    /* attributes (atomics: read/written by getters without the queue lock) */
    _Atomic uint64_t failure_mode;
    atomic_bool failure_mode_set; /* aclrtSetStreamFailureMode may be called once per stream */
    atomic_uint overflow_switch;
    atomic_uint user_tag;
    atomic_uint cache_op_info;
    atomic_uint res_limit[RES_TYPES]; /* 0 = not set: the device limit applies */

    mock_mutex mu;
    pthread_cond_t work_cv; /* worker sleeps here */
    pthread_cond_t done_cv; /* synchronizers sleep here */
    mock_task *ring;
    size_t cap, head, count;
    uint64_t submitted;     /* tasks accepted */
    uint64_t started;       /* tasks popped by the worker */
    _Atomic uint64_t completed; /* tasks finished or discarded */
    uint64_t discard_until; /* tasks with seq <= this are discarded */
    int waiters;
    bool worker_sleeping;
    bool stopping;
    aclError err;           /* pending task error */
    char err_msg[STREAM_ERR_MSG]; /* what the failed task said (core_task_detail.message), or "" */
    atomic_bool abort_req;  /* running blocking task should give up */
    sync_waiter *sync_waiters;
    mock_task *captured;    /* ACL_STREAM_PERSISTENT: tasks kept, never run */
    _Atomic(void *) binding; /* capture port: tasks go to the graph subsystem (capture.c) */
    size_t ncaptured, capcaptured;
    bool orphaned;          /* destroyed by force: the worker frees the stream */
    mock_stream *orphan_next; /* list of orphans, under g_reg_mu */
    pthread_t thread;
};

/* -------------------------------------------------------------- registry */

static mock_mutex g_reg_mu = MOCK_MUTEX_INIT(MOCK_LOCK_STREAM_REGISTRY);
static mock_registry g_reg = MOCK_REGISTRY_EMPTY;
static uint32_t g_live_per_dev[MOCK_MAX_DEVICES];
static atomic_int g_next_id[MOCK_MAX_DEVICES];
/* Streams destroyed by force whose worker has not exited yet (under g_reg_mu;
 * g_orphan_cv is broadcast whenever one leaves). */
static mock_stream *g_orphans;
static pthread_cond_t g_orphan_cv;
static pthread_once_t g_orphan_once = PTHREAD_ONCE_INIT;

static void orphan_cv_init(void)
{
    core_cond_init(&g_orphan_cv);
}

static mock_stream *reg_find(const void *p)
{
    return core_registry_find(&g_reg, p);
}

/* ------------------------------------------------------- state callbacks */

#define STATE_CB_MAX 64
typedef struct state_cb {
    char name[64];
    aclrtStreamStateCallback fn;
    void *args;
} state_cb;
static mock_mutex g_state_mu = MOCK_MUTEX_INIT(MOCK_LOCK_STREAM_STATE_CALLBACKS);
static state_cb g_state_cbs[STATE_CB_MAX];
static size_t g_state_n;

static void notify_state(mock_stream *s, aclrtStreamState state)
{
    state_cb snap[STATE_CB_MAX];
    size_t n;
    core_mutex_lock(&g_state_mu);
    n = g_state_n;
    memcpy(snap, g_state_cbs, n * sizeof(snap[0]));
    core_mutex_unlock(&g_state_mu);
    core_lock_check_none("calling a stream state callback");
    for (size_t i = 0; i < n; i++) {
        snap[i].fn((aclrtStream)s, state, snap[i].args);
    }
}

/* ------------------------------------------------------------ primitives */

/* The id of the last task the calling thread submitted (aclrtGetThreadLastTaskId). */
static _Thread_local uint32_t tls_last_task_id;
static _Thread_local bool tls_has_task;

/* The effective failure mode: the stream's own, or STOP when any stream of its
 * context was set to STOP (acl_abi.md §5.4: "STOP applies to all streams of
 * that context"). */
static bool stops_on_failure(const mock_stream *s)
{
    return atomic_load(&((mock_stream *)s)->failure_mode) == ACL_STOP_ON_FAILURE ||
           core_ctx_stop_on_failure(s->ctx);
}

/* Sets the failure mode; the reference allows it once per stream (§5.4). */
static aclError set_failure_mode(const char *fn, mock_stream *s, uint64_t mode)
{
    if (atomic_exchange(&s->failure_mode_set, true)) {
        /* The code for a second call is not pinned down by the reference. */
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the failure mode of this stream was already set (it may be set once per stream)");
    }
    atomic_store(&s->failure_mode, mode);
    if (mode == ACL_STOP_ON_FAILURE) {
        core_ctx_set_stop_on_failure(s->ctx);
    }
    return ACL_SUCCESS;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

int stream_task_wait(pthread_cond_t *cv, mock_mutex *mu, const struct timespec *deadline)
{
    mock_stream *self = core_worker_stream();
    if (self == NULL) {
        return core_cond_wait_until(cv, mu, deadline);
    }
    if (atomic_load(&self->abort_req)) {
        return ECANCELED;
    }
    /* On a worker: wait in slices so that an abort is noticed. */
    struct timespec slice = core_deadline_ms(10);
    const struct timespec *until = &slice;
    bool last = false;
    if (deadline != NULL && ts_before(deadline, &slice)) {
        until = deadline;
        last = true;
    }
    int rc = core_cond_wait_until(cv, mu, until);
    if (atomic_load(&self->abort_req)) {
        return ECANCELED;
    }
    return (rc == ETIMEDOUT && last) ? ETIMEDOUT : 0;
}

int stream_task_wait_word(_Atomic uint32_t *word, uint32_t seen, const struct timespec *deadline)
{
    mock_stream *self = core_worker_stream();
    if (self == NULL) {
        return core_futex_wait(word, seen, deadline);
    }
    if (atomic_load(&self->abort_req)) {
        return ECANCELED;
    }
    /* On a worker: wait in slices so that an abort is noticed (as stream_task_wait). */
    struct timespec slice = core_deadline_ms(10);
    const struct timespec *until = &slice;
    bool last = false;
    if (deadline != NULL && ts_before(deadline, &slice)) {
        until = deadline;
        last = true;
    }
    int rc = core_futex_wait(word, seen, until);
    if (atomic_load(&self->abort_req)) {
        return ECANCELED;
    }
    return (rc == ETIMEDOUT && last) ? ETIMEDOUT : 0;
}

bool stream_task_cancelled(void)
{
    mock_stream *self = core_worker_stream();
    return self != NULL && atomic_load(&self->abort_req);
}

bool stream_is_persistent(const mock_stream *s)
{
    return (s->flags & ACL_STREAM_PERSISTENT) != 0; /* set at creation, never changed */
}

void stream_ref(mock_stream *s)
{
    atomic_fetch_add(&s->refs, 1);
}

static void stream_free(mock_stream *s)
{
    free(s->captured); /* empty by now: released at teardown */
    core_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->done_cv);
    free(s->ring);
    s->magic = 0;
    free(s);
}

void stream_put(mock_stream *s)
{
    if (atomic_fetch_sub(&s->refs, 1) == 1) {
        stream_free(s);
    }
}

int32_t stream_get_id(const mock_stream *s)
{
    return s->id;
}

int32_t stream_device(const mock_stream *s)
{
    return s->device;
}

mock_context *stream_context(const mock_stream *s)
{
    return s->ctx;
}

uint32_t stream_get_overflow_switch(const mock_stream *s)
{
    return atomic_load(&((mock_stream *)s)->overflow_switch);
}

void stream_set_overflow_switch(mock_stream *s, uint32_t on)
{
    atomic_store(&s->overflow_switch, on);
}

/* ----------------------------------------------------------- observation */

/* The modeled time of the task the calling worker runs (CORE_OBS_TASK_BEGIN's
 * out_time_ns), 0 when there is none: event records take it as their timestamp. */
static _Thread_local uint64_t tls_task_time_ns;
static _Thread_local bool tls_task_timed;

uint64_t stream_task_time_ns(uint64_t fallback)
{
    return tls_task_timed ? tls_task_time_ns : fallback;
}

/* Before a task with an observer record runs (or is discarded): the observer may
 * pace it, give it a modeled time, or fail it (race sanitizer). */
static aclError observe_begin(mock_stream *s, mock_task *t, bool skip, bool waited)
{
    core_obs o = {0};
    o.kind = CORE_OBS_TASK_BEGIN;
    o.stream = s;
    o.device = s->device;
    o.stream_id = s->id;
    o.record = t->diag;
    o.inline_rec = t->has_inline ? t->inline_rec : NULL;
    o.skipped = skip;
    o.flag = waited;
    (void)core_observe(&o);
    tls_task_timed = o.out_timed;
    tls_task_time_ns = o.out_time_ns;
    return skip ? ACL_SUCCESS : o.out_fail;
}

static void observe_end(mock_stream *s, mock_task *t, aclError rc, bool skip)
{
    tls_task_timed = false;
    core_obs o = {0};
    o.kind = CORE_OBS_TASK_END;
    o.stream = s;
    o.device = s->device;
    o.stream_id = s->id;
    o.record = t->diag;
    o.inline_rec = t->has_inline ? t->inline_rec : NULL;
    o.rc = rc;
    o.skipped = skip;
    (void)core_observe(&o);
}

/* ---------------------------------------------------------------- worker */

static void *worker_main(void *arg)
{
    mock_stream *s = arg;
    core_worker_enter(s, s->ctx, s->device);
    core_mutex_lock(&s->mu);
    /* for the observers: no observed task ran on this worker right before this one */
    bool waited = true;
    for (;;) {
        while (s->count == 0 && !s->stopping) {
            s->worker_sleeping = true;
            core_cond_wait(&s->work_cv, &s->mu);
            s->worker_sleeping = false;
            waited = true;
        }
        if (s->count == 0) {
            break; /* stopping and drained */
        }
        mock_task t = s->ring[s->head];
        s->head = (s->head + 1) & (s->cap - 1);
        s->count--;
        uint64_t seq = ++s->started;
        bool skip = seq <= s->discard_until ||
                    (s->err != ACL_SUCCESS && stops_on_failure(s));
        core_mutex_unlock(&s->mu);

        aclError rc = ACL_SUCCESS;
        bool observed = t.diag != NULL || t.has_inline;
        if (observed) {
            rc = observe_begin(s, &t, skip, waited);
        }
        waited = !observed;
        if (!skip && rc == ACL_SUCCESS) {
            core_lock_check_none("running a stream task");
            rc = t.fn(t.arg);
        }
        /* a detail the task left (a kernel fault), valid until free_arg */
        const core_task_detail *detail = core_task_take_detail();
        if (observed) {
            observe_end(s, &t, rc, skip);
        }
        if (rc != ACL_SUCCESS && !atomic_load(&s->abort_req)) {
            /* the task_failed hooks (exception-info callbacks), no lock held */
            core_task_failure failure = {s->device, (uint32_t)s->id, (uint32_t)seq, rc, detail};
            core_subsystems_task_failed(&failure);
        }
        char msg[STREAM_ERR_MSG];
        msg[0] = '\0';
        if (rc != ACL_SUCCESS && detail != NULL && detail->message != NULL) {
            snprintf(msg, sizeof msg, "%s", detail->message);
        }
        if (t.free_arg != NULL) {
            t.free_arg(t.arg);
        }

        core_mutex_lock(&s->mu);
        if (rc != ACL_SUCCESS && s->err == ACL_SUCCESS && seq > s->discard_until) {
            s->err = rc;
            memcpy(s->err_msg, msg, sizeof msg);
        }
        atomic_store_explicit(&s->completed, seq, memory_order_release);
        if (s->waiters > 0) {
            pthread_cond_broadcast(&s->done_cv);
        }
    }
    bool orphan = s->orphaned;
    core_mutex_unlock(&s->mu);
    core_worker_leave();
    if (orphan) {
        /* Destroyed by force: leave the orphan list and drop the reference
         * the registry had (the destroying call detached this thread). */
        pthread_once(&g_orphan_once, orphan_cv_init);
        core_mutex_lock(&g_reg_mu);
        mock_stream **pp = &g_orphans;
        while (*pp != NULL && *pp != s) {
            pp = &(*pp)->orphan_next;
        }
        if (*pp == s) {
            *pp = s->orphan_next;
        }
        pthread_cond_broadcast(&g_orphan_cv);
        core_mutex_unlock(&g_reg_mu);
        stream_put(s);
    }
    return NULL;
}

/* --------------------------------------------------------------- enqueue */

/* ACL_STREAM_PERSISTENT: a persistent stream does not execute what is
 * submitted to it; the tasks are captured (kept, in order) for a model
 * runtime instance to replay them (aclmdlRI*, which the mock does not
 * support). So nothing runs, the stream always looks idle (synchronize
 * returns at once, query says COMPLETE, events recorded on it do not
 * complete), and the captured tasks are released without running when the
 * stream is destroyed (aclrtStreamAbort keeps them: it concerns tasks being
 * executed). Called with s->mu held; false when out of memory. */
static bool capture_locked(mock_stream *s, mock_task t)
{
    if (s->ncaptured == s->capcaptured) {
        size_t ncap = s->capcaptured ? s->capcaptured * 2 : 16;
        mock_task *n = realloc(s->captured, ncap * sizeof(*n));
        if (n == NULL) {
            return false;
        }
        s->captured = n;
        s->capcaptured = ncap;
    }
    s->captured[s->ncaptured++] = t;
    return true;
}

/* Releases the captured tasks of a persistent stream that is going away. */
static void release_captured(mock_stream *s)
{
    core_mutex_lock(&s->mu);
    mock_task *v = s->captured;
    size_t n = s->ncaptured;
    s->captured = NULL;
    s->ncaptured = s->capcaptured = 0;
    core_mutex_unlock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        if (v[i].free_arg != NULL) {
            v[i].free_arg(v[i].arg);
        }
    }
    free(v);
}

/* Doubles the task ring (s->mu held); false when out of memory. */
static bool ring_grow_locked(mock_stream *s)
{
    size_t ncap = s->cap ? s->cap * 2 : 64;
    mock_task *nr = malloc(ncap * sizeof(*nr));
    if (nr == NULL) {
        return false;
    }
    for (size_t i = 0; i < s->count; i++) {
        nr[i] = s->ring[(s->head + i) & (s->cap - 1)];
    }
    free(s->ring);
    s->ring = nr;
    s->cap = ncap;
    s->head = 0;
    return true;
}

aclError stream_enqueue(mock_stream *s, mock_task_fn fn, void *arg, void (*free_arg)(void *arg))
{
    stream_task t = {fn, arg, free_arg, NULL};
    return stream_enqueue_task_desc(s, &t, NULL);
}

aclError stream_enqueue_desc(mock_stream *s, mock_task_fn fn, void *arg, void (*free_arg)(void *arg),
                             const mock_task_desc *desc)
{
    stream_task t = {fn, arg, free_arg, NULL};
    return stream_enqueue_task_desc(s, &t, desc);
}

void stream_set_binding(mock_stream *s, void *binding)
{
    atomic_store(&s->binding, binding);
}

void *stream_binding(const mock_stream *s)
{
    return atomic_load(&((mock_stream *)s)->binding);
}

bool stream_is_default(const mock_stream *s)
{
    return s->is_default;
}

uint32_t stream_cache_op_info(const mock_stream *s)
{
    return atomic_load(&((mock_stream *)s)->cache_op_info);
}

int32_t stream_id(const mock_stream *s)
{
    return s->id;
}

aclError stream_acquire(const char *func, aclrtStream handle, bool submit, mock_stream **out)
{
    return stream_get(func, handle, submit, out);
}

void stream_release(mock_stream *s)
{
    stream_put(s);
}

bool stream_is_worker_of(const mock_stream *s)
{
    return core_worker_stream() == s;
}

aclError stream_enqueue_task(mock_stream *s, const stream_task *task)
{
    return stream_enqueue_task_desc(s, task, NULL);
}

aclError stream_enqueue_task_desc(mock_stream *s, const stream_task *task, const mock_task_desc *desc)
{
    mock_task_fn fn = task->fn;
    void *arg = task->arg;
    void (*free_arg)(void *arg) = task->free_arg;
    void *binding = atomic_load(&s->binding);
    if (binding != NULL) {
        /* Captured (aclmdlRICaptureBegin), built (aclmdlRIBindStream) or an
         * update being recorded: the graph subsystem keeps the task (not run
         * now, so not observed). */
        return stream_capture_enqueue(s, binding, task);
    }
    void *diag = NULL;
    bool has_inline = false;
    _Alignas(8) unsigned char inline_rec[CORE_OBS_INLINE_BYTES];
    if (core_observing() && (s->flags & ACL_STREAM_PERSISTENT) == 0) {
        static const mock_task_desc other = {.kind = MOCK_TASK_OTHER, .name = "task", .peer_device = -1};
        core_obs o = {0};
        o.kind = CORE_OBS_TASK_SUBMIT;
        o.stream = s;
        o.device = s->device;
        o.stream_id = s->id;
        o.flag = s->is_default;
        o.task = desc != NULL ? desc : &other;
        o.inline_rec = inline_rec;
        diag = core_observe(&o);
        has_inline = o.out_inline;
    }
    aclError refuse = ACL_SUCCESS;
    bool queued = false; /* false with no refusal: captured by a persistent stream */
    bool wake = false;
    uint64_t seq = 0;
    core_mutex_lock(&s->mu);
    if (s->stopping) {
        refuse = ACL_ERROR_RT_STREAM_ABORT;
    } else if (s->err != ACL_SUCCESS && stops_on_failure(s)) {
        refuse = s->err;
    } else if ((s->flags & ACL_STREAM_PERSISTENT) != 0) {
        if (!capture_locked(s, (mock_task){.fn = fn, .arg = arg, .free_arg = free_arg})) {
            refuse = ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
    } else if (s->count == s->cap && !ring_grow_locked(s)) {
        refuse = ACL_ERROR_RT_MEMORY_ALLOCATION;
    } else {
        mock_task *slot = &s->ring[(s->head + s->count) & (s->cap - 1)];
        slot->fn = fn;
        slot->arg = arg;
        slot->free_arg = free_arg;
        slot->diag = diag;
        slot->has_inline = has_inline;
        if (has_inline) {
            memcpy(slot->inline_rec, inline_rec, sizeof inline_rec);
        }
        s->count++;
        seq = ++s->submitted;
        wake = s->worker_sleeping;
        queued = true;
    }
    core_mutex_unlock(&s->mu);
    if (refuse != ACL_SUCCESS) {
        if (diag != NULL || has_inline) {
            core_obs o = {0};
            o.kind = CORE_OBS_TASK_DROP;
            o.stream = s;
            o.record = diag;
            o.inline_rec = has_inline ? inline_rec : NULL;
            (void)core_observe(&o);
        }
        if (free_arg != NULL) {
            free_arg(arg);
        }
        return refuse;
    }
    if (!queued) {
        return ACL_SUCCESS;
    }
    if (wake) {
        pthread_cond_signal(&s->work_cv);
    }
    tls_last_task_id = (uint32_t)seq; /* aclrtGetThreadLastTaskId */
    tls_has_task = true;
    return ACL_SUCCESS;
}

/* ------------------------------------------------------------ sync/query */

/* ": <what the failed task said>" for the message of an error `rc` of the stream
 * (a task error), or "". */
static void err_msg_copy(mock_stream *s, aclError rc, char out[STREAM_ERR_MSG])
{
    out[0] = '\0';
    if (rc == ACL_SUCCESS || rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT || rc == ACL_ERROR_RT_STREAM_ABORT) {
        return;
    }
    char msg[STREAM_ERR_MSG];
    core_mutex_lock(&s->mu);
    memcpy(msg, s->err_msg, sizeof msg);
    core_mutex_unlock(&s->mu);
    if (msg[0] != '\0') {
        snprintf(out, STREAM_ERR_MSG, ": %.*s", STREAM_ERR_MSG - 3, msg);
    }
}

/* Waits until every task submitted before the call has finished.
 * timeout_ms < 0: forever. Returns 507046 on timeout, else the pending task
 * error (cleared unless the stream is in STOP mode), else 0. */
static aclError stream_wait(mock_stream *s, int64_t timeout_ms, bool consume_err)
{
    core_mutex_lock(&s->mu);
    uint64_t target = s->submitted;
    sync_waiter me = {NULL, target, false};
    bool listed = atomic_load(&s->completed) < target;
    if (listed) {
        /* an abort already running interrupts this wait too */
        me.aborted = atomic_load(&s->abort_req);
        me.next = s->sync_waiters;
        s->sync_waiters = &me;
    }
    core_mutex_unlock(&s->mu);

    /* Short spin: most tasks are tiny, and a futex sleep/wake round trip
     * costs more than the task itself. Bounded so idle CPUs are not burnt. */
    if (atomic_load_explicit(&s->completed, memory_order_acquire) < target) {
        for (int i = 0; i < 200; i++) {
            if (atomic_load_explicit(&s->completed, memory_order_acquire) >= target) {
                break;
            }
            sched_yield();
        }
    }

    aclError rc = ACL_SUCCESS;
    core_mutex_lock(&s->mu);
    if (s->completed < target) {
        struct timespec dl_buf;
        const struct timespec *dl = core_deadline_opt(timeout_ms, &dl_buf);
        s->waiters++;
        while (atomic_load(&s->completed) < target) {
            if (core_cond_wait_until(&s->done_cv, &s->mu, dl) == ETIMEDOUT &&
                atomic_load(&s->completed) < target) {
                rc = ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
                break;
            }
        }
        s->waiters--;
    }
    if (listed) {
        sync_waiter **pp = &s->sync_waiters;
        while (*pp != &me) {
            pp = &(*pp)->next;
        }
        *pp = me.next;
    }
    if (me.aborted) {
        rc = ACL_ERROR_RT_STREAM_ABORT;
    } else if (rc == ACL_SUCCESS && s->err != ACL_SUCCESS) {
        rc = s->err;
        if (consume_err && !stops_on_failure(s)) {
            s->err = ACL_SUCCESS;
        }
    }
    core_mutex_unlock(&s->mu);
    return rc;
}

/* An abort begins: the synchronize calls waiting for work it interrupts
 * return ACL_ERROR_RT_STREAM_ABORT. s->mu held. */
static void abort_waiters_locked(mock_stream *s)
{
    uint64_t done = atomic_load(&s->completed);
    for (sync_waiter *w = s->sync_waiters; w != NULL; w = w->next) {
        if (w->target > done) {
            w->aborted = true;
        }
    }
}

/* Discards every task submitted so far that has not started, asks a running
 * blocking task to give up, and waits until the worker has passed them. */
static void stream_abort(mock_stream *s)
{
    core_mutex_lock(&s->mu);
    uint64_t target = s->submitted;
    if (target > s->discard_until) {
        s->discard_until = target;
    }
    atomic_store(&s->abort_req, true);
    abort_waiters_locked(s);
    s->waiters++;
    while (atomic_load(&s->completed) < target) {
        core_cond_wait(&s->done_cv, &s->mu);
    }
    s->waiters--;
    atomic_store(&s->abort_req, false);
    s->err = ACL_SUCCESS;
    core_mutex_unlock(&s->mu);
}

/* --------------------------------------------------------- create/destroy */

/* Counts a new stream against its device's limit (the device's own stream included);
 * false when the device has no stream left. */
static bool slot_take(int32_t dev)
{
    uint32_t hidden = core_device_hidden_streams(dev);
    core_mutex_lock(&g_reg_mu);
    bool ok = g_live_per_dev[dev] + hidden < STREAM_MAX_PER_DEVICE;
    if (ok) {
        g_live_per_dev[dev]++;
    }
    core_mutex_unlock(&g_reg_mu);
    return ok;
}

static void slot_give(int32_t dev)
{
    core_mutex_lock(&g_reg_mu);
    g_live_per_dev[dev]--;
    core_mutex_unlock(&g_reg_mu);
}

/* Stops and joins the worker of a stream that was never published. */
static void worker_stop_join(mock_stream *s)
{
    core_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->work_cv);
    core_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
}

static aclError stream_new(const char *func, mock_context *ctx, uint32_t priority, uint32_t flags,
                           bool is_default, mock_stream **out)
{
    int32_t dev = core_ctx_device(ctx);
    if (dev < 0 || dev >= MOCK_MAX_DEVICES) {
        return core_error(func, ACL_ERROR_RT_INVALID_DEVICEID, "context has invalid device %d", dev);
    }
    mock_stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return core_error(func, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for a stream");
    }
    s->magic = STREAM_MAGIC;
    atomic_init(&s->refs, 1); /* the registry's reference */
    s->ctx = ctx;
    s->device = dev;
    s->priority = priority > STREAM_PRIORITY_LEAST ? STREAM_PRIORITY_LEAST : priority;
    s->flags = flags & STREAM_KNOWN_FLAGS;
    s->is_default = is_default;
    atomic_init(&s->failure_mode, ACL_CONTINUE_ON_FAILURE);
    atomic_init(&s->failure_mode_set, false);
    core_mutex_init(&s->mu, MOCK_LOCK_STREAM);
    core_cond_init(&s->work_cv);
    core_cond_init(&s->done_cv);

    if (!slot_take(dev)) {
        stream_free(s);
        return core_error(func, ACL_ERROR_RT_NO_STREAM_RESOURCE,
                          "device %d already has the maximum of %u streams", dev, STREAM_MAX_PER_DEVICE);
    }
    s->id = atomic_fetch_add(&g_next_id[dev], 1);
    int prc = pthread_create(&s->thread, NULL, worker_main, s);
    if (prc != 0) {
        slot_give(dev);
        stream_free(s);
        return core_error(func, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, "cannot start the stream worker thread: %s",
                          strerror(prc));
    }
    char name[16];
    snprintf(name, sizeof(name), "aclstrm%d.%d", dev, s->id);
    pthread_setname_np(s->thread, name);

    core_mutex_lock(&g_reg_mu);
    bool ok = core_registry_insert(&g_reg, s);
    core_mutex_unlock(&g_reg_mu);
    if (!ok) {
        worker_stop_join(s);
        slot_give(dev);
        stream_free(s);
        return core_error(func, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for the stream registry");
    }
    core_stat_add(dev, MOCK_STAT_STREAMS, 1);
    if (is_default) {
        core_stat_add(dev, MOCK_STAT_DEFAULT_STREAMS, 1);
    }
    /* Not for default streams: those come with aclrtSetDevice /
     * aclrtCreateContext, not with a stream creation of the program. */
    if (!is_default) {
        notify_state(s, ACL_RT_STREAM_STATE_CREATE_POST);
    }
    *out = s;
    return ACL_SUCCESS;
}

/* Caller has removed s from the registry (and owns the registry's reference).
 * A normal destroy drains the stream and joins its worker. A forced one
 * (aclrtDestroyStreamForce: "does not wait for pending tasks") discards what
 * has not started, interrupts a blocking task and returns at once: the worker
 * becomes an orphan that finishes its running task, then frees the stream
 * (the registry's reference moves to it). The caller must hold a reference of
 * its own across a forced teardown. */
static void stream_teardown(mock_stream *s, bool force)
{
    if (!s->is_default) {
        notify_state(s, ACL_RT_STREAM_STATE_DESTROY_PRE);
    }
    /* Pending host callbacks are part of the pending work a normal destroy
     * waits for, so subscriptions go only after the drain - unless nobody
     * could run them: a forced destroy, or the caller is the very thread that
     * processes this stream's reports (it would wait for itself). */
    bool cancel_first = force || stream_callbacks_served_by_caller(s);
    if (cancel_first) {
        stream_callbacks_stream_gone(s);
    }
    if (force) {
        pthread_once(&g_orphan_once, orphan_cv_init);
        core_mutex_lock(&g_reg_mu);
        s->orphan_next = g_orphans;
        g_orphans = s;
        core_mutex_unlock(&g_reg_mu);
    }
    core_mutex_lock(&s->mu);
    if (force) {
        s->discard_until = UINT64_MAX;
        atomic_store(&s->abort_req, true);
        abort_waiters_locked(s);
        s->orphaned = true;
    }
    s->stopping = true;
    pthread_t worker = s->thread;
    pthread_cond_signal(&s->work_cv);
    core_mutex_unlock(&s->mu);
    if (force) {
        pthread_detach(worker);
    } else {
        pthread_join(worker, NULL);
    }
    release_captured(s);
    if (!cancel_first) {
        stream_callbacks_stream_gone(s);
    }
    if (!force && core_observing()) {
        /* a destroy that drained the stream: the host has seen every task of it complete
         * (race sanitizer: what the host does next is ordered after them); `flag`: no
         * host wait is modeled for it (timing model) */
        core_obs o = {0};
        o.kind = CORE_OBS_SYNC_STREAM;
        o.stream = s;
        o.device = s->device;
        o.flag = true;
        (void)core_observe(&o);
    }
    core_subsystems_stream_destroyed(s); /* e.g. the allocator registered on it */
    core_stat_add(s->device, MOCK_STAT_STREAMS, -1);
    if (s->is_default) {
        core_stat_add(s->device, MOCK_STAT_DEFAULT_STREAMS, -1);
    }
    if (!force) {
        stream_put(s);
    }
}

/* Waits until no orphan of `ctx` is left (their workers have exited), for at
 * most timeout_ms (< 0: forever). false on timeout. */
static bool wait_orphans(const mock_context *ctx, int64_t timeout_ms)
{
    pthread_once(&g_orphan_once, orphan_cv_init);
    struct timespec dl_buf;
    const struct timespec *dl = core_deadline_opt(timeout_ms, &dl_buf);
    bool ok = true;
    core_mutex_lock(&g_reg_mu);
    for (;;) {
        bool any = false;
        for (mock_stream *o = g_orphans; o != NULL && !any; o = o->orphan_next) {
            any = o->ctx == ctx;
        }
        if (!any) {
            break;
        }
        if (core_cond_wait_until(&g_orphan_cv, &g_reg_mu, dl) == ETIMEDOUT) {
            ok = false;
            for (mock_stream *o = g_orphans; o != NULL && ok; o = o->orphan_next) {
                ok = o->ctx != ctx;
            }
            break;
        }
    }
    core_mutex_unlock(&g_reg_mu);
    return ok;
}

/* Removes s from the registry; false if it was not there (already gone). */
static bool stream_unregister(mock_stream *s)
{
    core_mutex_lock(&g_reg_mu);
    bool found = reg_find(s) == s;
    if (found) {
        core_registry_erase(&g_reg, s);
        g_live_per_dev[s->device]--;
    }
    core_mutex_unlock(&g_reg_mu);
    return found;
}

mock_stream *stream_create_default(mock_context *ctx)
{
    mock_stream *s = NULL;
    if (stream_new("aclrtSetDevice", ctx, 0, 0, true, &s) != ACL_SUCCESS) {
        return NULL;
    }
    return s;
}

void stream_destroy_default(mock_stream *s)
{
    if (s == NULL || !stream_unregister(s)) {
        return;
    }
    stream_teardown(s, false);
}

/* Collects referenced streams of ctx (default one included if asked). */
static mock_stream **collect_ctx(mock_context *ctx, bool with_default, bool unregister, size_t *n)
{
    core_mutex_lock(&g_reg_mu);
    mock_stream **v = malloc((g_reg.count + 1) * sizeof(*v));
    size_t k = 0;
    if (v != NULL) {
        for (size_t i = 0; i < g_reg.cap; i++) {
            mock_stream *e = core_registry_slot(&g_reg, i);
            if (e == NULL || e->ctx != ctx || (e->is_default && !with_default)) {
                continue;
            }
            if (!unregister) {
                stream_ref(e);
            }
            v[k++] = e;
        }
        /* erase after the walk: erasing moves entries between slots */
        for (size_t i = 0; unregister && i < k; i++) {
            core_registry_erase(&g_reg, v[i]);
            g_live_per_dev[v[i]->device]--;
        }
    }
    core_mutex_unlock(&g_reg_mu);
    *n = k;
    return v;
}

aclError stream_sync_context(mock_context *ctx, int64_t timeout_ms)
{
    size_t n;
    mock_stream **v = collect_ctx(ctx, true, false, &n);
    if (v == NULL) {
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    uint64_t t0 = core_now_ns();
    aclError first = ACL_SUCCESS;
    for (size_t i = 0; i < n; i++) {
        int64_t left = -1;
        if (timeout_ms >= 0) {
            int64_t spent = (int64_t)((core_now_ns() - t0) / 1000000u);
            left = spent >= timeout_ms ? 0 : timeout_ms - spent;
        }
        aclError rc = first == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT ? ACL_SUCCESS : stream_wait(v[i], left, true);
        if (rc != ACL_SUCCESS && first == ACL_SUCCESS) {
            first = rc;
        }
        stream_put(v[i]);
    }
    free(v);
    /* Tasks still running on streams destroyed by force are work of the
     * device too. */
    if (first != ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
        int64_t left = -1;
        if (timeout_ms >= 0) {
            int64_t spent = (int64_t)((core_now_ns() - t0) / 1000000u);
            left = spent >= timeout_ms ? 0 : timeout_ms - spent;
        }
        if (!wait_orphans(ctx, left) && first == ACL_SUCCESS) {
            first = ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
        }
    }
    return first;
}

void stream_abort_context(mock_context *ctx)
{
    size_t n;
    mock_stream **v = collect_ctx(ctx, true, false, &n);
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (core_worker_stream() != v[i]) {
            stream_abort(v[i]);
        }
        stream_put(v[i]);
    }
    free(v);
}

void stream_destroy_context(mock_context *ctx)
{
    size_t n;
    mock_stream **v = collect_ctx(ctx, false, true, &n);
    if (v != NULL) {
        for (size_t i = 0; i < n; i++) {
            stream_teardown(v[i], false);
        }
        free(v);
    }
    /* Orphaned workers still refer to their context until they exit. */
    (void)wait_orphans(ctx, -1);
}

/* ---------------------------------------------------------------- resolve */

/* `p` as a live stream with a reference taken, or NULL. */
static mock_stream *lookup_ref(const void *p)
{
    core_mutex_lock(&g_reg_mu);
    mock_stream *s = p != NULL ? reg_find(p) : NULL;
    if (s != NULL && s->magic == STREAM_MAGIC) {
        stream_ref(s);
    } else {
        s = NULL;
    }
    core_mutex_unlock(&g_reg_mu);
    return s;
}

aclError stream_get(const char *func, aclrtStream handle, bool submit, mock_stream **out)
{
    mock_stream *s;
    if (handle == NULL) {
        mock_context *ctx = NULL;
        aclError rc = core_ctx_require(func, &ctx);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
        s = lookup_ref(core_ctx_default_stream(ctx));
        if (s == NULL) {
            return core_error(func, ACL_ERROR_RT_CONTEXT_NULL, "current context has no default stream");
        }
    } else {
        s = lookup_ref(handle);
        if (s == NULL) {
            return core_error(func, ACL_ERROR_RT_PARAM_INVALID,
                              "argument 'stream' (%p) is not a live stream handle", handle);
        }
        if (submit) {
            /* Submitting work needs the stream's device to be current: the
             * runtime checks the stream's context against the thread's
             * (RT rt api_impl.cc CHECK_CONTEXT_VALID_WITH_RETURN -> 107002;
             * "stream not in current context" -> ACL_ERROR_RT_STREAM_CONTEXT).
             * We compare devices, not contexts, so that threads sharing a
             * device through different contexts keep working. */
            mock_context *cur = core_ctx_current();
            if (cur == NULL) {
                stream_put(s);
                return core_error(func, ACL_ERROR_RT_CONTEXT_NULL,
                                  "no current context on this thread (call aclrtSetDevice first)");
            }
            if (core_ctx_device(cur) != s->device) {
                int32_t cd = core_ctx_device(cur);
                stream_put(s);
                return core_error(func, ACL_ERROR_RT_STREAM_CONTEXT,
                                  "argument 'stream' belongs to device %d but the current device is %d",
                                  s->device, cd);
            }
        }
    }
    aclError lost = core_device_lost_code(s->device);
    if (lost != ACL_SUCCESS) {
        stream_put(s);
        return core_error(func, lost, "device %d of the stream is lost", s->device);
    }
    if (submit && s->is_default && stream_capture_any()) {
        /* 107031: the default stream used while a capture is active */
        aclError rc = stream_capture_check(func, STREAM_CALL_DEFAULT_STREAM, s, NULL);
        if (rc != ACL_SUCCESS) {
            stream_put(s);
            return rc;
        }
    }
    *out = s;
    return ACL_SUCCESS;
}

aclError stream_resolve(const char *func, aclrtStream handle, mock_stream **out)
{
    mock_stream *s = NULL;
    aclError rc = stream_get(func, handle, true, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* The registry keeps the stream alive until it is destroyed; using it
     * concurrently with its destruction is a caller bug (as on hardware). */
    stream_put(s);
    *out = s;
    return ACL_SUCCESS;
}

/* ======================================================== public: create */

/* Shared body of aclrtCreateStream{,WithConfig,V2} (arguments checked by the caller):
 * fault hook, current context, a new stream of it with priority/flag, or with those of
 * `cfg` when it is not NULL (read only after the fault hook). Unknown flag bits are
 * ignored and priorities above the least one are clamped (RT impl stream.cpp; acl_abi.md
 * §1.4 notes). */
static aclError create_in_current(const char *fn, uint32_t priority, uint32_t flag,
                                  const aclrtStreamConfigHandle *cfg, aclrtStream *stream)
{
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (cfg != NULL) {
        priority = cfg->priority;
        flag = (uint32_t)cfg->flag;
    }
    mock_stream *s = NULL;
    rc = stream_new(fn, ctx, priority, flag, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *stream = s;
    return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream *stream)
{
    MOCK_REQUIRE_NONNULL("aclrtCreateStream", stream);
    return create_in_current("aclrtCreateStream", 0, 0, NULL, stream);
}

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag)
{
    MOCK_REQUIRE_NONNULL("aclrtCreateStreamWithConfig", stream);
    return create_in_current("aclrtCreateStreamWithConfig", priority, flag, NULL, stream);
}

/* Stream config handles (lite runtime API). We remember the handles we
 * allocated so that destroying a foreign pointer is refused, not freed. */
static mock_mutex g_cfg_mu = MOCK_MUTEX_INIT(MOCK_LOCK_STREAM_CONFIGS);
static aclrtStreamConfigHandle **g_cfgs;
static size_t g_ncfg, g_capcfg;

aclrtStreamConfigHandle *aclrtCreateStreamConfigHandle(void)
{
    static const char fn[] = "aclrtCreateStreamConfigHandle";
    if (core_fault_check(fn) != ACL_SUCCESS) {
        return NULL;
    }
    aclrtStreamConfigHandle *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    core_mutex_lock(&g_cfg_mu);
    bool room = g_ncfg < g_capcfg;
    if (!room) {
        size_t nc = g_capcfg ? g_capcfg * 2 : 16;
        aclrtStreamConfigHandle **nv = realloc(g_cfgs, nc * sizeof(*nv));
        if (nv != NULL) {
            g_cfgs = nv;
            g_capcfg = nc;
            room = true;
        }
    }
    if (room) {
        g_cfgs[g_ncfg++] = h;
    }
    core_mutex_unlock(&g_cfg_mu);
    if (!room) {
        free(h);
        core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
        return NULL;
    }
    return h;
}

aclError aclrtDestroyStreamConfigHandle(aclrtStreamConfigHandle *handle)
{
    static const char fn[] = "aclrtDestroyStreamConfigHandle";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    core_mutex_lock(&g_cfg_mu);
    for (size_t i = 0; i < g_ncfg; i++) {
        if (g_cfgs[i] == handle) {
            g_cfgs[i] = g_cfgs[--g_ncfg];
            core_mutex_unlock(&g_cfg_mu);
            free(handle);
            return ACL_SUCCESS;
        }
    }
    core_mutex_unlock(&g_cfg_mu);
    return core_error(fn, ACL_ERROR_INVALID_PARAM,
                      "argument 'handle' (%p) was not created by aclrtCreateStreamConfigHandle", (void *)handle);
}

aclError aclrtSetStreamConfigOpt(aclrtStreamConfigHandle *handle, aclrtStreamConfigAttr attr, const void *attrValue,
                                 size_t valueSize)
{
    static const char fn[] = "aclrtSetStreamConfigOpt";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_REQUIRE_NONNULL(fn, attrValue);
    switch (attr) {
    case ACL_RT_STREAM_WORK_ADDR_PTR:
        if (valueSize != sizeof(void *)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'valueSize' is %zu, expected %zu for WORK_ADDR_PTR",
                              valueSize, sizeof(void *));
        }
        break;
    case ACL_RT_STREAM_WORK_SIZE:
        if (valueSize != sizeof(size_t)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'valueSize' is %zu, expected %zu for WORK_SIZE",
                              valueSize, sizeof(size_t));
        }
        break;
    case ACL_RT_STREAM_FLAG:
    case ACL_RT_STREAM_PRIORITY:
        if (valueSize != sizeof(uint32_t)) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'valueSize' is %zu, expected %zu",
                              valueSize, sizeof(uint32_t));
        }
        break;
    default:
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'attr' has invalid value %d", (int)attr);
    }
    MOCK_ENTER(fn);
    switch (attr) {
    case ACL_RT_STREAM_WORK_ADDR_PTR:
        memcpy(&handle->workptr, attrValue, sizeof(void *));
        break;
    case ACL_RT_STREAM_WORK_SIZE:
        memcpy(&handle->workSize, attrValue, sizeof(size_t));
        break;
    case ACL_RT_STREAM_FLAG: {
        uint32_t v;
        memcpy(&v, attrValue, sizeof(v));
        handle->flag = v;
        break;
    }
    default: {
        uint32_t v;
        memcpy(&v, attrValue, sizeof(v));
        handle->priority = v;
        break;
    }
    }
    return ACL_SUCCESS;
}

aclError aclrtCreateStreamV2(aclrtStream *stream, const aclrtStreamConfigHandle *handle)
{
    static const char fn[] = "aclrtCreateStreamV2";
    MOCK_REQUIRE_NONNULL(fn, stream);
    MOCK_REQUIRE_NONNULL(fn, handle);
    return create_in_current(fn, 0, 0, handle, stream);
}

static aclError destroy_common(const char *fn, aclrtStream stream, bool force)
{
    if (stream == NULL) {
        /* acl_abi.md §5.4: aclrtDestroyStream(NULL) -> ACL_ERROR_INVALID_PARAM */
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'stream' is NULL (the default stream cannot be destroyed)");
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (s->is_default) {
        stream_put(s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'stream' is a default stream; it is released by aclrtResetDevice");
    }
    if (core_worker_stream() == s) {
        stream_put(s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "a stream cannot be destroyed from its own task");
    }
    if (!stream_unregister(s)) {
        stream_put(s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'stream' is already being destroyed");
    }
    stream_teardown(s, force);
    stream_put(s);
    return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream)
{
    return destroy_common("aclrtDestroyStream", stream, false);
}

aclError aclrtDestroyStreamForce(aclrtStream stream)
{
    return destroy_common("aclrtDestroyStreamForce", stream, true);
}

/* ========================================================== public: sync */

static aclError sync_common(const char *fn, aclrtStream stream, int64_t timeout_ms)
{
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (core_worker_stream() == s) {
        stream_put(s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "synchronizing a stream from one of its own tasks would deadlock");
    }
    if (atomic_load(&s->binding) != NULL) {
        rc = stream_capture_check(fn, STREAM_CALL_SYNC_STREAM, s, NULL); /* 107041 while capturing */
        if (rc != ACL_SUCCESS) {
            stream_put(s);
            return rc;
        }
    }
    rc = stream_wait(s, timeout_ms, true);
    if (rc == ACL_SUCCESS && core_observing()) {
        core_observe_simple(CORE_OBS_SYNC_STREAM, s, NULL, NULL, 0, s->device);
    }
    char why[STREAM_ERR_MSG];
    err_msg_copy(s, rc, why);
    stream_put(s);
    if (rc == ACL_ERROR_RT_STREAM_SYNC_TIMEOUT) {
        return core_error(fn, rc, "stream not complete after %lld ms", (long long)timeout_ms);
    }
    if (rc == ACL_ERROR_RT_STREAM_ABORT) {
        return core_error(fn, rc, "the stream was aborted while this call waited for it");
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "a task on the stream failed with error %d%s", rc, why);
    }
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeStream(aclrtStream stream)
{
    return core_sync_with_timeout("aclrtSynchronizeStream", stream, -1, sync_common);
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)
{
    return core_sync_with_timeout("aclrtSynchronizeStreamWithTimeout", stream, timeout, sync_common);
}

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)
{
    static const char fn[] = "aclrtStreamQuery";
    MOCK_REQUIRE_NONNULL(fn, status);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (atomic_load(&s->binding) != NULL) {
        rc = stream_capture_check(fn, STREAM_CALL_SYNC_STREAM, s, NULL); /* 107041 while capturing */
        if (rc != ACL_SUCCESS) {
            stream_put(s);
            return rc;
        }
    }
    core_mutex_lock(&s->mu);
    bool done = atomic_load(&s->completed) >= s->submitted;
    aclError err = s->err;
    core_mutex_unlock(&s->mu);
    if (done && err == ACL_SUCCESS && core_observing()) {
        core_observe_simple(CORE_OBS_SYNC_STREAM, s, NULL, NULL, 0, s->device);
    }
    char why[STREAM_ERR_MSG];
    err_msg_copy(s, err, why);
    stream_put(s);
    if (err != ACL_SUCCESS) {
        return core_error(fn, err, "a task on the stream failed with error %d%s", err, why);
    }
    *status = done ? ACL_STREAM_STATUS_COMPLETE : ACL_STREAM_STATUS_NOT_READY;
    return ACL_SUCCESS;
}

/* ====================================================== public: attributes */

aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)
{
    static const char fn[] = "aclrtSetStreamFailureMode";
    if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'mode' is %llu (expected 0 or 1)",
                          (unsigned long long)mode);
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = set_failure_mode(fn, s, mode);
    stream_put(s);
    return rc;
}

typedef enum { STREAM_FIELD_ID, STREAM_FIELD_PRIORITY, STREAM_FIELD_FLAGS } stream_field;

/* Shared body of aclrtStreamGet{Id,Priority,Flags} (the caller has checked `out`):
 * fault hook, validate the stream, read the field under the stream lock. */
static aclError read_stream_field(const char *fn, aclrtStream stream, stream_field which, void *out)
{
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&s->mu);
    switch (which) {
    case STREAM_FIELD_ID:
        *(int32_t *)out = s->id;
        break;
    case STREAM_FIELD_PRIORITY:
        *(uint32_t *)out = s->priority;
        break;
    case STREAM_FIELD_FLAGS:
        *(uint32_t *)out = s->flags;
        break;
    }
    core_mutex_unlock(&s->mu);
    stream_put(s);
    return ACL_SUCCESS;
}

aclError aclrtStreamGetId(aclrtStream stream, int32_t *streamId)
{
    MOCK_REQUIRE_NONNULL("aclrtStreamGetId", streamId);
    return read_stream_field("aclrtStreamGetId", stream, STREAM_FIELD_ID, streamId);
}

aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t *priority)
{
    MOCK_REQUIRE_NONNULL("aclrtStreamGetPriority", priority);
    return read_stream_field("aclrtStreamGetPriority", stream, STREAM_FIELD_PRIORITY, priority);
}

aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t *flags)
{
    MOCK_REQUIRE_NONNULL("aclrtStreamGetFlags", flags);
    return read_stream_field("aclrtStreamGetFlags", stream, STREAM_FIELD_FLAGS, flags);
}

/* Set or get (the value zeroed first) of an attribute kept in an atomic of the stream;
 * `member` is the attribute's field of *value. */
static void attr_atomic_u32(bool set, atomic_uint *field, aclrtStreamAttrValue *value, uint32_t *member)
{
    if (set) {
        atomic_store(field, *member);
        return;
    }
    memset(value, 0, sizeof(*value));
    *member = atomic_load(field);
}

static aclError attr_common(const char *fn, aclrtStream stream, aclrtStreamAttr attr, aclrtStreamAttrValue *value,
                            bool set)
{
    MOCK_REQUIRE_NONNULL(fn, value);
    if (attr < ACL_STREAM_ATTR_FAILURE_MODE || attr > ACL_STREAM_ATTR_PRIORITY) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'stmAttrType' has invalid value %d", (int)attr);
    }
    if (set && attr == ACL_STREAM_ATTR_FAILURE_MODE && value->failureMode != ACL_CONTINUE_ON_FAILURE &&
        value->failureMode != ACL_STOP_ON_FAILURE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "failureMode %llu is not 0 or 1",
                          (unsigned long long)value->failureMode);
    }
    if (set && (attr == ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK || attr == ACL_STREAM_ATTR_CACHE_OP_INFO) &&
        value->overflowSwitch > 1) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "switch value %u is not 0 or 1", value->overflowSwitch);
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    switch (attr) {
    case ACL_STREAM_ATTR_FAILURE_MODE:
        if (set) {
            rc = set_failure_mode(fn, s, value->failureMode);
        } else {
            memset(value, 0, sizeof(*value));
            value->failureMode = stops_on_failure(s) ? ACL_STOP_ON_FAILURE : ACL_CONTINUE_ON_FAILURE;
        }
        break;
    case ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK:
        attr_atomic_u32(set, &s->overflow_switch, value, &value->overflowSwitch);
        break;
    case ACL_STREAM_ATTR_USER_CUSTOM_TAG:
        attr_atomic_u32(set, &s->user_tag, value, &value->userCustomTag);
        break;
    case ACL_STREAM_ATTR_CACHE_OP_INFO:
        attr_atomic_u32(set, &s->cache_op_info, value, &value->cacheOpInfoSwitch);
        break;
    default: /* ACL_STREAM_ATTR_PRIORITY */
        core_mutex_lock(&s->mu);
        if (set) {
            s->priority = value->streamPriority > STREAM_PRIORITY_LEAST ? STREAM_PRIORITY_LEAST : value->streamPriority;
        } else {
            memset(value, 0, sizeof(*value));
            value->streamPriority = s->priority;
        }
        core_mutex_unlock(&s->mu);
        break;
    }
    stream_put(s);
    return rc;
}

aclError aclrtSetStreamAttribute(aclrtStream stream, aclrtStreamAttr stmAttrType, aclrtStreamAttrValue *value)
{
    return attr_common("aclrtSetStreamAttribute", stream, stmAttrType, value, true);
}

aclError aclrtGetStreamAttribute(aclrtStream stream, aclrtStreamAttr stmAttrType, aclrtStreamAttrValue *value)
{
    return attr_common("aclrtGetStreamAttribute", stream, stmAttrType, value, false);
}

/* ================================================= public: abort / stop */

static aclError abort_common(const char *fn, aclrtStream stream)
{
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (core_worker_stream() == s) {
        stream_put(s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "a stream cannot be aborted from its own task");
    }
    stream_abort(s);
    stream_put(s);
    return ACL_SUCCESS;
}

/* aclrtStreamAbort: discard the tasks not yet executed, interrupt a waiting
 * task; the stream stays usable and its error state is cleared (fault
 * recovery path, doc 06_stream_management.md). */
aclError aclrtStreamAbort(aclrtStream stream)
{
    MOCK_REQUIRE_NONNULL("aclrtStreamAbort", stream);
    return abort_common("aclrtStreamAbort", stream);
}

/* aclrtStreamStop: stop the stream's task execution. Simulated like abort:
 * pending tasks are dropped and the stream can be reused afterwards. */
aclError aclrtStreamStop(aclrtStream stream)
{
    MOCK_REQUIRE_NONNULL("aclrtStreamStop", stream);
    return abort_common("aclrtStreamStop", stream);
}

/* aclrtPersistentTaskClean: drops the tasks a persistent stream keeps, without running
 * them (what its destruction does), so the stream can be filled anew. Mock choice: a
 * stream not created with ACL_STREAM_PERSISTENT is 107000 (it keeps no tasks). */
aclError aclrtPersistentTaskClean(aclrtStream stream)
{
    static const char fn[] = "aclrtPersistentTaskClean";
    MOCK_REQUIRE_NONNULL(fn, stream);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if ((s->flags & ACL_STREAM_PERSISTENT) == 0) {
        stream_put(s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the stream was not created with ACL_STREAM_PERSISTENT: it keeps no tasks");
    }
    release_captured(s);
    stream_put(s);
    return ACL_SUCCESS;
}

/* ============================================ public: counts and callbacks */

aclError aclrtGetThreadLastTaskId(uint32_t *taskId)
{
    static const char fn[] = "aclrtGetThreadLastTaskId";
    MOCK_REQUIRE_NONNULL(fn, taskId);
    MOCK_ENTER(fn);
    /* A thread that has not submitted any task yet gets 0. */
    *taskId = tls_has_task ? tls_last_task_id : 0;
    return ACL_SUCCESS;
}

aclError aclrtGetStreamAvailableNum(uint32_t *streamCount)
{
    static const char fn[] = "aclrtGetStreamAvailableNum";
    MOCK_REQUIRE_NONNULL(fn, streamCount);
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = core_ctx_device(ctx);
    core_mutex_lock(&g_reg_mu);
    uint32_t used = (dev >= 0 && dev < MOCK_MAX_DEVICES) ? g_live_per_dev[dev] : 0;
    core_mutex_unlock(&g_reg_mu);
    used += core_device_hidden_streams(dev);
    *streamCount = used >= STREAM_MAX_PER_DEVICE ? 0 : STREAM_MAX_PER_DEVICE - used;
    return ACL_SUCCESS;
}

aclError aclrtRegStreamStateCallback(const char *regName, aclrtStreamStateCallback callback, void *args)
{
    static const char fn[] = "aclrtRegStreamStateCallback";
    MOCK_REQUIRE_NONNULL(fn, regName);
    size_t len = strnlen(regName, 64);
    if (len == 0 || len >= 64) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'regName' must be 1..63 characters");
    }
    MOCK_ENTER(fn);
    core_mutex_lock(&g_state_mu);
    size_t i;
    for (i = 0; i < g_state_n; i++) {
        if (strcmp(g_state_cbs[i].name, regName) == 0) {
            break;
        }
    }
    bool full = false;
    if (callback == NULL) { /* NULL callback unregisters the name */
        if (i < g_state_n) {
            g_state_cbs[i] = g_state_cbs[--g_state_n];
        }
    } else if (i == g_state_n && g_state_n == STATE_CB_MAX) {
        full = true;
    } else {
        if (i == g_state_n) {
            g_state_n++;
        }
        memcpy(g_state_cbs[i].name, regName, len + 1);
        g_state_cbs[i].fn = callback;
        g_state_cbs[i].args = args;
    }
    core_mutex_unlock(&g_state_mu);
    if (full) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "too many stream state callbacks (max %d)", STATE_CB_MAX);
    }
    return ACL_SUCCESS;
}

/* ================================================= public: resource limits */

/* Default limits when the device layer cannot tell us (Ascend910B1: 24 AI
 * cores = cube cores, 48 vector cores). */
static uint32_t device_res_limit(int32_t dev, aclrtDevResLimitType type)
{
    uint32_t v = 0;
    if (aclrtGetDeviceResLimit(dev, type, &v) == ACL_SUCCESS && v != 0) {
        return v;
    }
    return type == ACL_RT_DEV_RES_CUBE_CORE ? 24u : 48u;
}

static aclError check_res_type(const char *fn, aclrtDevResLimitType type)
{
    if (type != ACL_RT_DEV_RES_CUBE_CORE && type != ACL_RT_DEV_RES_VECTOR_CORE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'type' has invalid value %d", (int)type);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetStreamResLimit(aclrtStream stream, aclrtDevResLimitType type, uint32_t *value)
{
    static const char fn[] = "aclrtGetStreamResLimit";
    MOCK_REQUIRE_NONNULL(fn, value);
    aclError rc = check_res_type(fn, type);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    uint32_t v = atomic_load(&s->res_limit[type]);
    *value = v != 0 ? v : device_res_limit(s->device, type);
    stream_put(s);
    return ACL_SUCCESS;
}

aclError aclrtSetStreamResLimit(aclrtStream stream, aclrtDevResLimitType type, uint32_t value)
{
    static const char fn[] = "aclrtSetStreamResLimit";
    aclError rc = check_res_type(fn, type);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    uint32_t lim = device_res_limit(s->device, type);
    if (value == 0 || value > lim) {
        stream_put(s);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'value' is %u, must be in [1, %u]", value, lim);
    }
    atomic_store(&s->res_limit[type], value);
    stream_put(s);
    return ACL_SUCCESS;
}

aclError aclrtResetStreamResLimit(aclrtStream stream)
{
    static const char fn[] = "aclrtResetStreamResLimit";
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    for (int i = 0; i < RES_TYPES; i++) {
        atomic_store(&s->res_limit[i], 0u);
    }
    stream_put(s);
    return ACL_SUCCESS;
}

/* The stream whose resource limits the calling thread uses, by id: the
 * thread keeps no reference, so a destroyed stream simply stops applying. */
static _Thread_local mock_stream *tls_res_stream;

aclError aclrtUseStreamResInCurrentThread(aclrtStream stream)
{
    static const char fn[] = "aclrtUseStreamResInCurrentThread";
    MOCK_REQUIRE_NONNULL(fn, stream);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    tls_res_stream = s;
    stream_put(s);
    return ACL_SUCCESS;
}

aclError aclrtUnuseStreamResInCurrentThread(aclrtStream stream)
{
    static const char fn[] = "aclrtUnuseStreamResInCurrentThread";
    MOCK_REQUIRE_NONNULL(fn, stream);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    stream_put(s);
    if (tls_res_stream != s) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'stream' is not the stream used by aclrtUseStreamResInCurrentThread");
    }
    tls_res_stream = NULL;
    return ACL_SUCCESS;
}

aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value)
{
    static const char fn[] = "aclrtGetResInCurrentThread";
    MOCK_REQUIRE_NONNULL(fn, value);
    aclError rc = check_res_type(fn, type);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    if (tls_res_stream != NULL) {
        core_mutex_lock(&g_reg_mu);
        s = reg_find(tls_res_stream);
        if (s != NULL) {
            stream_ref(s);
        } else {
            tls_res_stream = NULL;
        }
        core_mutex_unlock(&g_reg_mu);
    }
    if (s != NULL) {
        uint32_t v = atomic_load(&s->res_limit[type]);
        *value = v != 0 ? v : device_res_limit(s->device, type);
        stream_put(s);
        return ACL_SUCCESS;
    }
    mock_context *ctx = NULL;
    rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *value = device_res_limit(core_ctx_device(ctx), type);
    return ACL_SUCCESS;
}
