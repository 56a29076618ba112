/*
 * test_event.c - events: flags validation, record/query/sync, re-record
 * semantics, cross-stream ordering with StreamWaitEvent, timestamps and
 * elapsed time (and their errors), reset, Ex events, ids, counts, garbage
 * handles. No timing assertions (only monotonicity of recorded timestamps).
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

/* aclrtQueryEvent is deprecated but still exported and used by torch_npu. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static void test_create_flags(void)
{
    aclrtEvent e = NULL;
    int64_t before = aclmockGetStat(0, ACLMOCK_STAT_EVENTS);
    CHECK_EQ(aclrtCreateEvent(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtCreateEvent(&e));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_EVENTS), before + 1);
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_EVENTS), before);

    /* aclrtCreateEventWithFlag: non-zero, <= 0x3F, 0x10 / 0x20 alone */
    CHECK_EQ(aclrtCreateEventWithFlag(&e, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventWithFlag(&e, 0x40), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventWithFlag(&e, ACL_EVENT_EXTERNAL | ACL_EVENT_SYNC), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventWithFlag(&e, ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_SYNC), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventWithFlag(NULL, ACL_EVENT_SYNC), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_EXTERNAL));
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
    CHECK_OK(aclrtDestroyEvent(e));

    /* aclrtCreateEventExWithFlag: bits 0x1..0x8, or IPC alone; EXTERNAL not accepted */
    CHECK_EQ(aclrtCreateEventExWithFlag(&e, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventExWithFlag(&e, ACL_EVENT_EXTERNAL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCreateEventExWithFlag(&e, ACL_EVENT_IPC | ACL_EVENT_SYNC), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
    CHECK_OK(aclrtDestroyEvent(e));

    /* garbage / destroyed handles */
    CHECK_EQ(aclrtDestroyEvent(e), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtDestroyEvent(NULL), ACL_ERROR_INVALID_PARAM);
    int junk = 0;
    aclrtEventRecordedStatus rs;
    CHECK_EQ(aclrtQueryEventStatus((aclrtEvent)&junk, &rs), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSynchronizeEvent((aclrtEvent)(uintptr_t)0x10), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtRecordEvent((aclrtEvent)&junk, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtStreamWaitEvent(NULL, (aclrtEvent)&junk), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtRecordEvent(NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "event");
}

static void *no_ctx_thread(void *arg)
{
    (void)arg;
    aclrtEvent e;
    CHECK_EQ(aclrtCreateEvent(&e), ACL_ERROR_RT_CONTEXT_NULL);
    uint32_t n;
    CHECK_EQ(aclrtGetEventAvailNum(&n), ACL_ERROR_RT_CONTEXT_NULL);
    return NULL;
}

static void test_no_context(void)
{
    pthread_t t;
    pthread_create(&t, NULL, no_ctx_thread, NULL);
    pthread_join(t, NULL);
}

static void test_record_query_sync(void)
{
    aclrtStream s;
    aclrtEvent e;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEvent(&e));
    aclrtEventRecordedStatus rs = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    aclrtEventStatus es = ACL_EVENT_STATUS_COMPLETE;
    aclrtEventWaitStatus ws = ACL_EVENT_WAIT_STATUS_COMPLETE;
    /* never recorded */
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    CHECK_OK(aclrtQueryEvent(e, &es));
    CHECK_EQ(es, ACL_EVENT_STATUS_NOT_READY);
    CHECK_OK(aclrtSynchronizeEvent(e)); /* nothing to wait for */
    CHECK_EQ(aclrtQueryEventStatus(e, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtQueryEvent(e, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtQueryEventWaitStatus(e, NULL), ACL_ERROR_INVALID_PARAM);

    gate g;
    gate_init(&g);
    hold_stream(s, &g);
    CHECK_OK(aclrtRecordEvent(e, s));
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    CHECK_OK(aclrtQueryEventWaitStatus(e, &ws));
    CHECK_EQ(ws, ACL_EVENT_WAIT_STATUS_NOT_READY);
    CHECK_EQ(aclrtSynchronizeEventWithTimeout(e, 20), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSynchronizeEventWithTimeout");
    CHECK_EQ(aclrtSynchronizeEventWithTimeout(e, -7), ACL_ERROR_RT_PARAM_INVALID);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclrtQueryEvent(e, &es));
    CHECK_EQ(es, ACL_EVENT_STATUS_COMPLETE);
    CHECK_OK(aclrtQueryEventWaitStatus(e, &ws));
    CHECK_EQ(ws, ACL_EVENT_WAIT_STATUS_COMPLETE);
    CHECK_OK(aclrtSynchronizeEventWithTimeout(e, 1000));

    /* record on the default stream via NULL */
    CHECK_OK(aclrtRecordEvent(e, NULL));
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyEvent(e));
    gate_destroy(&g);
}

static void test_rerecord_follows_latest(void)
{
    aclrtStream s1, s2;
    aclrtEvent e;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
    CHECK_OK(aclrtRecordEvent(e, s1));
    CHECK_OK(aclrtSynchronizeEvent(e));
    aclrtEventRecordedStatus rs;
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE);

    /* a new record behind a gate: the event is pending again */
    gate g;
    gate_init(&g);
    hold_stream(s2, &g);
    CHECK_OK(aclrtRecordEvent(e, s2));
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY);
    CHECK_EQ(aclrtSynchronizeEventWithTimeout(e, 10), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    /* ... and a timestamp query reports not complete */
    uint64_t ts = 0;
    CHECK_EQ(aclrtEventGetTimestamp(e, &ts), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_OK(aclrtEventGetTimestamp(e, &ts));
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtDestroyEvent(e));
    gate_destroy(&g);
}

typedef struct order_log {
    atomic_int pos;
    int order[4];
} order_log;
typedef struct order_item {
    order_log *log;
    int tag;
} order_item;
static void order_fn(void *arg)
{
    order_item *it = (order_item *)arg;
    it->log->order[atomic_fetch_add(&it->log->pos, 1)] = it->tag;
}

static void test_cross_stream_ordering(void)
{
    /* s1: gate, A, record ev. s2: wait ev, B. B must run after A although s2
     * is free and B was submitted while s1 was still held. */
    aclrtStream s1, s2;
    aclrtEvent ev;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC));
    order_log log;
    atomic_init(&log.pos, 0);
    order_item a = {&log, 1}, b = {&log, 2};
    gate g;
    gate_init(&g);
    hold_stream(s1, &g);
    CHECK_OK(aclrtLaunchHostFunc(s1, order_fn, &a));
    CHECK_OK(aclrtRecordEvent(ev, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    CHECK_OK(aclrtLaunchHostFunc(s2, order_fn, &b));
    CHECK_EQ(aclrtSynchronizeStreamWithTimeout(s2, 10), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    aclrtStreamStatus st;
    CHECK_OK(aclrtStreamQuery(s2, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_NOT_READY);
    CHECK_EQ(atomic_load(&log.pos), 0);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStream(s2));
    CHECK_EQ(atomic_load(&log.pos), 2);
    CHECK_EQ(log.order[0], 1);
    CHECK_EQ(log.order[1], 2);

    /* waiting on a never-recorded or completed event does not block */
    aclrtEvent fresh;
    CHECK_OK(aclrtCreateEventWithFlag(&fresh, ACL_EVENT_SYNC));
    CHECK_OK(aclrtStreamWaitEvent(s2, fresh));
    CHECK_OK(aclrtStreamWaitEvent(s2, ev));
    CHECK_OK(aclrtSynchronizeStream(s2));

    /* variants */
    CHECK_EQ(aclrtStreamWaitEventWithFlag(s2, ev, 0, 7), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtStreamWaitEventWithFlag(s2, ev, 0, ACL_EVENT_WAIT_DEFAULT));
    CHECK_EQ(aclrtStreamWaitEventWithTimeout(s2, ev, -3), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtStreamWaitEventWithTimeout(s2, ev, 1000));
    CHECK_EQ(aclrtStreamWaitEvent(s2, NULL), ACL_ERROR_INVALID_PARAM);

    /* events without a sync flag cannot be waited for or reset */
    aclrtEvent tl;
    CHECK_OK(aclrtCreateEventWithFlag(&tl, ACL_EVENT_TIME_LINE));
    CHECK_EQ(aclrtStreamWaitEvent(s2, tl), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtResetEvent(tl, s2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSynchronizeStream(s2));

    CHECK_OK(aclrtDestroyEvent(tl));
    CHECK_OK(aclrtDestroyEvent(fresh));
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    gate_destroy(&g);
}

static void test_timing(void)
{
    aclrtStream s;
    aclrtEvent a, b, c, plain;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEventWithFlag(&a, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&b, ACL_EVENT_TIME_LINE | ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEvent(&c)); /* default flags include TIME_LINE */
    CHECK_OK(aclrtCreateEventWithFlag(&plain, ACL_EVENT_SYNC));
    float ms = -1.0f;

    /* not recorded yet -> 507000 */
    CHECK_EQ(aclrtEventElapsedTime(&ms, a, b), ACL_ERROR_RT_INTERNAL_ERROR);
    uint64_t ta = 0, tb = 0, tc = 0;
    CHECK_EQ(aclrtEventGetTimestamp(a, &ta), ACL_ERROR_RT_INTERNAL_ERROR);

    CHECK_OK(aclrtRecordEvent(a, s));
    for (int i = 0; i < 3; i++) {
        atomic_int dummy;
        atomic_init(&dummy, 0);
        CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &dummy));
        CHECK_OK(aclrtSynchronizeStream(s));
    }
    CHECK_OK(aclrtRecordEvent(b, s));
    CHECK_OK(aclrtRecordEvent(c, s));
    CHECK_OK(aclrtRecordEvent(plain, s));
    CHECK_OK(aclrtSynchronizeEvent(b));
    CHECK_OK(aclrtSynchronizeEvent(c));
    CHECK_OK(aclrtSynchronizeEvent(plain));
    CHECK_OK(aclrtEventElapsedTime(&ms, a, b));
    CHECK(ms >= 0.0f);
    CHECK_OK(aclrtEventGetTimestamp(a, &ta));
    CHECK_OK(aclrtEventGetTimestamp(b, &tb));
    CHECK_OK(aclrtEventGetTimestamp(c, &tc));
    CHECK_LE(ta, tb);
    CHECK_LE(tb, tc);
    CHECK_OK(aclrtEventElapsedTime(&ms, a, c));

    /* end before start -> reversal (unless the clock did not advance) */
    if (tb > ta) {
        CHECK_EQ(aclrtEventElapsedTime(&ms, b, a), ACL_ERROR_RT_EVENT_TIMESTAMP_REVERSAL);
    }
    /* without TIME_LINE -> 107006 */
    CHECK_EQ(aclrtEventElapsedTime(&ms, a, plain), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    CHECK_EQ(aclrtEventGetTimestamp(plain, &ta), ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID);
    /* NULLs -> 100000 */
    CHECK_EQ(aclrtEventElapsedTime(NULL, a, b), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtEventElapsedTime(&ms, NULL, b), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtEventElapsedTime(&ms, a, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtEventGetTimestamp(a, NULL), ACL_ERROR_INVALID_PARAM);
    int junk;
    CHECK_EQ(aclrtEventElapsedTime(&ms, a, (aclrtEvent)&junk), ACL_ERROR_RT_PARAM_INVALID);

    /* pending end record -> not complete */
    gate g;
    gate_init(&g);
    hold_stream(s, &g);
    CHECK_OK(aclrtRecordEvent(b, s));
    CHECK_EQ(aclrtEventElapsedTime(&ms, a, b), ACL_ERROR_RT_EVENT_NOT_COMPLETE);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeEvent(b));
    CHECK_OK(aclrtEventElapsedTime(&ms, a, b));
    CHECK(ms >= 0.0f);
    uint64_t tb2 = 0;
    CHECK_OK(aclrtEventGetTimestamp(b, &tb2));
    CHECK_GE(tb2, tb);

    /* monotonic across many records on one stream */
    uint64_t prev = 0;
    int nonmono = 0;
    for (int i = 0; i < 200; i++) {
        CHECK_OK(aclrtRecordEvent(a, s));
        CHECK_OK(aclrtSynchronizeEvent(a));
        uint64_t t = 0;
        CHECK_OK(aclrtEventGetTimestamp(a, &t));
        nonmono += t < prev;
        prev = t;
    }
    CHECK_EQ(nonmono, 0);

    CHECK_OK(aclrtDestroyEvent(a));
    CHECK_OK(aclrtDestroyEvent(b));
    CHECK_OK(aclrtDestroyEvent(c));
    CHECK_OK(aclrtDestroyEvent(plain));
    CHECK_OK(aclrtDestroyStream(s));
    gate_destroy(&g);
}

static void test_reset(void)
{
    aclrtStream s;
    aclrtEvent e;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC));
    CHECK_OK(aclrtRecordEvent(e, s));
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_OK(aclrtResetEvent(e, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    aclrtEventRecordedStatus rs;
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_NOT_READY); /* back to "not recorded" */
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_EQ(aclrtResetEvent(NULL, s), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_ex_events(void)
{
    aclrtStream s;
    aclrtEvent e;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEventExWithFlag(&e, ACL_EVENT_SYNC));
    aclrtEventRecordedStatus rs = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    /* complete before the first record (doc) */
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    aclrtEventStatus es;
    aclrtEventWaitStatus ws;
    CHECK_EQ(aclrtQueryEvent(e, &es), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtQueryEventWaitStatus(e, &ws), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtResetEvent(e, s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    for (int i = 0; i < 10; i++) { /* reusable by re-recording */
        CHECK_OK(aclrtRecordEvent(e, s));
        CHECK_OK(aclrtStreamWaitEvent(NULL, e));
    }
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtQueryEventStatus(e, &rs));
    CHECK_EQ(rs, ACL_EVENT_RECORDED_STATUS_COMPLETE);
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_destroy_pending_event(void)
{
    /* destroying an event with a pending record and a pending wait is
     * allowed and asynchronous; the streams still complete */
    aclrtStream s1, s2;
    aclrtEvent e;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC));
    gate g;
    gate_init(&g);
    hold_stream(s1, &g);
    CHECK_OK(aclrtRecordEvent(e, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, e));
    CHECK_OK(aclrtDestroyEvent(e));
    aclrtEventRecordedStatus rs;
    CHECK_EQ(aclrtQueryEventStatus(e, &rs), ACL_ERROR_RT_PARAM_INVALID);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStream(s2));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    gate_destroy(&g);
}

static void test_op_wait_timeout(void)
{
    /* aclrtSetOpWaitTimeout bounds event waits on streams (seconds) */
    aclrtStream s, holder;
    aclrtEvent e;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&holder));
    CHECK_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC));
    gate g;
    gate_init(&g);
    hold_stream(holder, &g);
    CHECK_OK(aclrtRecordEvent(e, holder));
    CHECK_OK(aclrtSetOpWaitTimeout(1));
    CHECK_OK(aclrtStreamWaitEvent(s, e));
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_OK(aclrtSetOpWaitTimeout(0));
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStream(holder));
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(holder));
    gate_destroy(&g);
}

