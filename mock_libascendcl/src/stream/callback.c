/*
 * callback.c - host callbacks (aclrtSubscribeReport / aclrtProcessReport /
 * aclrtLaunchCallback / aclrtUnSubscribeReport) and host functions
 * (aclrtLaunchHostFunc + aclrtSubscribe/Process/UnSubscribeHostFunc),
 * acl_abi.md §5.7.
 *
 * A subscription binds one stream to one user thread, identified by its
 * pthread_t cast to uint64_t (aclrtProcessReport identifies its caller with
 * pthread_self(): RT rt osal.cc PidTidFetcher::GetCurrentUserTid). A stream
 * has at most one thread per kind; a thread may serve several streams (of one
 * device). When the stream's worker reaches a callback task it queues a report
 * on the subscribed thread's list; the thread runs it inside
 * aclrtProcessReport. With ACL_CALLBACK_BLOCK the worker waits until the
 * callback returned, so later tasks of the stream wait too.
 *
 * Host funcs follow the same protocol with their own subscription table; a
 * host func launched on a stream without a host-func subscriber runs on the
 * runtime-owned stream worker thread, blocking the stream until it returns.
 *
 * One mutex guards all of it: callbacks are rare next to stream tasks, and
 * no lock is held while user code runs.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "stream/stream_private.h"

enum { KIND_REPORT = 0, KIND_HOSTFUNC = 1, KIND_COUNT = 2 };
/* "max 1024 subscribed threads per process" (§5.7) */
#define MAX_SUB_THREADS 1024

/* REP_RELEASED: still running on the subscribed thread, but that thread is
 * tearing the stream down from inside the callback, so the worker stops
 * waiting for it (it would wait for the teardown that waits for the worker). */
enum { REP_QUEUED = 0, REP_RUNNING, REP_DONE, REP_CANCELLED, REP_RELEASED };

typedef struct report {
    struct report *next;
    aclrtCallback fn;
    void *user;
    bool block;
    int state;
    int refs;            /* guarded by g_cb_mu */
    mock_stream *stream; /* identity only (never dereferenced here) */
    pthread_cond_t done_cv;
} report;

typedef struct subscriber {
    struct subscriber *next;
    int kind;
    uint64_t tid;
    int32_t device;
    int nstreams;
    int refs; /* table + threads inside Process* */
    report *head, *tail;
    report *running; /* the report its thread is running now, or NULL */
    pthread_cond_t cv;
} subscriber;

typedef struct binding {
    struct binding *next;
    int kind;
    mock_stream *stream;
    subscriber *sub;
} binding;

static mock_mutex g_cb_mu = MOCK_MUTEX_INIT(MOCK_LOCK_CALLBACKS);
static subscriber *g_subs;
static binding *g_binds;
static int g_nsubs[KIND_COUNT];

static const char *const k_process_fn[KIND_COUNT] = {"aclrtProcessReport", "aclrtProcessHostFunc"};

/* ---------------------------------------------------------------- helpers */

static subscriber *find_sub(int kind, uint64_t tid)
{
    for (subscriber *u = g_subs; u != NULL; u = u->next) {
        if (u->kind == kind && u->tid == tid) {
            return u;
        }
    }
    return NULL;
}

static binding *find_bind(int kind, const mock_stream *s)
{
    for (binding *b = g_binds; b != NULL; b = b->next) {
        if (b->kind == kind && b->stream == s) {
            return b;
        }
    }
    return NULL;
}

static void sub_put_locked(subscriber *u)
{
    if (--u->refs == 0) {
        pthread_cond_destroy(&u->cv);
        free(u);
    }
}

static void report_put_locked(report *r)
{
    if (--r->refs == 0) {
        pthread_cond_destroy(&r->done_cv);
        free(r);
    }
}

/* Removes u from the subscriber list (when its last stream goes). */
static void sub_unlink_locked(subscriber *u)
{
    for (subscriber **pp = &g_subs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == u) {
            *pp = u->next;
            g_nsubs[u->kind]--;
            pthread_cond_broadcast(&u->cv); /* wake a thread inside Process* */
            sub_put_locked(u);
            return;
        }
    }
}

