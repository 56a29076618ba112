/*
 * test_callback.c - aclrtSubscribeReport / aclrtProcessReport /
 * aclrtLaunchCallback (BLOCK, NO_BLOCK, error codes 107015, 107012, 507012,
 * 100000, wrong thread) and the host-func family (aclrtLaunchHostFunc on the
 * runtime thread or on a subscribed thread).
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

/* ------------------------------------------------------- report thread */

typedef struct reporter {
    pthread_t thread;
    atomic_int stop;
    atomic_int processed_calls;
    int (*process)(int32_t);
    aclrtContext ctx;
} reporter;

static int process_report(int32_t t)
{
    return aclrtProcessReport(t);
}

static int process_hostfunc(int32_t t)
{
    return aclrtProcessHostFunc(t);
}

static void *reporter_main(void *arg)
{
    reporter *r = (reporter *)arg;
    if (r->ctx != NULL) {
        CHECK_OK(aclrtSetCurrentContext(r->ctx));
    }
    while (!atomic_load(&r->stop)) {
        int rc = r->process(20);
        if (rc == ACL_SUCCESS) {
            atomic_fetch_add(&r->processed_calls, 1);
        } else {
            CHECK(rc == ACL_ERROR_RT_REPORT_TIMEOUT || rc == ACL_ERROR_RT_THREAD_SUBSCRIBE);
            if (rc == ACL_ERROR_RT_THREAD_SUBSCRIBE) {
                sleep_ms(1); /* not subscribed (yet / any more) */
            }
        }
    }
    return NULL;
}

static void reporter_start(reporter *r, int (*process)(int32_t))
{
    atomic_init(&r->stop, 0);
    atomic_init(&r->processed_calls, 0);
    r->process = process;
    r->ctx = NULL;
    aclrtGetCurrentContext(&r->ctx);
    pthread_create(&r->thread, NULL, reporter_main, r);
}

static void reporter_stop(reporter *r)
{
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
}

/* ------------------------------------------------------------ callbacks */

typedef struct opener_arg {
    gate *g;
} opener_arg;

static void *open_soon(void *arg)
{
    sleep_ms(20);
    gate_open(((opener_arg *)arg)->g);
    return NULL;
}

typedef struct cb_rec {
    atomic_int calls;
    pthread_t ran_on;
    atomic_int order_pos;
    int order[64];
} cb_rec;

typedef struct cb_item {
    cb_rec *rec;
    int tag;
} cb_item;

static void record_cb(void *arg)
{
    cb_item *it = (cb_item *)arg;
    it->rec->ran_on = pthread_self();
    it->rec->order[atomic_fetch_add(&it->rec->order_pos, 1)] = it->tag;
    atomic_fetch_add(&it->rec->calls, 1);
}

