/*
 * test_stream.c - streams: FIFO, async query/sync, timeouts, destroy with
 * pending work, destroy-force, failure modes, attributes, config handles,
 * resource limits, garbage handles, cross-device use, many threads.
 * No timing assertions: timeouts only ever create failures on purpose.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"
#include "streams_util.h"

static void test_create_destroy_and_args(void)
{
    aclrtStream s = NULL;
    CHECK_EQ(aclrtCreateStream(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "stream");
    int64_t before = aclmockGetStat(0, ACLMOCK_STAT_STREAMS);
    CHECK_OK(aclrtCreateStream(&s));
    CHECK(s != NULL);
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_STREAMS), before + 1);
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_STREAMS), before);
    /* destroyed handle, garbage handles, NULL */
    CHECK_EQ(aclrtDestroyStream(s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtDestroyStream(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDestroyStreamForce(NULL), ACL_ERROR_INVALID_PARAM);
    int on_stack = 0;
    CHECK_EQ(aclrtSynchronizeStream((aclrtStream)&on_stack), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSynchronizeStream((aclrtStream)(uintptr_t)0x1234), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtDestroyStream((aclrtStream)(uintptr_t)0xdeadbeef), ACL_ERROR_RT_PARAM_INVALID);
    aclrtStreamStatus st;
    CHECK_EQ(aclrtStreamQuery((aclrtStream)&on_stack, &st), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtLaunchHostFunc((aclrtStream)&on_stack, counter_fn, &on_stack), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "stream");

    /* the default stream: usable through NULL, not destroyable */
    aclrtStream def = NULL;
    CHECK_OK(aclrtCtxGetCurrentDefaultStream(&def));
    CHECK(def != NULL);
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_EQ(aclrtDestroyStream(def), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSynchronizeStream(def));
}

static void *no_context_thread(void *arg)
{
    (void)arg;
    aclrtStream s = NULL;
    CHECK_EQ(aclrtCreateStream(&s), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtSynchronizeStream(NULL), ACL_ERROR_RT_CONTEXT_NULL);
    atomic_int c;
    atomic_init(&c, 0);
    CHECK_EQ(aclrtLaunchHostFunc(NULL, counter_fn, &c), ACL_ERROR_RT_CONTEXT_NULL);
    return NULL;
}

static void test_no_context(void)
{
    pthread_t t;
    pthread_create(&t, NULL, no_context_thread, NULL);
    pthread_join(t, NULL);
}

#define FIFO_N 20000

static void test_fifo_order(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    fifo_log log;
    atomic_init(&log.pos, 0);
    log.order = calloc(FIFO_N, sizeof(int));
    fifo_item *items = calloc(FIFO_N, sizeof(*items));
    for (int i = 0; i < FIFO_N; i++) {
        items[i].log = &log;
        items[i].idx = i;
        CHECK_OK(aclrtLaunchHostFunc(s, fifo_fn, &items[i]));
    }
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&log.pos), FIFO_N);
    int bad = 0;
    for (int i = 0; i < FIFO_N; i++) {
        bad += log.order[i] != i;
    }
    CHECK_EQ(bad, 0);
    CHECK_OK(aclrtDestroyStream(s));
    free(items);
    free(log.order);
}