/* Cancels the queued (not yet running) reports of stream s on u (all of
 * them if s is NULL), waking blocked workers. */
static void cancel_queued_locked(subscriber *u, const mock_stream *s)
{
    report **pp = &u->head;
    u->tail = NULL;
    while (*pp != NULL) {
        report *r = *pp;
        if (s == NULL || r->stream == s) {
            *pp = r->next;
            r->state = REP_CANCELLED;
            pthread_cond_broadcast(&r->done_cv);
            report_put_locked(r);
        } else {
            u->tail = r;
            pp = &r->next;
        }
    }
}

/* Drops binding b (g_cb_mu held). */
static void unbind_locked(binding *b)
{
    for (binding **pp = &g_binds; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == b) {
            *pp = b->next;
            break;
        }
    }
    subscriber *u = b->sub;
    cancel_queued_locked(u, b->stream);
    free(b);
    if (--u->nstreams == 0) {
        sub_unlink_locked(u);
    }
}

void stream_callbacks_stream_gone(mock_stream *s)
{
    uint64_t self = (uint64_t)pthread_self();
    core_mutex_lock(&g_cb_mu);
    for (int k = 0; k < KIND_COUNT; k++) {
        binding *b = find_bind(k, s);
        if (b == NULL) {
            continue;
        }
        /* Called from inside a blocking callback of s (its thread destroys the
         * stream or releases its device/context): the worker waits for that
         * callback, and the teardown waits for the worker. Release the worker;
         * the callback simply finishes later. */
        report *r = b->sub->running;
        if (b->sub->tid == self && r != NULL && r->stream == s && r->state == REP_RUNNING) {
            r->state = REP_RELEASED;
            pthread_cond_broadcast(&r->done_cv);
        }
        unbind_locked(b);
    }
    core_mutex_unlock(&g_cb_mu);
}

bool stream_callbacks_served_by_caller(const mock_stream *s)
{
    uint64_t self = (uint64_t)pthread_self();
    bool served = false;
    core_mutex_lock(&g_cb_mu);
    for (int k = 0; k < KIND_COUNT && !served; k++) {
        binding *b = find_bind(k, s);
        served = b != NULL && b->sub->tid == self;
    }
    core_mutex_unlock(&g_cb_mu);
    return served;
}

void stream_callbacks_finalize(void)
{
    core_mutex_lock(&g_cb_mu);
    while (g_binds != NULL) {
        unbind_locked(g_binds);
    }
    core_mutex_unlock(&g_cb_mu);
}

/* -------------------------------------------------- stream-side delivery */

/* Runs on the stream worker: hands the callback to the subscribed thread and,
 * for a blocking one, waits until it ran. Returns false, queueing nothing, if
 * the stream has no subscriber (any more) for `kind`. */
static bool deliver(int kind, report *r, mock_stream *s)
{
    core_mutex_lock(&g_cb_mu);
    binding *b = find_bind(kind, s);
    if (b == NULL) {
        core_mutex_unlock(&g_cb_mu);
        return false;
    }
    subscriber *u = b->sub;
    r->refs++; /* the queue's reference */
    r->state = REP_QUEUED;
    r->next = NULL;
    if (u->tail != NULL) {
        u->tail->next = r;
    } else {
        u->head = r;
    }
    u->tail = r;
    pthread_cond_broadcast(&u->cv);
    if (r->block) {
        while (r->state == REP_QUEUED || r->state == REP_RUNNING) {
            if (stream_task_wait(&r->done_cv, &g_cb_mu, NULL) == ECANCELED && r->state == REP_QUEUED) {
                break; /* stream aborted before the callback started */
            }
        }
    }
    core_mutex_unlock(&g_cb_mu);
    return true;
}

typedef struct cb_task_arg {
    int kind;
    report *r;
    bool replay; /* captured into a model: r is a template, each run delivers a copy */
} cb_task_arg;