static void test_ids_and_counts(void)
{
    aclrtEvent a, b;
    uint32_t n0 = 0, n1 = 0, ia = 0, ib = 0;
    CHECK_OK(aclrtGetEventAvailNum(&n0));
    CHECK_OK(aclrtCreateEvent(&a));
    CHECK_OK(aclrtCreateEvent(&b));
    CHECK_OK(aclrtGetEventAvailNum(&n1));
    CHECK_EQ(n1 + 2, n0);
    CHECK_OK(aclrtGetEventId(a, &ia));
    CHECK_OK(aclrtGetEventId(b, &ib));
    CHECK_NE(ia, ib);
    CHECK_EQ(aclrtGetEventId(a, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetEventAvailNum(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDestroyEvent(a));
    CHECK_OK(aclrtDestroyEvent(b));
}

static void test_record_with_flag(void)
{
    aclrtEvent e, ext;
    CHECK_OK(aclrtCreateEventWithFlag(&e, ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&ext, ACL_EVENT_EXTERNAL));
    CHECK_OK(aclrtRecordEventWithFlag(e, NULL, ACL_EVENT_RECORD_DEFAULT));
    CHECK_EQ(aclrtRecordEventWithFlag(e, NULL, ACL_EVENT_RECORD_EXTERNAL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtRecordEventWithFlag(e, NULL, 9), ACL_ERROR_RT_PARAM_INVALID);
    /* acl_next_semantics.md §2.5 (EVT#aclrtRecordEventWithFlag): outside capture the
     * external record flag is an error (the capture tests cover it inside one) */
    CHECK_EQ(aclrtRecordEventWithFlag(ext, NULL, ACL_EVENT_RECORD_EXTERNAL), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    CHECK_OK(aclrtRecordEventWithFlag(ext, NULL, ACL_EVENT_RECORD_DEFAULT));
    CHECK_OK(aclrtSynchronizeEvent(e));
    CHECK_OK(aclrtSynchronizeEvent(ext));
    float ms;
    CHECK_EQ(aclrtEventElapsedTime(&ms, ext, ext), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtDestroyEvent(e));
    CHECK_OK(aclrtDestroyEvent(ext));
}

#define EV_THREADS 8
static void *event_pingpong_thread(void *arg)
{
    int idx = (int)(intptr_t)arg;
    uint32_t n = 1;
    aclrtGetDeviceCount(&n);
    int32_t dev = (int32_t)(idx % (int)(n > 4 ? 4 : n));
    CHECK_OK(aclrtSetDevice(dev));
    aclrtStream a, b;
    aclrtEvent ea, eb;
    CHECK_OK(aclrtCreateStream(&a));
    CHECK_OK(aclrtCreateStream(&b));
    CHECK_OK(aclrtCreateEventWithFlag(&ea, ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&eb, ACL_EVENT_SYNC));
    atomic_int c;
    atomic_init(&c, 0);
    for (int i = 0; i < 300; i++) {
        CHECK_OK(aclrtLaunchHostFunc(a, counter_fn, &c));
        CHECK_OK(aclrtRecordEvent(ea, a));
        CHECK_OK(aclrtStreamWaitEvent(b, ea));
        CHECK_OK(aclrtLaunchHostFunc(b, counter_fn, &c));
        CHECK_OK(aclrtRecordEvent(eb, b));
        CHECK_OK(aclrtStreamWaitEvent(a, eb));
    }
    CHECK_OK(aclrtSynchronizeStream(a));
    CHECK_OK(aclrtSynchronizeStream(b));
    CHECK_EQ(atomic_load(&c), 600);
    CHECK_OK(aclrtDestroyEvent(ea));
    CHECK_OK(aclrtDestroyEvent(eb));
    CHECK_OK(aclrtDestroyStream(a));
    CHECK_OK(aclrtDestroyStream(b));
    CHECK_OK(aclrtResetDevice(dev));
    return NULL;
}

static void test_many_threads_pingpong(void)
{
    pthread_t t[EV_THREADS];
    int64_t before = aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_EVENTS);
    for (int i = 0; i < EV_THREADS; i++) {
        pthread_create(&t[i], NULL, event_pingpong_thread, (void *)(intptr_t)i);
    }
    for (int i = 0; i < EV_THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_EVENTS), before);
}

/* aclFinalize releases every resource: events are not owned by a context, so
 * they must not outlive it (counts drop to 0, handles become stale). */
static void test_finalize_releases_events(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(1));
    aclrtEvent e = NULL, e2 = NULL;
    CHECK_OK(aclrtCreateEvent(&e));
    CHECK_OK(aclrtCreateEventWithFlag(&e2, ACL_EVENT_SYNC));
    CHECK_OK(aclrtRecordEvent(e2, NULL));
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_EVENTS), 2);
    uint32_t avail_before = 0, avail_after = 0;
    CHECK_OK(aclrtGetEventAvailNum(&avail_before));
    CHECK_OK(aclFinalize());
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_EVENTS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_EVENTS), 0);
    CHECK_EQ(aclrtDestroyEvent(e), ACL_ERROR_RT_PARAM_INVALID);
    aclrtEventRecordedStatus rs;
    CHECK_EQ(aclrtQueryEventStatus(e2, &rs), ACL_ERROR_RT_PARAM_INVALID);
    /* a new generation starts with the full per-device budget */
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtGetEventAvailNum(&avail_after));
    CHECK_EQ(avail_after, avail_before + 2);
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclFinalize());
}

int main(void)
{
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_create_flags);
    RUN_TEST(test_no_context);
    RUN_TEST(test_record_query_sync);
    RUN_TEST(test_rerecord_follows_latest);
    RUN_TEST(test_cross_stream_ordering);
    RUN_TEST(test_timing);
    RUN_TEST(test_reset);
    RUN_TEST(test_ex_events);
    RUN_TEST(test_destroy_pending_event);
    RUN_TEST(test_op_wait_timeout);
    RUN_TEST(test_ids_and_counts);
    RUN_TEST(test_record_with_flag);
    RUN_TEST(test_many_threads_pingpong);
    CHECK_OK(aclrtResetDevice(0));
    RUN_TEST(test_finalize_releases_events);
    return TEST_REPORT();
}