static void test_query_and_timeout(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    aclrtStreamStatus st = ACL_STREAM_STATUS_RESERVED;
    CHECK_EQ(aclrtStreamQuery(s, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtStreamQuery(s, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_COMPLETE);

    gate g;
    gate_init(&g);
    hold_stream(s, &g);
    atomic_int c;
    atomic_init(&c, 0);
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_OK(aclrtStreamQuery(s, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_NOT_READY);
    CHECK_EQ(aclrtSynchronizeStreamWithTimeout(s, 20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSynchronizeStreamWithTimeout");
    CHECK_EQ(aclrtSynchronizeStreamWithTimeout(s, -2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(atomic_load(&c), 0);
    wait_entered(&g, 1);
    CHECK_OK(aclrtStreamQuery(s, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_NOT_READY);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStreamWithTimeout(s, -1));
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_OK(aclrtStreamQuery(s, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_COMPLETE);
    CHECK_OK(aclrtSynchronizeStreamWithTimeout(s, 1000));
    CHECK_OK(aclrtDestroyStream(s));
    gate_destroy(&g);
}

typedef struct opener {
    gate *g;
    int delay_ms;
} opener;

static void *open_later(void *arg)
{
    opener *o = (opener *)arg;
    sleep_ms(o->delay_ms);
    gate_open(o->g);
    return NULL;
}

static void test_destroy_waits_for_pending(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    gate g;
    gate_init(&g);
    hold_stream(s, &g);
    atomic_int c;
    atomic_init(&c, 0);
    for (int i = 0; i < 100; i++) {
        CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    }
    opener o = {&g, 20};
    pthread_t t;
    pthread_create(&t, NULL, open_later, &o);
    CHECK_OK(aclrtDestroyStream(s)); /* blocks until all 101 tasks ran */
    CHECK_EQ(atomic_load(&c), 100);
    pthread_join(t, NULL);
    gate_destroy(&g);
}

/* A stream `s` plus a `holder` stream held by gate `g`; events recorded on the
 * holder with `ev` (ACL_EVENT_SYNC) complete only once the gate opens. */
typedef struct held_pair {
    aclrtStream s, holder;
    aclrtEvent ev;
    gate g;
} held_pair;

static void held_pair_init(held_pair *h)
{
    CHECK_OK(aclrtCreateStream(&h->s));
    CHECK_OK(aclrtCreateStream(&h->holder));
    CHECK_OK(aclrtCreateEventWithFlag(&h->ev, ACL_EVENT_SYNC));
    gate_init(&h->g);
    hold_stream(h->holder, &h->g);
}

/* Opens the gate, drains and destroys the holder and the event (`s` is the
 * test's to destroy). */
static void held_pair_release(held_pair *h)
{
    gate_open(&h->g);
    CHECK_OK(aclrtSynchronizeStream(h->holder));
    CHECK_OK(aclrtDestroyStream(h->holder));
    CHECK_OK(aclrtDestroyEvent(h->ev));
    gate_destroy(&h->g);
}

static void test_destroy_force_discards(void)
{
    /* The holder is held by a gate; s waits for an event recorded behind the
     * gate, then has 100 counter tasks. Force-destroying s interrupts the wait
     * and discards the counters. */
    held_pair h;
    held_pair_init(&h);
    CHECK_OK(aclrtRecordEvent(h.ev, h.holder));
    CHECK_OK(aclrtStreamWaitEvent(h.s, h.ev));
    atomic_int c;
    atomic_init(&c, 0);
    for (int i = 0; i < 100; i++) {
        CHECK_OK(aclrtLaunchHostFunc(h.s, counter_fn, &c));
    }
    CHECK_OK(aclrtDestroyStreamForce(h.s));
    CHECK_EQ(atomic_load(&c), 0);
    CHECK_EQ(aclrtDestroyStreamForce(h.s), ACL_ERROR_RT_PARAM_INVALID);
    held_pair_release(&h);
}

/* A failing task: wait (20 ms timeout) for an event whose record is held
 * behind a gate on another stream. */
static void enqueue_failing_task(aclrtStream s, aclrtStream holder, aclrtEvent ev)
{
    CHECK_OK(aclrtRecordEvent(ev, holder));
    CHECK_OK(aclrtStreamWaitEventWithTimeout(s, ev, 20));
}

static void test_failure_modes(void)
{
    /* STOP applies to a whole context (acl_abi.md §5.4): use one of our own */
    aclrtContext prev = NULL, ctx = NULL;
    CHECK_OK(aclrtGetCurrentContext(&prev));
    CHECK_OK(aclrtCreateContext(&ctx, 0));
    held_pair h;
    held_pair_init(&h);
    aclrtStream s = h.s, holder = h.holder;
    aclrtEvent ev = h.ev;
    atomic_int c;
    atomic_init(&c, 0);

    /* CONTINUE (default): later tasks run, the error is reported once */
    CHECK_EQ(aclrtSetStreamFailureMode(s, 7), ACL_ERROR_INVALID_PARAM);
    enqueue_failing_task(s, holder, ev);
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_OK(aclrtSynchronizeStream(s));

    /* STOP: later tasks are discarded, submissions refused, error sticks */
    CHECK_OK(aclrtSetStreamFailureMode(s, ACL_STOP_ON_FAILURE));
    aclrtStreamAttrValue v;
    CHECK_OK(aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    CHECK_EQ(v.failureMode, ACL_STOP_ON_FAILURE);
    enqueue_failing_task(s, holder, ev);
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_EQ(aclrtLaunchHostFunc(s, counter_fn, &c), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    aclrtStreamStatus st;
    CHECK_EQ(aclrtStreamQuery(s, &st), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    /* aclrtStreamAbort recovers the stream */
    CHECK_OK(aclrtStreamAbort(s));
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&c), 2);

    /* the mode may be set once per stream (§5.4), by either API */
    CHECK_EQ(aclrtSetStreamFailureMode(s, ACL_CONTINUE_ON_FAILURE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "once");
    v.failureMode = ACL_CONTINUE_ON_FAILURE;
    CHECK_EQ(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &v), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    CHECK_EQ(v.failureMode, ACL_STOP_ON_FAILURE);

    /* STOP applies to all streams of the context: the others, its default
     * stream and streams created later stop on their own failures too */
    CHECK_OK(aclrtGetStreamAttribute(holder, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    CHECK_EQ(v.failureMode, ACL_STOP_ON_FAILURE);
    CHECK_OK(aclrtGetStreamAttribute(NULL, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    CHECK_EQ(v.failureMode, ACL_STOP_ON_FAILURE);
    aclrtStream later;
    CHECK_OK(aclrtCreateStream(&later));
    CHECK_OK(aclrtGetStreamAttribute(later, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    CHECK_EQ(v.failureMode, ACL_STOP_ON_FAILURE);
    enqueue_failing_task(later, holder, ev);
    CHECK_OK(aclrtLaunchHostFunc(later, counter_fn, &c));
    CHECK_EQ(aclrtSynchronizeStream(later), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_EQ(atomic_load(&c), 2); /* discarded */
    CHECK_EQ(aclrtLaunchHostFunc(later, counter_fn, &c), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_OK(aclrtStreamAbort(later));
    CHECK_OK(aclrtDestroyStream(later));

    CHECK_OK(aclrtDestroyStream(s));
    held_pair_release(&h);
    CHECK_OK(aclrtDestroyContext(ctx));
    CHECK_OK(aclrtSetCurrentContext(prev));

    /* other contexts keep CONTINUE */
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    CHECK_EQ(v.failureMode, ACL_CONTINUE_ON_FAILURE);
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_abort_and_stop(void)
{
    held_pair h;
    held_pair_init(&h);
    aclrtStream s = h.s;
    aclrtEvent ev = h.ev;
    CHECK_OK(aclrtRecordEvent(ev, h.holder));
    atomic_int c;
    atomic_init(&c, 0);
    CHECK_OK(aclrtStreamWaitEvent(s, ev));
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_OK(aclrtStreamAbort(s)); /* interrupts the wait, drops the counter */
    CHECK_EQ(atomic_load(&c), 0);
    CHECK_OK(aclrtStreamWaitEvent(s, ev));
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_OK(aclrtStreamStop(s));
    CHECK_EQ(atomic_load(&c), 0);
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_EQ(aclrtStreamAbort(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtStreamStop((aclrtStream)&c), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtDestroyStream(s));
    held_pair_release(&h);
}

/* ACL_STREAM_PERSISTENT: tasks submitted to a persistent stream are captured,
 * not executed - neither at enqueue nor later; they are released (never run)
 * when the stream is destroyed. */
static void test_persistent_captures(void)
{
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_PERSISTENT));
    uint32_t flags = 0;
    CHECK_OK(aclrtStreamGetFlags(s, &flags));
    CHECK_EQ(flags, ACL_STREAM_PERSISTENT);
    atomic_int c;
    atomic_init(&c, 0);
    void *d = NULL, *pin = NULL;
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&pin, 64));
    memset(pin, 0x3c, 64);
    unsigned char pageable[64];
    memset(pageable, 0x4d, sizeof(pageable));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    }
    CHECK_OK(aclrtMemcpyAsync(d, 64, pin, 64, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtMemsetAsync(d, 64, 0x11, 64, s));
    /* a pageable copy would complete before returning on a normal stream:
     * here it is captured too (the call does not wait for it) */
    CHECK_OK(aclrtMemcpyAsync(d, 64, pageable, 64, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtSynchronizeStream(s)); /* nothing is being executed */
    aclrtStreamStatus st = ACL_STREAM_STATUS_NOT_READY;
    CHECK_OK(aclrtStreamQuery(s, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_COMPLETE);
    CHECK_OK(aclrtStreamAbort(s));
    CHECK_EQ(atomic_load(&c), 0);
    unsigned char out[64];
    CHECK_OK(aclrtMemcpy(out, 64, d, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(out[0], 0); /* still the zero-filled allocation */
    CHECK_EQ(out[63], 0);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(atomic_load(&c), 0);
    /* force-destroy releases the captured tasks too */
    CHECK_OK(aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_PERSISTENT | ACL_STREAM_FAST_LAUNCH));
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_OK(aclrtMemcpyAsync(d, 64, pin, 64, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtDestroyStreamForce(s));
    CHECK_EQ(atomic_load(&c), 0);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(pin));
}

/* A call made on another thread: `what` is BG_SYNC (aclrtSynchronizeStream),
 * BG_ABORT (aclrtStreamAbort), BG_STOP (aclrtStreamStop) or BG_DEVICE_ABORT
 * (aclrtDeviceTaskAbort of device 0). */
enum { BG_SYNC, BG_ABORT, BG_STOP, BG_DEVICE_ABORT };
typedef struct bg_call {
    aclrtStream s;
    int what;
    atomic_int started;
    aclError rc;
} bg_call;

static void *bg_main(void *arg)
{
    bg_call *b = (bg_call *)arg;
    atomic_store(&b->started, 1);
    switch (b->what) {
    case BG_SYNC:
        b->rc = aclrtSynchronizeStream(b->s);
        break;
    case BG_ABORT:
        b->rc = aclrtStreamAbort(b->s);
        break;
    case BG_STOP:
        b->rc = aclrtStreamStop(b->s);
        break;
    default:
        b->rc = aclrtDeviceTaskAbort(0, 0);
        break;
    }
    return NULL;
}

static void wait_started(atomic_int *flag)
{
    while (!atomic_load(flag)) {
        sleep_ms(1);
    }
}

/* A new stream running a gate task (entered, gate closed) with `n` counter
 * tasks queued behind it. */
typedef struct busy_stream {
    aclrtStream s;
    gate g;
    atomic_int c;
} busy_stream;

static void busy_stream_init(busy_stream *b, int n)
{
    CHECK_OK(aclrtCreateStream(&b->s));
    gate_init(&b->g);
    atomic_init(&b->c, 0);
    hold_stream(b->s, &b->g);
    for (int i = 0; i < n; i++) {
        CHECK_OK(aclrtLaunchHostFunc(b->s, counter_fn, &b->c));
    }
    wait_entered(&b->g, 1);
}

static void sync_during_abort(int what)
{
    busy_stream b;
    busy_stream_init(&b, 1);
    bg_call p = {b.s, BG_SYNC, 0, -1};
    bg_call a = {b.s, what, 0, -1};
    pthread_t tp, ta;
    pthread_create(&tp, NULL, bg_main, &p);
    pthread_create(&ta, NULL, bg_main, &a);
    wait_started(&p.started);
    wait_started(&a.started);
    /* Both calls block on the running gate task: the synchronize waits for
     * it, the abort waits for it to return. Give them time to get there (the
     * result does not depend on their order), then let the task finish. */
    sleep_ms(200);
    gate_open(&b.g);
    pthread_join(ta, NULL);
    pthread_join(tp, NULL);
    CHECK_EQ(a.rc, ACL_SUCCESS);
    CHECK_EQ(p.rc, ACL_ERROR_RT_STREAM_ABORT);
    CHECK_EQ(atomic_load(&b.c), 0); /* discarded */
    CHECK_OK(aclrtSynchronizeStream(b.s));
    CHECK_OK(aclrtLaunchHostFunc(b.s, counter_fn, &b.c));
    CHECK_OK(aclrtSynchronizeStream(b.s));
    CHECK_EQ(atomic_load(&b.c), 1);
    CHECK_OK(aclrtDestroyStream(b.s));
    gate_destroy(&b.g);
}

/* A synchronize waiting on a stream that is aborted (aclrtStreamAbort,
 * aclrtStreamStop, aclrtDeviceTaskAbort) returns ACL_ERROR_RT_STREAM_ABORT (the
 * abort itself succeeds and the stream stays usable; a later synchronize
 * succeeds). */
static void test_sync_during_abort(void)
{
    sync_during_abort(BG_ABORT);
    sync_during_abort(BG_STOP);
    sync_during_abort(BG_DEVICE_ABORT);
}

/* aclrtDestroyStreamForce does not wait for pending tasks: it returns while a
 * host function still runs on the stream, the queued tasks are discarded, a
 * synchronize waiting on the stream returns ACL_ERROR_RT_STREAM_ABORT, and
 * device synchronize waits for the task still running. */
static void test_destroy_force_does_not_wait(void)
{
    int64_t streams = aclmockGetStat(0, ACLMOCK_STAT_STREAMS);
    busy_stream b;
    busy_stream_init(&b, 10);
    bg_call p = {b.s, BG_SYNC, 0, -1};
    pthread_t tp;
    pthread_create(&tp, NULL, bg_main, &p);
    wait_started(&p.started);
    sleep_ms(200); /* let the synchronize start waiting (see test_sync_during_abort) */
    CHECK_OK(aclrtDestroyStreamForce(b.s)); /* the gate is still closed */
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_STREAMS), streams);
    CHECK_EQ(aclrtSynchronizeStream(b.s), ACL_ERROR_RT_PARAM_INVALID); /* the handle is gone */
    gate_open(&b.g);
    pthread_join(tp, NULL);
    CHECK_EQ(p.rc, ACL_ERROR_RT_STREAM_ABORT);
    CHECK_OK(aclrtSynchronizeDevice()); /* waits until the gate task has returned */
    CHECK_EQ(atomic_load(&b.c), 0);
    gate_destroy(&b.g);

    /* the orphaned worker refers to its context: destroying the context waits
     * for it (the gate opens only later, from another thread) */
    aclrtContext prev = NULL, ctx = NULL;
    CHECK_OK(aclrtGetCurrentContext(&prev));
    CHECK_OK(aclrtCreateContext(&ctx, 0));
    busy_stream b2;
    busy_stream_init(&b2, 1);
    CHECK_OK(aclrtDestroyStreamForce(b2.s));
    opener o = {&b2.g, 50};
    pthread_t t;
    pthread_create(&t, NULL, open_later, &o);
    CHECK_OK(aclrtDestroyContext(ctx));
    pthread_join(t, NULL);
    CHECK_OK(aclrtSetCurrentContext(prev));
    CHECK_EQ(atomic_load(&b2.c), 0);
    gate_destroy(&b2.g);
}

static void test_attributes(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStreamWithConfig(&s, 3, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | 0x4000));
    uint32_t prio = 99, flags = 99;
    CHECK_OK(aclrtStreamGetPriority(s, &prio));
    CHECK_EQ(prio, 3);
    CHECK_OK(aclrtStreamGetFlags(s, &flags));
    CHECK_EQ(flags, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC); /* unknown bits ignored */
    CHECK_EQ(aclrtStreamGetPriority(s, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtStreamGetFlags(s, NULL), ACL_ERROR_INVALID_PARAM);
    int32_t least = -5, greatest = -5;
    CHECK_OK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    aclrtStream s2;
    CHECK_OK(aclrtCreateStreamWithConfig(&s2, 1000, 0));
    CHECK_OK(aclrtStreamGetPriority(s2, &prio));
    CHECK_EQ(prio, (uint32_t)least); /* clamped to the least priority */
    CHECK_LE(greatest, least);
    CHECK_EQ(aclrtCreateStreamWithConfig(NULL, 0, 0), ACL_ERROR_INVALID_PARAM);

    int32_t id1 = -1, id2 = -1;
    CHECK_OK(aclrtStreamGetId(s, &id1));
    CHECK_OK(aclrtStreamGetId(s2, &id2));
    CHECK(id1 >= 0 && id2 >= 0 && id1 != id2);
    CHECK_EQ(aclrtStreamGetId(s, NULL), ACL_ERROR_INVALID_PARAM);

    aclrtStreamAttrValue v;
    memset(&v, 0, sizeof(v));
    v.userCustomTag = 42;
    CHECK_OK(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &v));
    memset(&v, 0xff, sizeof(v));
    CHECK_OK(aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &v));
    CHECK_EQ(v.userCustomTag, 42);
    v.overflowSwitch = 1;
    CHECK_OK(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &v));
    uint32_t sw = 0;
    CHECK_OK(aclrtGetStreamOverflowSwitch(s, &sw)); /* the same per-stream flag */
    CHECK_EQ(sw, 1);
    v.streamPriority = 2;
    CHECK_OK(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_PRIORITY, &v));
    CHECK_OK(aclrtStreamGetPriority(s, &prio));
    CHECK_EQ(prio, 2);
    CHECK_OK(aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &v));
    CHECK_EQ(v.failureMode, ACL_CONTINUE_ON_FAILURE);
    CHECK_EQ(aclrtGetStreamAttribute(s, (aclrtStreamAttr)0, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetStreamAttribute(s, (aclrtStreamAttr)99, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_USER_CUSTOM_TAG, NULL), ACL_ERROR_INVALID_PARAM);
    v.failureMode = 5;
    CHECK_EQ(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_FAILURE_MODE, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetStreamAttribute((aclrtStream)&v, ACL_STREAM_ATTR_USER_CUSTOM_TAG, &v),
             ACL_ERROR_RT_PARAM_INVALID);
    /* the default stream through NULL */
    CHECK_OK(aclrtSetStreamFailureMode(NULL, ACL_CONTINUE_ON_FAILURE));
    CHECK_OK(aclrtStreamGetId(NULL, &id1));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(s2));
}

static void test_config_handle(void)
{
    aclrtStreamConfigHandle *h = aclrtCreateStreamConfigHandle();
    CHECK(h != NULL);
    uint32_t prio = 5, flag = ACL_STREAM_FAST_SYNC;
    size_t wsz = 4096;
    CHECK_OK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, sizeof(prio)));
    CHECK_OK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_FLAG, &flag, sizeof(flag)));
    CHECK_OK(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_WORK_SIZE, &wsz, sizeof(wsz)));
    CHECK_EQ(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, &prio, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetStreamConfigOpt(h, (aclrtStreamConfigAttr)17, &prio, sizeof(prio)), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetStreamConfigOpt(h, ACL_RT_STREAM_PRIORITY, NULL, sizeof(prio)), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetStreamConfigOpt(NULL, ACL_RT_STREAM_PRIORITY, &prio, sizeof(prio)), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(h->priority, 5);
    CHECK_EQ(h->workSize, 4096);
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStreamV2(&s, h));
    uint32_t got = 0;
    CHECK_OK(aclrtStreamGetPriority(s, &got));
    CHECK_EQ(got, 5);
    CHECK_OK(aclrtStreamGetFlags(s, &got));
    CHECK_EQ(got, ACL_STREAM_FAST_SYNC);
    CHECK_EQ(aclrtCreateStreamV2(&s, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCreateStreamV2(NULL, h), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStreamConfigHandle(h));
    aclrtStreamConfigHandle fake;
    CHECK_EQ(aclrtDestroyStreamConfigHandle(&fake), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDestroyStreamConfigHandle(NULL), ACL_ERROR_INVALID_PARAM);
}

static void test_res_limits(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    uint32_t cube = 0, vec = 0, v = 0;
    CHECK_OK(aclrtGetStreamResLimit(s, ACL_RT_DEV_RES_CUBE_CORE, &cube));
    CHECK_OK(aclrtGetStreamResLimit(s, ACL_RT_DEV_RES_VECTOR_CORE, &vec));
    CHECK(cube > 0 && vec > 0);
    CHECK_EQ(aclrtGetStreamResLimit(s, (aclrtDevResLimitType)9, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetStreamResLimit(s, ACL_RT_DEV_RES_CUBE_CORE, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetStreamResLimit(s, ACL_RT_DEV_RES_CUBE_CORE, cube + 1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSetStreamResLimit(s, ACL_RT_DEV_RES_CUBE_CORE, 1));
    CHECK_OK(aclrtGetStreamResLimit(s, ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, 1);

    /* thread-level use of the stream's limits */
    uint32_t dev_cube = 0;
    CHECK_OK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &dev_cube));
    CHECK_EQ(dev_cube, cube);
    CHECK_OK(aclrtUseStreamResInCurrentThread(s));
    CHECK_OK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, 1);
    CHECK_OK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_VECTOR_CORE, &v));
    CHECK_EQ(v, vec);
    CHECK_EQ(aclrtUnuseStreamResInCurrentThread(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtUnuseStreamResInCurrentThread(s));
    CHECK_EQ(aclrtUnuseStreamResInCurrentThread(s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, cube);
    CHECK_EQ(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, NULL), ACL_ERROR_INVALID_PARAM);

    CHECK_OK(aclrtResetStreamResLimit(s));
    CHECK_OK(aclrtGetStreamResLimit(s, ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, cube);
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_available_num(void)
{
    uint32_t n0 = 0, n1 = 0;
    CHECK_OK(aclrtGetStreamAvailableNum(&n0));
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtGetStreamAvailableNum(&n1));
    CHECK_EQ(n1 + 1, n0);
    CHECK_EQ(aclrtGetStreamAvailableNum(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDestroyStream(s));
}

/* Doc 06_stream_management.md, aclrtGetStreamAvailableNum: the first aclrtCreateContext
 * on a device without aclrtSetDevice occupies 2 streams - its default stream and the
 * device's own one, which the device's primary context uses as its default stream. */
static void test_available_num_first_context(void)
{
    enum { MAX = 1984, DEV = 6 }; /* device 6 is not used by any other test here */
    uint32_t n = 0;
    aclrtContext ctx = NULL;
    CHECK_OK(aclrtCreateContext(&ctx, DEV));
    CHECK_OK(aclrtGetStreamAvailableNum(&n));
    CHECK_EQ(n, MAX - 2);
    CHECK_OK(aclrtSetDevice(DEV)); /* the primary context takes the device's stream */
    CHECK_OK(aclrtGetStreamAvailableNum(&n));
    CHECK_EQ(n, MAX - 2);
    CHECK_OK(aclrtResetDevice(DEV)); /* the device stays open for ctx */
    CHECK_OK(aclrtSetCurrentContext(ctx));
    CHECK_OK(aclrtGetStreamAvailableNum(&n));
    CHECK_EQ(n, MAX - 2);
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtGetStreamAvailableNum(&n));
    CHECK_EQ(n, MAX - 3);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyContext(ctx));
    CHECK_OK(aclrtSetDevice(DEV)); /* a primary context alone: one stream */
    CHECK_OK(aclrtGetStreamAvailableNum(&n));
    CHECK_EQ(n, MAX - 1);
    CHECK_OK(aclrtResetDevice(DEV));
    CHECK_OK(aclrtSetDevice(0));
}

static atomic_int g_created, g_destroyed;
static void state_cb(aclrtStream stm, aclrtStreamState state, void *args)
{
    (void)stm;
    CHECK(args == (void *)&g_created);
    if (state == ACL_RT_STREAM_STATE_CREATE_POST) {
        atomic_fetch_add(&g_created, 1);
    } else if (state == ACL_RT_STREAM_STATE_DESTROY_PRE) {
        atomic_fetch_add(&g_destroyed, 1);
    }
}

static void test_state_callback(void)
{
    CHECK_EQ(aclrtRegStreamStateCallback(NULL, state_cb, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtRegStreamStateCallback("streams-test", state_cb, &g_created));
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_EQ(atomic_load(&g_created), 1);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(atomic_load(&g_destroyed), 1);
    CHECK_OK(aclrtRegStreamStateCallback("streams-test", NULL, NULL)); /* unregister */
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(atomic_load(&g_created), 1);
}

static void test_cross_device(void)
{
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    if (n < 2) {
        return;
    }
    CHECK_OK(aclrtSetDevice(1));
    aclrtStream s1;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtSetDevice(0));
    atomic_int c;
    atomic_init(&c, 0);
    /* submitting to a stream of another device -> 107003 */
    CHECK_EQ(aclrtLaunchHostFunc(s1, counter_fn, &c), ACL_ERROR_RT_STREAM_CONTEXT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "device 1");
    /* synchronising / querying it from here is fine */
    CHECK_OK(aclrtSynchronizeStream(s1));
    aclrtStreamStatus st;
    CHECK_OK(aclrtStreamQuery(s1, &st));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtResetDevice(1));
}

static void test_sync_device_covers_streams(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    atomic_int c;
    atomic_init(&c, 0);
    for (int i = 0; i < 50; i++) {
        CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
        CHECK_OK(aclrtLaunchHostFunc(NULL, counter_fn, &c));
    }
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_EQ(atomic_load(&c), 100);
    CHECK_OK(aclrtDestroyStream(s));
}

#define MT_THREADS 8
#define MT_STREAMS 4
#define MT_TASKS 200

static void *many_streams_thread(void *arg)
{
    int idx = (int)(intptr_t)arg;
    uint32_t n = 1;
    aclrtGetDeviceCount(&n);
    int32_t dev = (int32_t)(idx % (int)(n > 4 ? 4 : n));
    CHECK_OK(aclrtSetDevice(dev));
    for (int round = 0; round < 3; round++) {
        aclrtStream s[MT_STREAMS];
        atomic_int c;
        atomic_init(&c, 0);
        for (int i = 0; i < MT_STREAMS; i++) {
            CHECK_OK(aclrtCreateStream(&s[i]));
        }
        for (int k = 0; k < MT_TASKS; k++) {
            for (int i = 0; i < MT_STREAMS; i++) {
                CHECK_OK(aclrtLaunchHostFunc(s[i], counter_fn, &c));
            }
        }
        for (int i = 0; i < MT_STREAMS; i++) {
            CHECK_OK(aclrtSynchronizeStream(s[i]));
        }
        CHECK_EQ(atomic_load(&c), MT_STREAMS * MT_TASKS);
        for (int i = 0; i < MT_STREAMS; i++) {
            CHECK_OK(aclrtDestroyStream(s[i]));
        }
    }
    CHECK_OK(aclrtResetDevice(dev));
    return NULL;
}

static void test_many_streams_many_threads(void)
{
    pthread_t t[MT_THREADS];
    int64_t before = aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_STREAMS);
    for (int i = 0; i < MT_THREADS; i++) {
        pthread_create(&t[i], NULL, many_streams_thread, (void *)(intptr_t)i);
    }
    for (int i = 0; i < MT_THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_STREAMS), before);
}

static void test_context_teardown_drains_streams(void)
{
    /* streams left alive are drained and destroyed with their context */
    aclrtContext ctx;
    CHECK_OK(aclrtCreateContext(&ctx, 0));
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    atomic_int c;
    atomic_init(&c, 0);
    for (int i = 0; i < 100; i++) {
        CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    }
    CHECK_OK(aclrtDestroyContext(ctx));
    CHECK_EQ(atomic_load(&c), 100);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSetDevice(0));
}

static void test_fault_injection_and_device_lost(void)
{
    aclrtStream s = NULL;
    CHECK_OK(aclmockInjectFault("aclrtCreateStream", 1, ACL_ERROR_RT_NO_STREAM_RESOURCE));
    CHECK_EQ(aclrtCreateStream(&s), ACL_ERROR_RT_NO_STREAM_RESOURCE);
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclmockInjectFault("aclrtSynchronizeStream", 1, ACL_ERROR_RT_INTERNAL_ERROR));
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_INTERNAL_ERROR);
    CHECK_OK(aclrtSynchronizeStream(s));
    aclmockClearFaults();

    /* a lost device: stream operations fail with the sticky code */
    CHECK_OK(aclmockSetDeviceLost(0, ACL_ERROR_RT_LOST_HEARTBEAT));
    atomic_int c;
    atomic_init(&c, 0);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_EQ(aclrtLaunchHostFunc(s, counter_fn, &c), ACL_ERROR_RT_LOST_HEARTBEAT);
    aclrtStreamStatus st;
    CHECK_EQ(aclrtStreamQuery(s, &st), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_OK(aclmockSetDeviceLost(0, 0));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtDestroyStream(s));
}

int main(void)
{
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_create_destroy_and_args);
    RUN_TEST(test_no_context);
    RUN_TEST(test_fifo_order);
    RUN_TEST(test_query_and_timeout);
    RUN_TEST(test_destroy_waits_for_pending);
    RUN_TEST(test_destroy_force_discards);
    RUN_TEST(test_failure_modes);
    RUN_TEST(test_abort_and_stop);
    RUN_TEST(test_persistent_captures);
    RUN_TEST(test_sync_during_abort);
    RUN_TEST(test_destroy_force_does_not_wait);
    RUN_TEST(test_attributes);
    RUN_TEST(test_config_handle);
    RUN_TEST(test_res_limits);
    RUN_TEST(test_available_num);
    RUN_TEST(test_available_num_first_context);
    RUN_TEST(test_state_callback);
    RUN_TEST(test_cross_device);
    RUN_TEST(test_sync_device_covers_streams);
    RUN_TEST(test_many_streams_many_threads);
    RUN_TEST(test_context_teardown_drains_streams);
    RUN_TEST(test_fault_injection_and_device_lost);
    CHECK_OK(aclrtResetDevice(0));
    return TEST_REPORT();
}