static aclError callback_task(void *p)
{
    cb_task_arg *a = p;
    if (a->replay) {
        /* A run of a model (aclmdlRIExecute*): a fresh report per run, for
         * the threads subscribed to the stream the callback was captured on. */
        report *r = calloc(1, sizeof(*r));
        if (r == NULL) {
            return ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
        r->fn = a->r->fn;
        r->user = a->r->user;
        r->block = a->r->block;
        r->refs = 1;
        r->stream = a->r->stream;
        core_cond_init(&r->done_cv);
        (void)deliver(a->kind, r, r->stream);
        core_mutex_lock(&g_cb_mu);
        report_put_locked(r);
        core_mutex_unlock(&g_cb_mu);
        return ACL_SUCCESS;
    }
    /* no subscriber any more (it unsubscribed after the launch): dropped */
    (void)deliver(a->kind, a->r, core_worker_stream());
    return ACL_SUCCESS;
}

static void callback_free(void *p)
{
    cb_task_arg *a = p;
    core_mutex_lock(&g_cb_mu);
    report_put_locked(a->r);
    core_mutex_unlock(&g_cb_mu);
    free(a);
}

static aclError launch_common(const char *fn, int kind, aclrtCallback cb, void *user, bool block, mock_stream *s)
{
    report *r = calloc(1, sizeof(*r));
    cb_task_arg *a = malloc(sizeof(*a));
    if (r == NULL || a == NULL) {
        free(r);
        free(a);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    r->fn = cb;
    r->user = user;
    r->block = block;
    r->refs = 1; /* the task's reference */
    r->stream = s;
    core_cond_init(&r->done_cv);
    a->kind = kind;
    a->r = r;
    a->replay = stream_binding(s) != NULL;
    mock_task_desc desc = {.kind = MOCK_TASK_CALLBACK, .name = fn, .peer_device = -1};
    aclError rc = stream_enqueue_desc(s, callback_task, a, callback_free, &desc);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the callback task (error %d)", rc);
    }
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------------- process */

static aclError process_common(int kind, int32_t timeout)
{
    const char *fn = k_process_fn[kind];
    /* -1 = forever, > 0 = ms; 0 or < -1 -> 100000 (§5.7) */
    if (timeout == 0 || timeout < -1) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'timeout' is %d (must be -1 or > 0)", timeout);
    }
    MOCK_ENTER(fn);
    uint64_t self = (uint64_t)pthread_self();
    struct timespec dl_buf;
    const struct timespec *dl = core_deadline_opt(timeout, &dl_buf);
    core_mutex_lock(&g_cb_mu);
    subscriber *u = find_sub(kind, self);
    bool subscribed = u != NULL;
    aclError rc = ACL_SUCCESS;
    if (subscribed) {
        u->refs++;
        while (u->head == NULL && u->nstreams > 0) {
            if (core_cond_wait_until(&u->cv, &g_cb_mu, dl) == ETIMEDOUT && u->head == NULL) {
                rc = ACL_ERROR_RT_REPORT_TIMEOUT;
                break;
            }
        }
        if (rc == ACL_SUCCESS && u->head == NULL) {
            rc = ACL_ERROR_RT_THREAD_SUBSCRIBE; /* unsubscribed while waiting */
        }
        /* Run everything queued for this thread, in arrival order, without the lock. */
        while (rc == ACL_SUCCESS && u->head != NULL) {
            report *r = u->head;
            u->head = r->next;
            if (u->head == NULL) {
                u->tail = NULL;
            }
            r->state = REP_RUNNING;
            u->running = r;
            core_mutex_unlock(&g_cb_mu);
            core_lock_check_none("running a report callback");
            r->fn(r->user);
            core_mutex_lock(&g_cb_mu);
            u->running = NULL;
            r->state = REP_DONE;
            pthread_cond_broadcast(&r->done_cv);
            report_put_locked(r);
        }
        sub_put_locked(u);
    }
    core_mutex_unlock(&g_cb_mu);
    if (!subscribed) {
        return core_error(fn, ACL_ERROR_RT_THREAD_SUBSCRIBE, "the calling thread (0x%llx) is not subscribed to any stream",
                          (unsigned long long)self);
    }
    if (rc == ACL_ERROR_RT_REPORT_TIMEOUT) {
        return core_error(fn, rc, "no callback arrived within %d ms", timeout);
    }
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the calling thread was unsubscribed while waiting");
    }
    return ACL_SUCCESS;
}