static void test_no_subscription_codes(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    cb_rec rec;
    memset(&rec, 0, sizeof(rec));
    cb_item it = {&rec, 1};
    /* launch without subscription -> 107015 */
    CHECK_EQ(aclrtLaunchCallback(record_cb, &it, ACL_CALLBACK_BLOCK, s), ACL_ERROR_RT_STREAM_NO_CB_REG);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtLaunchCallback");
    /* process on a thread without subscription -> 107012 */
    CHECK_EQ(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    CHECK_EQ(aclrtProcessHostFunc(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    /* bad timeouts -> 100000 */
    CHECK_EQ(aclrtProcessReport(0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtProcessReport(-2), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtProcessHostFunc(0), ACL_ERROR_INVALID_PARAM);
    /* bad arguments */
    CHECK_EQ(aclrtLaunchCallback(NULL, &it, ACL_CALLBACK_BLOCK, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchCallback(record_cb, &it, (aclrtCallbackBlockType)2, s), ACL_ERROR_INVALID_PARAM);
    int junk;
    CHECK_EQ(aclrtSubscribeReport((uint64_t)pthread_self(), (aclrtStream)&junk), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtLaunchCallback(record_cb, &it, ACL_CALLBACK_BLOCK, (aclrtStream)&junk), ACL_ERROR_RT_PARAM_INVALID);
    /* unsubscribe what was never subscribed */
    CHECK_EQ(aclrtUnSubscribeReport((uint64_t)pthread_self(), s), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(atomic_load(&rec.calls), 0);
}

static void test_process_timeout_same_thread(void)
{
    /* the calling thread subscribes itself, launches, then processes */
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    uint64_t me = (uint64_t)pthread_self();
    CHECK_OK(aclrtSubscribeReport(me, s));
    CHECK_EQ(aclrtSubscribeReport(me, s), ACL_ERROR_RT_STREAM_SUBSCRIBE); /* one thread per stream */
    CHECK_EQ(aclrtProcessReport(10), ACL_ERROR_RT_REPORT_TIMEOUT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtProcessReport");
    cb_rec rec;
    memset(&rec, 0, sizeof(rec));
    cb_item it = {&rec, 7};
    CHECK_OK(aclrtLaunchCallback(record_cb, &it, ACL_CALLBACK_NO_BLOCK, s));
    CHECK_OK(aclrtProcessReport(-1)); /* waits for it and runs it here */
    CHECK_EQ(atomic_load(&rec.calls), 1);
    CHECK(pthread_equal(rec.ran_on, pthread_self()));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtUnSubscribeReport(me, s));
    CHECK_EQ(aclrtProcessReport(10), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_block_and_no_block(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    reporter rep;
    reporter_start(&rep, process_report);
    CHECK_OK(aclrtSubscribeReport((uint64_t)rep.thread, s));

    cb_rec rec;
    memset(&rec, 0, sizeof(rec));
    cb_item items[8];
    for (int i = 0; i < 8; i++) {
        items[i].rec = &rec;
        items[i].tag = i;
    }
    /* BLOCK: a host func after the callback sees it finished */
    CHECK_OK(aclrtLaunchCallback(record_cb, &items[0], ACL_CALLBACK_BLOCK, s));
    CHECK_OK(aclrtLaunchHostFunc(s, (aclrtHostFunc)record_cb, &items[1]));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&rec.calls), 2);
    CHECK_EQ(rec.order[0], 0);
    CHECK_EQ(rec.order[1], 1);

    /* the wrong thread: the main thread is not the subscribed one */
    CHECK_EQ(aclrtProcessReport(5), ACL_ERROR_RT_THREAD_SUBSCRIBE);

    /* BLOCK callbacks run on the subscribed thread */
    CHECK_OK(aclrtLaunchCallback(record_cb, &items[2], ACL_CALLBACK_BLOCK, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK(pthread_equal(rec.ran_on, rep.thread));

    /* NO_BLOCK: the stream does not wait; the callback still runs */
    CHECK_OK(aclrtLaunchCallback(record_cb, &items[3], ACL_CALLBACK_NO_BLOCK, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    while (atomic_load(&rec.calls) < 4) {
        sleep_ms(1);
    }
    CHECK(pthread_equal(rec.ran_on, rep.thread));

    /* callbacks on the default stream (NULL) */
    aclrtStream def;
    CHECK_OK(aclrtCtxGetCurrentDefaultStream(&def));
    CHECK_OK(aclrtSubscribeReport((uint64_t)rep.thread, NULL));
    CHECK_OK(aclrtLaunchCallback(record_cb, &items[4], ACL_CALLBACK_BLOCK, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_EQ(atomic_load(&rec.calls), 5);
    CHECK_OK(aclrtUnSubscribeReport((uint64_t)rep.thread, def));

    /* unsubscribe with the wrong thread id -> error; right one -> ok */
    CHECK_EQ(aclrtUnSubscribeReport((uint64_t)pthread_self(), s), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    CHECK_OK(aclrtUnSubscribeReport((uint64_t)rep.thread, s));
    CHECK_EQ(aclrtLaunchCallback(record_cb, &items[5], ACL_CALLBACK_BLOCK, s), ACL_ERROR_RT_STREAM_NO_CB_REG);
    reporter_stop(&rep);
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_block_holds_stream(void)
{
    /* The callback blocks on a gate; the stream must not complete until the
     * gate opens, and a host func after it must not have run. */
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    reporter rep;
    reporter_start(&rep, process_report);
    CHECK_OK(aclrtSubscribeReport((uint64_t)rep.thread, s));
    gate g;
    gate_init(&g);
    atomic_int c;
    atomic_init(&c, 0);
    CHECK_OK(aclrtLaunchCallback(gate_fn, &g, ACL_CALLBACK_BLOCK, s));
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    wait_entered(&g, 1);
    CHECK_EQ(aclrtSynchronizeStreamWithTimeout(s, 10), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK_EQ(atomic_load(&c), 0);
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_OK(aclrtUnSubscribeReport((uint64_t)rep.thread, s));
    reporter_stop(&rep);
    CHECK_OK(aclrtDestroyStream(s));
    gate_destroy(&g);
}

static void test_one_thread_many_streams(void)
{
    aclrtStream s[4];
    reporter rep;
    reporter_start(&rep, process_report);
    cb_rec rec;
    memset(&rec, 0, sizeof(rec));
    cb_item it = {&rec, 0};
    for (int i = 0; i < 4; i++) {
        CHECK_OK(aclrtCreateStream(&s[i]));
        CHECK_OK(aclrtSubscribeReport((uint64_t)rep.thread, s[i]));
    }
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < 4; i++) {
            CHECK_OK(aclrtLaunchCallback(record_cb, &it, ACL_CALLBACK_BLOCK, s[i]));
        }
    }
    /* order[] has 64 slots; 40 callbacks fit */
    for (int i = 0; i < 4; i++) {
        CHECK_OK(aclrtSynchronizeStream(s[i]));
    }
    CHECK_EQ(atomic_load(&rec.calls), 40);
    /* a second thread cannot take a stream that is already served */
    CHECK_EQ(aclrtSubscribeReport((uint64_t)pthread_self(), s[0]), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    /* destroying a subscribed stream drops the subscription */
    CHECK_OK(aclrtDestroyStream(s[0]));
    for (int i = 1; i < 4; i++) {
        CHECK_OK(aclrtUnSubscribeReport((uint64_t)rep.thread, s[i]));
        CHECK_OK(aclrtDestroyStream(s[i]));
    }
    reporter_stop(&rep);
}

static void test_thread_on_two_devices(void)
{
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    if (n < 2) {
        return;
    }
    aclrtStream s0, s1;
    CHECK_OK(aclrtCreateStream(&s0));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtCreateStream(&s1));
    uint64_t me = (uint64_t)pthread_self();
    CHECK_OK(aclrtSubscribeReport(me, s1));
    CHECK_OK(aclrtSetDevice(0));
    /* the same thread id cannot serve two devices */
    CHECK_EQ(aclrtSubscribeReport(me, s0), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    CHECK_OK(aclrtUnSubscribeReport(me, s1));
    CHECK_OK(aclrtSubscribeReport(me, s0));
    CHECK_OK(aclrtUnSubscribeReport(me, s0));
    CHECK_OK(aclrtDestroyStream(s0));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtResetDevice(1));
}

static void test_unsubscribe_cancels_pending(void)
{
    /* BLOCK callbacks queued for a thread that never processes them are
     * cancelled when the thread unsubscribes: the stream then completes. */
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    uint64_t me = (uint64_t)pthread_self();
    CHECK_OK(aclrtSubscribeReport(me, s));
    cb_rec rec;
    memset(&rec, 0, sizeof(rec));
    cb_item it = {&rec, 0};
    atomic_int c;
    atomic_init(&c, 0);
    CHECK_OK(aclrtLaunchCallback(record_cb, &it, ACL_CALLBACK_BLOCK, s));
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_EQ(aclrtSynchronizeStreamWithTimeout(s, 10), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK_OK(aclrtUnSubscribeReport(me, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&rec.calls), 0);
    CHECK_EQ(atomic_load(&c), 1);
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_destroy_runs_pending_callbacks(void)
{
    /* aclrtDestroyStream waits for pending work, callbacks included: they
     * run on the (still subscribed) report thread before destroy returns.
     * The force variant drops them. */
    reporter rep;
    reporter_start(&rep, process_report);
    cb_rec rec;
    memset(&rec, 0, sizeof(rec));
    cb_item it = {&rec, 0};
    gate g;
    gate_init(&g);
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtSubscribeReport((uint64_t)rep.thread, s));
    hold_stream(s, &g);
    for (int i = 0; i < 5; i++) {
        CHECK_OK(aclrtLaunchCallback(record_cb, &it, ACL_CALLBACK_BLOCK, s));
    }
    gate_open(&g);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(atomic_load(&rec.calls), 5);

    gate g2;
    gate_init(&g2);
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtSubscribeReport((uint64_t)rep.thread, s));
    hold_stream(s, &g2);
    for (int i = 0; i < 5; i++) {
        CHECK_OK(aclrtLaunchCallback(record_cb, &it, ACL_CALLBACK_BLOCK, s));
    }
    wait_entered(&g2, 1);
    opener_arg oa = {&g2};
    pthread_t t;
    pthread_create(&t, NULL, open_soon, &oa);
    CHECK_OK(aclrtDestroyStreamForce(s)); /* does not wait, not even for the running gate */
    pthread_join(t, NULL);
    CHECK_OK(aclrtSynchronizeDevice()); /* the gate task of the destroyed stream has returned */
    CHECK_EQ(atomic_load(&rec.calls), 5);
    reporter_stop(&rep);
    gate_destroy(&g);
    gate_destroy(&g2);
}

/* ------------------------------------------------------------ host funcs */

typedef struct hf_rec {
    atomic_int calls;
    pthread_t ran_on;
} hf_rec;

static void hf_fn(void *arg)
{
    hf_rec *r = (hf_rec *)arg;
    r->ran_on = pthread_self();
    atomic_fetch_add(&r->calls, 1);
}

static void test_host_func_runtime_thread(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    hf_rec r;
    memset(&r, 0, sizeof(r));
    CHECK_EQ(aclrtLaunchHostFunc(s, NULL, &r), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtLaunchHostFunc(s, hf_fn, &r));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&r.calls), 1);
    CHECK(!pthread_equal(r.ran_on, pthread_self())); /* a runtime-owned thread */
    CHECK_OK(aclrtLaunchHostFunc(NULL, hf_fn, &r));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_EQ(atomic_load(&r.calls), 2);
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_host_func_subscribed(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    reporter rep;
    reporter_start(&rep, process_hostfunc);
    CHECK_OK(aclrtSubscribeHostFunc((uint64_t)rep.thread, s));
    CHECK_EQ(aclrtSubscribeHostFunc((uint64_t)rep.thread, s), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    hf_rec r;
    memset(&r, 0, sizeof(r));
    atomic_int c;
    atomic_init(&c, 0);
    CHECK_OK(aclrtLaunchHostFunc(s, hf_fn, &r));
    CHECK_OK(aclrtLaunchHostFunc(s, counter_fn, &c));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&r.calls), 1);
    CHECK_EQ(atomic_load(&c), 1);
    CHECK(pthread_equal(r.ran_on, rep.thread));
    /* host-func and report subscriptions are separate */
    CHECK_EQ(aclrtProcessHostFunc(5), ACL_ERROR_RT_THREAD_SUBSCRIBE);
    CHECK_EQ(aclrtUnSubscribeHostFunc((uint64_t)pthread_self(), s), ACL_ERROR_RT_STREAM_SUBSCRIBE);
    CHECK_OK(aclrtUnSubscribeHostFunc((uint64_t)rep.thread, s));
    reporter_stop(&rep);
    /* after unsubscribing, host funcs run on the runtime thread again */
    CHECK_OK(aclrtLaunchHostFunc(s, hf_fn, &r));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_EQ(atomic_load(&r.calls), 2);
    CHECK(!pthread_equal(r.ran_on, rep.thread));
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_finalize_hook_unblocks(void)
{
    /* A processing thread waiting forever is released when every
     * subscription goes away (what stream_callbacks_finalize does at
     * aclFinalize); here via stream destruction. */
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtSubscribeReport((uint64_t)pthread_self(), s));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(aclrtProcessReport(-1), ACL_ERROR_RT_THREAD_SUBSCRIBE);
}

/* ------------------------------------------- calls that would wait for themselves */

typedef struct self_call {
    int which;
    aclrtContext ctx;
    aclError rc;
} self_call;

static void self_call_fn(void *arg)
{
    self_call *c = (self_call *)arg;
    switch (c->which) {
    case 0: c->rc = aclrtResetDevice(3); break;
    case 1: c->rc = aclrtResetDeviceForce(3); break;
    case 2: c->rc = aclrtDestroyContext(c->ctx); break;
    case 3:
        CHECK_OK(aclrtSetCurrentContext(c->ctx));
        c->rc = aclrtSynchronizeDevice();
        break;
    case 4:
        CHECK_OK(aclrtSetCurrentContext(c->ctx));
        c->rc = aclrtSynchronizeDeviceWithTimeout(0); /* 0 = forever */
        break;
    case 5: c->rc = aclrtDeviceTaskAbort(3, 0); /* 0 = no time limit */ break;
    default: c->rc = aclFinalize(); break;
    }
}

/* A host function (it runs on its stream's worker) that releases its own
 * device/context, finalizes, or waits for its own device gets 107000 instead of
 * waiting for itself forever; nothing is torn down and the stream stays usable. */
static void test_task_cannot_wait_for_itself(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(3));
    aclrtContext primary = NULL;
    CHECK_OK(aclrtGetCurrentContext(&primary));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    const int cases[] = {0, 1, 3, 4, 5, 6};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        self_call c = {cases[i], primary, -1};
        CHECK_OK(aclrtLaunchHostFunc(s, self_call_fn, &c));
        CHECK_OK(aclrtSynchronizeStream(s));
        CHECK_EQ(c.rc, ACL_ERROR_RT_PARAM_INVALID);
        CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 1);
    }
    /* an explicit context destroyed from a task of one of its streams */
    aclrtContext ctx = NULL;
    CHECK_OK(aclrtCreateContext(&ctx, 3));
    aclrtStream s2 = NULL;
    CHECK_OK(aclrtCreateStream(&s2));
    self_call c = {2, ctx, -1};
    CHECK_OK(aclrtLaunchHostFunc(s2, self_call_fn, &c));
    CHECK_OK(aclrtSynchronizeStream(s2));
    CHECK_EQ(c.rc, ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 2);
    /* from another context's stream it is fine */
    c.rc = -1;
    CHECK_OK(aclrtLaunchHostFunc(s, self_call_fn, &c));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(c.rc);
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_OK(aclrtSetCurrentContext(primary));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(3));
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_OK(aclrtSetDevice(0));
}

static void reset_dev4_cb(void *arg)
{
    *(aclError *)arg = aclrtResetDevice(4);
}

/* A callback run by a report thread (not the worker) may release the device of
 * its stream: the stream's pending callbacks are cancelled, nothing hangs. */
static void test_report_thread_resets_device(void)
{
    CHECK_OK(aclrtSetDevice(4));
    reporter rep;
    reporter_start(&rep, process_report);
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtSubscribeReport((uint64_t)rep.thread, s));
    aclError rc = -1;
    CHECK_OK(aclrtLaunchCallback(reset_dev4_cb, &rc, ACL_CALLBACK_BLOCK, s));
    while (aclmockGetStat(4, ACLMOCK_STAT_CONTEXTS) != 0) {
        sleep_ms(1);
    }
    reporter_stop(&rep);
    CHECK_OK(rc);
    CHECK_EQ(aclmockGetStat(4, ACLMOCK_STAT_STREAMS), 0);
    CHECK_OK(aclrtSetDevice(0));
}

int main(void)
{
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_no_subscription_codes);
    RUN_TEST(test_process_timeout_same_thread);
    RUN_TEST(test_block_and_no_block);
    RUN_TEST(test_block_holds_stream);
    RUN_TEST(test_one_thread_many_streams);
    RUN_TEST(test_thread_on_two_devices);
    RUN_TEST(test_unsubscribe_cancels_pending);
    RUN_TEST(test_destroy_runs_pending_callbacks);
    RUN_TEST(test_host_func_runtime_thread);
    RUN_TEST(test_host_func_subscribed);
    RUN_TEST(test_finalize_hook_unblocks);
    RUN_TEST(test_task_cannot_wait_for_itself);
    RUN_TEST(test_report_thread_resets_device);
    CHECK_OK(aclrtResetDevice(0));
    return TEST_REPORT();
}