/* -------------------------------------------------------------- subscribe */

static aclError subscribe_common(const char *fn, int kind, uint64_t tid, aclrtStream stream)
{
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int32_t dev = stream_device(s);
    /* One critical section decides (and on success subscribes); errors after it. */
    enum { SUBSCRIBED, STREAM_TAKEN, OTHER_DEVICE, TOO_MANY, NO_MEMORY } got = SUBSCRIBED;
    int32_t other_device = -1;
    core_mutex_lock(&g_cb_mu);
    subscriber *u = find_sub(kind, tid);
    if (find_bind(kind, s) != NULL) {
        got = STREAM_TAKEN;
    } else if (u != NULL && u->device != dev) {
        got = OTHER_DEVICE;
        other_device = u->device;
    } else if (u == NULL && g_nsubs[kind] >= MAX_SUB_THREADS) {
        got = TOO_MANY;
    } else {
        binding *b = calloc(1, sizeof(*b));
        if (b == NULL || (u == NULL && (u = calloc(1, sizeof(*u))) == NULL)) {
            free(b);
            got = NO_MEMORY;
        } else {
            if (u->refs == 0) { /* new subscriber */
                u->kind = kind;
                u->tid = tid;
                u->device = dev;
                u->refs = 1;
                core_cond_init(&u->cv);
                u->next = g_subs;
                g_subs = u;
                g_nsubs[kind]++;
            }
            u->nstreams++;
            b->kind = kind;
            b->stream = s;
            b->sub = u;
            b->next = g_binds;
            g_binds = b;
        }
    }
    core_mutex_unlock(&g_cb_mu);
    stream_put(s);
    switch (got) {
    case STREAM_TAKEN:
        return core_error(fn, ACL_ERROR_RT_STREAM_SUBSCRIBE, "the stream is already subscribed to a thread");
    case OTHER_DEVICE:
        return core_error(fn, ACL_ERROR_RT_THREAD_SUBSCRIBE,
                          "thread 0x%llx already serves device %d; one thread cannot serve two devices",
                          (unsigned long long)tid, other_device);
    case TOO_MANY:
        return core_error(fn, ACL_ERROR_RT_THREAD_SUBSCRIBE, "too many subscribed threads (max %d)", MAX_SUB_THREADS);
    case NO_MEMORY:
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    case SUBSCRIBED:
        break;
    }
    return ACL_SUCCESS;
}

static aclError unsubscribe_common(const char *fn, int kind, uint64_t tid, aclrtStream stream)
{
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_get(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_cb_mu);
    binding *b = find_bind(kind, s);
    bool bound = b != NULL && b->sub->tid == tid;
    if (bound) {
        unbind_locked(b);
    }
    core_mutex_unlock(&g_cb_mu);
    stream_put(s);
    if (!bound) {
        return core_error(fn, ACL_ERROR_RT_STREAM_SUBSCRIBE, "the stream is not subscribed to thread 0x%llx",
                          (unsigned long long)tid);
    }
    return ACL_SUCCESS;
}

/* ============================================================= callbacks */

aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)
{
    return subscribe_common("aclrtSubscribeReport", KIND_REPORT, threadId, stream);
}

aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)
{
    return unsubscribe_common("aclrtUnSubscribeReport", KIND_REPORT, threadId, stream);
}

aclError aclrtProcessReport(int32_t timeout)
{
    return process_common(KIND_REPORT, timeout);
}

aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType blockType, aclrtStream stream)
{
    static const char f[] = "aclrtLaunchCallback";
    MOCK_REQUIRE_NONNULL(f, fn);
    if (blockType != ACL_CALLBACK_NO_BLOCK && blockType != ACL_CALLBACK_BLOCK) {
        return core_error(f, ACL_ERROR_INVALID_PARAM, "argument 'blockType' has invalid value %d", (int)blockType);
    }
    MOCK_ENTER(f);
    mock_stream *s = NULL;
    aclError rc = stream_get(f, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_cb_mu);
    bool subscribed = find_bind(KIND_REPORT, s) != NULL;
    core_mutex_unlock(&g_cb_mu);
    if (!subscribed) {
        /* RT rt api_impl.cc ApiImpl::CallbackLaunch -> RT_ERROR_STREAM_NO_CB_REG */
        stream_put(s);
        return core_error(f, ACL_ERROR_RT_STREAM_NO_CB_REG,
                          "no thread is subscribed to the stream (call aclrtSubscribeReport first)");
    }
    rc = launch_common(f, KIND_REPORT, fn, userData, blockType == ACL_CALLBACK_BLOCK, s);
    stream_put(s);
    return rc;
}

/* ============================================================ host funcs */

aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)
{
    return subscribe_common("aclrtSubscribeHostFunc", KIND_HOSTFUNC, hostFuncThreadId, exeStream);
}

aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)
{
    return unsubscribe_common("aclrtUnSubscribeHostFunc", KIND_HOSTFUNC, hostFuncThreadId, exeStream);
}

aclError aclrtProcessHostFunc(int32_t timeout)
{
    return process_common(KIND_HOSTFUNC, timeout);
}

typedef struct hostfunc_arg {
    aclrtHostFunc fn;
    void *args;
} hostfunc_arg;

static aclError hostfunc_task(void *p)
{
    hostfunc_arg *a = p;
    mock_stream *s = core_worker_stream();
    core_mutex_lock(&g_cb_mu);
    bool subscribed = find_bind(KIND_HOSTFUNC, s) != NULL;
    core_mutex_unlock(&g_cb_mu);
    if (subscribed) {
        /* Hand it to the subscribed thread (aclrtProcessHostFunc). The report
         * is allocated only here, so launches on unsubscribed streams (the
         * common case) cost one small allocation. */
        report *r = calloc(1, sizeof(*r));
        if (r != NULL) {
            r->fn = a->fn; /* aclrtHostFunc and aclrtCallback: void (*)(void *) */
            r->user = a->args;
            r->block = true; /* a host func blocks its stream until it returns */
            r->refs = 1;
            r->stream = s;
            core_cond_init(&r->done_cv);
            bool delivered = deliver(KIND_HOSTFUNC, r, s);
            core_mutex_lock(&g_cb_mu);
            report_put_locked(r);
            core_mutex_unlock(&g_cb_mu);
            if (delivered) {
                return ACL_SUCCESS;
            }
            /* unsubscribed since the check above: run it here after all */
        }
    }
    core_lock_check_none("running a host function");
    a->fn(a->args); /* on the runtime-owned worker; blocks the stream */
    return ACL_SUCCESS;
}

aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args)
{
    static const char f[] = "aclrtLaunchHostFunc";
    MOCK_REQUIRE_NONNULL(f, fn);
    MOCK_ENTER(f);
    mock_stream *s = NULL;
    aclError rc = stream_get(f, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    hostfunc_arg *a = malloc(sizeof(*a));
    if (a == NULL) {
        stream_put(s);
        return core_error(f, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory");
    }
    a->fn = fn;
    a->args = args;
    mock_task_desc desc = {.kind = MOCK_TASK_CALLBACK, .name = f, .peer_device = -1};
    rc = stream_enqueue_desc(s, hostfunc_task, a, free, &desc);
    stream_put(s);
    if (rc != ACL_SUCCESS) {
        return core_error(f, rc, "the stream refused the host func task (error %d)", rc);
    }
    return ACL_SUCCESS;
}
