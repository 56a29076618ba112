/* test_graph_capture.c - stream capture into model run instances and replay
 * (acl_next_semantics.md §2.2-2.6, 2.9, 2.10): a two-stream fork/join graph of
 * copies and memsets replayed 1000 times, the documented capture errors, the
 * capture modes across threads, task-group update, introspection, management. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

/* aclmdlRIDebugPrint is deprecated in the header (use the JSON print) but still tested */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define N 4096

static aclrtStream new_stream(void)
{
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    return s;
}

static aclmdlRICaptureStatus status_of(aclrtStream s, aclmdlRI *ri)
{
    aclmdlRICaptureStatus st = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    aclmdlRI dummy = NULL;
    CHECK_OK(aclmdlRICaptureGetInfo(s, &st, ri != NULL ? ri : &dummy));
    return st;
}

/* §2.2, G-CAP2: fork on s2 by an event recorded on the origin, join back by an
 * event recorded on s2 and waited on by the origin; memsets and copies on both
 * streams; replayed 1000 times, each replay sees the inputs as they are then. */
static void test_two_stream_replay(void)
{
    aclrtStream s1 = new_stream(), s2 = new_stream(), exec = new_stream();
    aclrtEvent fork = NULL, join = NULL;
    CHECK_OK(aclrtCreateEventWithFlag(&fork, ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&join, ACL_EVENT_SYNC));
    void *a = NULL, *b = NULL, *c = NULL, *host = NULL, *out = NULL;
    CHECK_OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&c, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&host, N));
    CHECK_OK(aclrtMallocHost(&out, 2 * N));

    CHECK_OK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    aclmdlRI info = NULL;
    CHECK_EQ(status_of(s1, &info), ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    CHECK(info != NULL);
    CHECK_EQ(status_of(s2, NULL), ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    CHECK_OK(aclrtMemcpyAsync(a, N, host, N, ACL_MEMCPY_HOST_TO_DEVICE, s1)); /* a = host */
    CHECK_OK(aclrtRecordEvent(fork, s1));
    CHECK_OK(aclrtStreamWaitEvent(s2, fork)); /* s2 joins the capture */
    CHECK_EQ(status_of(s2, NULL), ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    CHECK_OK(aclrtMemcpyAsync(b, N, a, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s2)); /* b = a (on s2) */
    CHECK_OK(aclrtMemsetAsync(c, N, 0x5A, N, s1));                           /* c = 0x5A (on s1) */
    CHECK_OK(aclrtRecordEvent(join, s2));
    CHECK_OK(aclrtStreamWaitEvent(s1, join));
    CHECK_OK(aclrtMemcpyAsync(out, 2 * N, b, N, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    CHECK_OK(aclrtMemcpyAsync((char *)out + N, N, c, N, ACL_MEMCPY_DEVICE_TO_HOST, s1));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s1, &ri));
    CHECK(ri == info);
    CHECK_EQ(status_of(s1, NULL), ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    CHECK_EQ(status_of(s2, NULL), ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    /* nothing ran during the capture */
    unsigned char *o = out;
    memset(host, 1, N);
    memset(out, 0, 2 * N);
    CHECK_OK(aclrtSynchronizeStream(s1));
    CHECK_EQ(o[0], 0);

    int bad = 0;
    for (int i = 0; i < 1000; i++) {
        memset(host, i & 0xFF, N);
        CHECK_OK(aclmdlRIExecuteAsync(ri, exec));
        CHECK_OK(aclrtSynchronizeStream(exec));
        bad += o[0] != (unsigned char)(i & 0xFF) || o[N - 1] != (unsigned char)(i & 0xFF) || o[N] != 0x5A ||
               o[2 * N - 1] != 0x5A;
    }
    CHECK_EQ(bad, 0);
    /* the streams are free again: a plain task runs at once */
    CHECK_OK(aclrtMemsetAsync(c, N, 1, N, s2));
    CHECK_OK(aclrtSynchronizeStream(s2));

    /* introspection: two model streams, their tasks and types (§2.10) */
    uint32_t ns = 0;
    CHECK_OK(aclmdlRIGetStreams(ri, NULL, &ns));
    CHECK_EQ(ns, 2);
    aclrtStream ms[2] = {NULL, NULL};
    uint32_t one = 1;
    CHECK_EQ(aclmdlRIGetStreams(ri, ms, &one), ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY);
    CHECK_OK(aclmdlRIGetStreams(ri, ms, &ns));
    uint32_t nt = 0;
    CHECK_OK(aclmdlRIGetTasksByStream(ms[0], NULL, &nt));
    CHECK_EQ(nt, 6); /* copy, record, memset, wait, copy, copy */
    aclmdlRITask tasks[8];
    uint32_t small = 2;
    CHECK_EQ(aclmdlRIGetTasksByStream(ms[0], tasks, &small), ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY);
    CHECK_OK(aclmdlRIGetTasksByStream(ms[0], tasks, &nt));
    aclmdlRITaskType type;
    CHECK_OK(aclmdlRITaskGetType(tasks[0], &type));
    CHECK_EQ(type, ACL_MODEL_RI_TASK_DEFAULT);
    CHECK_OK(aclmdlRITaskGetType(tasks[1], &type));
    CHECK_EQ(type, ACL_MODEL_RI_TASK_EVENT_RECORD);
    CHECK_OK(aclmdlRITaskGetType(tasks[3], &type));
    CHECK_EQ(type, ACL_MODEL_RI_TASK_EVENT_WAIT);
    aclmdlRITaskParams p;
    CHECK_OK(aclmdlRITaskGetParams(tasks[1], &p));
    CHECK(p.eventRecordTaskParams.event == fork);
    uint32_t id0 = 0, id1 = 0;
    CHECK_OK(aclmdlRITaskGetSeqId(tasks[0], &id0));
    CHECK_OK(aclmdlRITaskGetSeqId(tasks[1], &id1));
    CHECK_LT(id0, id1);
    CHECK_OK(aclmdlRIGetTasksByStream(ms[1], NULL, &nt));
    CHECK_EQ(nt, 3); /* wait, copy, record */
    CHECK_EQ(aclmdlRIGetTasksByStream(s1, NULL, &nt), ACL_ERROR_RT_PARAM_INVALID); /* not a model stream */

    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_EQ(aclmdlRIExecuteAsync(ri, exec), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtFree(c));
    CHECK_OK(aclrtFreeHost(host));
    CHECK_OK(aclrtFreeHost(out));
    CHECK_OK(aclrtDestroyEvent(fork));
    CHECK_OK(aclrtDestroyEvent(join));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
    CHECK_OK(aclrtDestroyStream(exec));
}

/* Begins a GLOBAL capture on a new stream with one memset recorded. */
static aclrtStream begin_capture(void *dev, aclmdlRICaptureMode mode)
{
    aclrtStream s = new_stream();
    CHECK_OK(aclmdlRICaptureBegin(s, mode));
    CHECK_OK(aclrtMemsetAsync(dev, 64, 1, 64, s));
    return s;
}

/* Ends a capture expected to fail with `code`, destroys what came out. */
static void end_expect(aclrtStream s, aclError code)
{
    aclmdlRI ri = NULL;
    CHECK_EQ(aclmdlRICaptureEnd(s, &ri), code);
    if (code == ACL_SUCCESS) {
        CHECK_OK(aclmdlRIDestroy(ri));
    } else {
        CHECK(ri == NULL);
    }
    CHECK_OK(aclrtDestroyStream(s));
}

/* §2.2-2.5: every documented capture error. */
static void test_capture_errors(void)
{
    void *dev = NULL, *host = NULL;
    CHECK_OK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&host, 4096));
    char pageable[64];
    aclmdlRI ri = NULL;

    /* 107031: capturing the default stream; using it while capturing invalidates */
    CHECK_EQ(aclmdlRICaptureBegin(NULL, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT);
    aclrtStream s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_EQ(aclrtMemsetAsync(dev, 64, 0, 64, NULL), ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT);
    CHECK_EQ(status_of(s, NULL), ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED);
    /* 507903: further tasks and End on an invalidated capture */
    CHECK_EQ(aclrtMemsetAsync(dev, 64, 0, 64, s), ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);

    /* 107027: Begin twice; 107029: End / TaskGrpBegin on a stream not capturing */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_EQ(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_ERROR_RT_STREAM_CAPTURED);
    aclrtStream other = new_stream();
    CHECK_EQ(aclmdlRICaptureEnd(other, &ri), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    CHECK_EQ(aclmdlRICaptureTaskGrpBegin(other), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    /* 107041: synchronizing / querying the capturing stream (G-CAP1 item 2), invalidates */
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    CHECK_EQ(status_of(s, NULL), ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED); /* in every mode */
    aclrtStreamStatus qs;
    CHECK_EQ(aclrtStreamQuery(s, &qs), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    /* ... and the device */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    CHECK_EQ(aclrtSynchronizeDevice(), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);

    /* 107041: synchronous copies / memsets in GLOBAL mode (G-CAP1 item 3) */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_EQ(aclrtMemcpy(dev, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL);
    CHECK_EQ(aclrtMemset(dev, 64, 0, 64), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    /* switching the thread to RELAXED lifts it (§2.3) */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    CHECK_OK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK_EQ(mode, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_OK(aclrtMemcpy(dev, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK_EQ(mode, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    end_expect(s, ACL_SUCCESS);

    /* 107030: a captured async copy of pageable host memory (G-CAP1 item 5) */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    CHECK_EQ(aclrtMemcpyAsync(dev, 64, pageable, 64, ACL_MEMCPY_HOST_TO_DEVICE, s),
             ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);

    /* 107024: waiting on an event with no record in the capture */
    aclrtEvent ev = NULL, ev2 = NULL;
    CHECK_OK(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&ev2, ACL_EVENT_SYNC));
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_EQ(aclrtStreamWaitEvent(s, ev), ACL_ERROR_RT_CAPTURE_DEPENDENCY);
    /* 107028: synchronizing or querying an event recorded in the capture */
    CHECK_OK(aclrtRecordEvent(ev, s));
    aclrtEventRecordedStatus es;
    CHECK_EQ(aclrtQueryEventStatus(ev, &es), ACL_ERROR_RT_EVENT_CAPTURED);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);

    /* 107032: linking two captures by an event */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    aclrtStream s2 = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    CHECK_OK(aclrtRecordEvent(ev, s));
    CHECK_EQ(aclrtStreamWaitEvent(s2, ev), ACL_ERROR_STREAM_CAPTURE_CONFLICT);
    end_expect(s2, ACL_SUCCESS);

    /* 107036: End on a joined stream instead of the origin; 107025: unjoined */
    CHECK_OK(aclrtStreamWaitEvent(other, ev)); /* other joins s's capture */
    CHECK_OK(aclrtMemsetAsync(dev, 64, 2, 64, other));
    CHECK_EQ(aclmdlRICaptureEnd(other, &ri), ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED);
    end_expect(s, ACL_ERROR_RT_STREAM_UNJOINED);
    CHECK_EQ(status_of(other, NULL), ACL_MODEL_RI_CAPTURE_STATUS_NONE); /* the capture is gone */
    /* a joined stream that rejoined but then got one more task: unjoined again */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    CHECK_OK(aclrtRecordEvent(ev, s));
    CHECK_OK(aclrtStreamWaitEvent(other, ev));
    CHECK_OK(aclrtRecordEvent(ev2, other));
    CHECK_OK(aclrtStreamWaitEvent(s, ev2));
    CHECK_OK(aclrtMemsetAsync(dev, 64, 3, 64, other));
    end_expect(s, ACL_ERROR_RT_STREAM_UNJOINED);

    /* 107038: End on another thread for a GLOBAL capture (RELAXED may) */
    /* (tested in test_modes_threads) */

    /* 107026: executing a model that still captures; 107037 while running */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    aclmdlRI cap = NULL;
    CHECK_OK(aclmdlRICaptureGetInfo(s, &(aclmdlRICaptureStatus){0}, &cap));
    CHECK_EQ(aclmdlRIExecuteAsync(cap, other), ACL_ERROR_RT_MODEL_CAPTURED);
    CHECK_EQ(aclmdlRIDestroy(cap), ACL_ERROR_RT_MODEL_CAPTURED);
    end_expect(s, ACL_SUCCESS);

    /* external record / wait flags (G-CAP2) */
    aclrtEvent xev = NULL;
    CHECK_OK(aclrtCreateEventExWithFlag(&xev, ACL_EVENT_SYNC));
    CHECK_EQ(aclrtRecordEventWithFlag(xev, other, ACL_EVENT_RECORD_EXTERNAL), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
    CHECK_EQ(aclrtRecordEventWithFlag(ev, other, ACL_EVENT_RECORD_EXTERNAL), ACL_ERROR_RT_PARAM_INVALID);
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_EQ(aclrtStreamWaitEventWithFlag(s, xev, 5, ACL_EVENT_WAIT_EXTERNAL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtStreamWaitEventWithFlag(s, xev, 0, ACL_EVENT_WAIT_EXTERNAL));
    CHECK_EQ(aclrtRecordEventWithFlag(xev, s, ACL_EVENT_RECORD_EXTERNAL), ACL_ERROR_RT_PARAM_INVALID); /* one per graph */
    end_expect(s, ACL_SUCCESS);

    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtDestroyEvent(ev2));
    CHECK_OK(aclrtDestroyEvent(xev));
    CHECK_OK(aclrtDestroyStream(other));
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtFreeHost(host));
}

/* ---------------------------------------------------- modes across threads */

typedef struct thr_arg {
    aclrtContext ctx;
    void *dev;
    void *host;
    aclmdlRICaptureMode mode; /* the thread's own mode (ExchangeMode) */
    aclError rc;
    aclrtStream s;
} thr_arg;

static void *sync_copy_thread(void *p)
{
    thr_arg *a = p;
    aclrtSetCurrentContext(a->ctx);
    aclmdlRICaptureMode m = a->mode;
    aclmdlRICaptureThreadExchangeMode(&m);
    a->rc = aclrtMemcpy(a->dev, 64, a->host, 64, ACL_MEMCPY_HOST_TO_DEVICE);
    return NULL;
}

static aclError other_thread_copy(void *dev, void *host, aclmdlRICaptureMode mode)
{
    thr_arg a = {NULL, dev, host, mode, 0, NULL};
    CHECK_OK(aclrtGetCurrentContext(&a.ctx));
    pthread_t t;
    pthread_create(&t, NULL, sync_copy_thread, &a);
    pthread_join(t, NULL);
    return a.rc;
}

static void *end_thread(void *p)
{
    thr_arg *a = p;
    aclrtSetCurrentContext(a->ctx);
    aclmdlRI ri = NULL;
    a->rc = aclmdlRICaptureEnd(a->s, &ri);
    if (a->rc == ACL_SUCCESS) {
        aclmdlRIDestroy(ri);
    }
    return NULL;
}

/* §2.3 table: which threads may make an unsafe call under each mode. */
static void test_modes_threads(void)
{
    void *dev = NULL, *host = NULL;
    CHECK_OK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&host, 4096));
    /* GLOBAL: other GLOBAL threads are blocked; RELAXED or THREAD_LOCAL threads are not */
    aclrtStream s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_OK(other_thread_copy(dev, host, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL));
    CHECK_OK(other_thread_copy(dev, host, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK_EQ(status_of(s, NULL), ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
    CHECK_EQ(other_thread_copy(dev, host, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    /* THREAD_LOCAL: other threads are free */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL);
    CHECK_OK(other_thread_copy(dev, host, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    end_expect(s, ACL_SUCCESS);
    /* RELAXED: everyone, the capturing thread included */
    s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    CHECK_OK(other_thread_copy(dev, host, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtMemcpy(dev, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE));
    end_expect(s, ACL_SUCCESS);
    /* 107038: End on another thread unless RELAXED */
    thr_arg a = {NULL, NULL, NULL, 0, 0, NULL};
    CHECK_OK(aclrtGetCurrentContext(&a.ctx));
    a.s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    pthread_t t;
    pthread_create(&t, NULL, end_thread, &a);
    pthread_join(t, NULL);
    CHECK_EQ(a.rc, ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD);
    end_expect(a.s, ACL_SUCCESS);
    a.s = begin_capture(dev, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
    pthread_create(&t, NULL, end_thread, &a);
    pthread_join(t, NULL);
    CHECK_OK(a.rc);
    CHECK_OK(aclrtDestroyStream(a.s));
    /* bad mode values */
    aclmdlRICaptureMode bad = (aclmdlRICaptureMode)7;
    CHECK_EQ(aclmdlRICaptureThreadExchangeMode(&bad), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtFreeHost(host));
}

/* ---------------------------------------------------------- task groups */

/* §2.6, G-UPD: a memset and a copy inside a task group get new arguments between
 * replays; the replay after UpdateEnd uses them. */
static void test_task_group_update(void)
{
    aclrtStream s = new_stream(), upd = new_stream(), exec = new_stream();
    void *dev = NULL, *src1 = NULL, *src2 = NULL, *out = NULL;
    CHECK_OK(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&src1, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&src2, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&out, 512));
    CHECK_OK(aclrtMemset(src1, 256, 0x11, 256));
    CHECK_OK(aclrtMemset(src2, 256, 0x22, 256));
    unsigned char *o = out;

    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclmdlRICaptureTaskGrpBegin(s));
    CHECK_EQ(aclmdlRICaptureTaskGrpBegin(s), ACL_ERROR_STREAM_TASK_GROUP_STATUS); /* 107033 */
    CHECK_OK(aclrtMemsetAsync(dev, 256, 0x01, 256, s));
    CHECK_OK(aclrtMemcpyAsync(out, 512, src1, 256, ACL_MEMCPY_DEVICE_TO_HOST, s));
    aclrtTaskGrp grp = NULL;
    CHECK_OK(aclmdlRICaptureTaskGrpEnd(s, &grp));
    CHECK(grp != NULL);
    CHECK_OK(aclrtMemcpyAsync((char *)out + 256, 256, dev, 256, ACL_MEMCPY_DEVICE_TO_HOST, s));
    /* 507009: an event task inside a group */
    aclrtEvent ev = NULL;
    CHECK_OK(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC));
    CHECK_OK(aclmdlRICaptureTaskGrpBegin(s));
    CHECK_EQ(aclrtRecordEvent(ev, s), ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT);
    aclrtTaskGrp g2 = NULL;
    CHECK_EQ(aclmdlRICaptureTaskGrpEnd(s, &g2), ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT);
    CHECK(g2 == NULL);
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));

    CHECK_OK(aclmdlRIExecuteAsync(ri, exec));
    CHECK_OK(aclrtSynchronizeStream(exec));
    CHECK_EQ(o[0], 0x11);
    CHECK_EQ(o[256], 0x01);

    /* 107027-class state errors: update on a capturing stream, mismatched updates */
    CHECK_EQ(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_STREAM_TASK_GROUP_STATUS);
    CHECK_OK(aclmdlRICaptureTaskUpdateBegin(upd, grp));
    CHECK_EQ(aclmdlRICaptureTaskUpdateBegin(exec, grp), ACL_ERROR_STREAM_TASK_GROUP_STATUS); /* two updates */
    CHECK_OK(aclrtMemsetAsync(dev, 256, 0x02, 256, upd)); /* only one task: count mismatch */
    CHECK_EQ(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_RT_MODEL_UPDATE_FAILED);
    CHECK_OK(aclmdlRICaptureTaskUpdateBegin(upd, grp));
    CHECK_OK(aclrtMemcpyAsync(out, 512, src2, 256, ACL_MEMCPY_DEVICE_TO_HOST, upd)); /* order mismatch */
    CHECK_OK(aclrtMemsetAsync(dev, 256, 0x02, 256, upd));
    CHECK_EQ(aclmdlRICaptureTaskUpdateEnd(upd), ACL_ERROR_RT_MODEL_UPDATE_FAILED);

    for (int round = 0; round < 50; round++) {
        unsigned char v = (unsigned char)(0x30 + round);
        CHECK_OK(aclmdlRICaptureTaskUpdateBegin(upd, grp));
        CHECK_OK(aclrtMemsetAsync(dev, 256, v, 256, upd));
        CHECK_OK(aclrtMemcpyAsync(out, 512, (round & 1) ? src2 : src1, 256, ACL_MEMCPY_DEVICE_TO_HOST, upd));
        CHECK_OK(aclmdlRICaptureTaskUpdateEnd(upd));
        CHECK_OK(aclrtSynchronizeStream(upd)); /* the update is stream-ordered */
        CHECK_OK(aclmdlRIExecuteAsync(ri, exec));
        CHECK_OK(aclrtSynchronizeStream(exec));
        CHECK_EQ(o[255], (round & 1) ? 0x22 : 0x11);
        CHECK_EQ(o[256 + 255], v);
    }
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtFree(src1));
    CHECK_OK(aclrtFree(src2));
    CHECK_OK(aclrtFreeHost(out));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(upd));
    CHECK_OK(aclrtDestroyStream(exec));
}

/* §2.10: value write/wait params, SetParams + Update, Disable. */
static void test_set_params_update(void)
{
    aclrtStream s = new_stream();
    void *w = NULL, *w2 = NULL;
    CHECK_OK(aclrtMalloc(&w, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&w2, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtValueWrite(w, 7, 0, s));
    CHECK_OK(aclrtMemsetAsync(w2, 64, 0xEE, 8, s));
    aclmdlRI cap = NULL;
    aclmdlRICaptureStatus st;
    CHECK_OK(aclmdlRICaptureGetInfo(s, &st, &cap));
    CHECK_EQ(aclmdlRIUpdate(cap), ACL_ERROR_RT_MODEL_UPDATE_FAILED); /* still capturing */
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    aclrtStream ms = NULL;
    uint32_t n = 1;
    CHECK_OK(aclmdlRIGetStreams(ri, &ms, &n));
    aclmdlRITask t[2];
    n = 2;
    CHECK_OK(aclmdlRIGetTasksByStream(ms, t, &n));
    aclmdlRITaskParams p;
    CHECK_OK(aclmdlRITaskGetParams(t[0], &p));
    CHECK_EQ(p.type, ACL_MODEL_RI_TASK_VALUE_WRITE);
    CHECK(p.valueWriteTaskParams.devAddr == w);
    CHECK_EQ(p.valueWriteTaskParams.value, 7);
    p.valueWriteTaskParams.value = 99;
    CHECK_OK(aclmdlRITaskSetParams(t[0], &p));
    CHECK_OK(aclmdlRITaskDisable(t[1]));
    aclmdlRITaskParams q = p;
    q.type = ACL_MODEL_RI_TASK_DEFAULT;
    CHECK_EQ(aclmdlRITaskSetParams(t[0], &q), ACL_ERROR_INVALID_PARAM); /* type mismatch */
    CHECK_OK(aclmdlRIUpdate(ri));
    CHECK_OK(aclmdlRIExecute(ri, -1));
    uint64_t v = 0;
    CHECK_OK(aclrtMemcpy(&v, 8, w, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(v, 99);
    CHECK_OK(aclrtMemcpy(&v, 8, w2, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(v, 0); /* the disabled memset did not run */
    CHECK_EQ(aclmdlRIExecute(ri, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmdlRIAbort(ri), ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* captured model */
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_EQ(aclmdlRITaskGetType(t[0], &(aclmdlRITaskType){0}), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(w));
    CHECK_OK(aclrtFree(w2));
    CHECK_OK(aclrtDestroyStream(s));
}

/* ------------------------------------------------------------ management */

static int g_destroyed;
static void on_destroy(void *p)
{
    g_destroyed += *(int *)p;
}

static void host_fn(void *p)
{
    __atomic_fetch_add((int *)p, 1, __ATOMIC_RELAXED);
}

/* §2.9: names, ids, destroy callbacks, 107037, JSON print, host functions replayed. */
static void test_management(void)
{
    aclrtStream s = new_stream(), exec = new_stream();
    int calls = 0;
    void *dev = NULL;
    CHECK_OK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtLaunchHostFunc(s, host_fn, &calls));
    /* a value wait that the test releases: keeps the model running */
    CHECK_OK(aclrtValueWait(dev, 1, ACL_STREAM_WAIT_VALUE_GEQ, s));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    CHECK_EQ(calls, 0);

    char name[600];
    CHECK_OK(aclmdlRIGetName(ri, sizeof name, name));
    CHECK_STR_EQ(name, "");
    char longname[700];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_OK(aclmdlRISetName(ri, "first"));
    CHECK_OK(aclmdlRISetName(ri, longname));
    CHECK_OK(aclmdlRIGetName(ri, sizeof name, name));
    CHECK_EQ(strlen(name), 512);
    uint32_t id1 = 0, id2 = 0;
    CHECK_OK(aclmdlRIGetId(ri, &id1));

    int one = 1, ten = 10;
    CHECK_OK(aclmdlRIDestroyRegisterCallback(ri, on_destroy, &one));
    CHECK_OK(aclmdlRIDestroyRegisterCallback(ri, (aclrtCallback)host_fn, &ten));
    CHECK_OK(aclmdlRIDestroyUnregisterCallback(ri, (aclrtCallback)host_fn));

    CHECK_OK(aclmdlRIExecuteAsync(ri, exec));
    CHECK_EQ(aclmdlRIDestroy(ri), ACL_ERROR_RT_MODEL_RUNNING); /* 107037 */
    CHECK_OK(aclrtValueWrite(dev, 1, 0, s));
    CHECK_OK(aclrtSynchronizeStream(exec));
    CHECK_EQ(calls, 1);
    CHECK_OK(aclrtSynchronizeStream(s)); /* the value write before the host memset (a race otherwise) */
    CHECK_OK(aclrtMemset(dev, 64, 0, 64));

    char path[] = "/tmp/mock_graph_json_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_OK(aclmdlRIDebugJsonPrint(ri, path, ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY));
    FILE *f = fopen(path, "r");
    char buf[4096] = {0};
    size_t got = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    unlink(path);
    CHECK_GT(got, 0);
    CHECK_STR_CONTAINS(buf, "\"traceEvents\"");
    CHECK_STR_CONTAINS(buf, "value_wait");
    CHECK_EQ(aclmdlRIDebugJsonPrint(ri, path, 5), ACL_ERROR_INVALID_PARAM);

    g_destroyed = 0;
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_EQ(g_destroyed, 1);
    CHECK_EQ(aclmdlRIGetId(ri, &id2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(exec));
}

/* OTH#aclrtCacheLastTaskOpInfo / ExtendInfo: info attached to the calling thread's
 * last captured task, read back by TaskGetParams and the verbose JSON; DebugPrint. */
static void test_cached_task_info(void)
{
    aclrtStream s = new_stream();
    void *dev = NULL;
    CHECK_OK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtStreamAttrValue on;
    memset(&on, 0, sizeof on);
    on.cacheOpInfoSwitch = 1;
    CHECK_OK(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_CACHE_OP_INFO, &on));
    const char info[] = "op: add";
    const char ext[] = "{\"op\":\"add\"}";
    CHECK_OK(aclrtCacheLastTaskOpInfo(info, sizeof info)); /* outside capture: kept nowhere */
    CHECK_EQ(aclrtCacheLastTaskOpInfo(info, 65537), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtMemsetAsync(dev, 64, 1, 64, s));
    CHECK_OK(aclrtCacheLastTaskOpInfo(info, sizeof info));
    CHECK_OK(aclrtCacheLastTaskExtendInfo(ext, strlen(ext)));
    aclmdlRI cap = NULL;
    aclmdlRICaptureStatus st;
    CHECK_OK(aclmdlRICaptureGetInfo(s, &st, &cap));
    CHECK_EQ(aclmdlRIDebugPrint(cap), ACL_ERROR_RT_PARAM_INVALID); /* only after End */
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    CHECK_OK(aclmdlRIDebugPrint(ri));
    aclrtStream ms = NULL;
    uint32_t n = 1;
    CHECK_OK(aclmdlRIGetStreams(ri, &ms, &n));
    aclmdlRITask t = NULL;
    CHECK_OK(aclmdlRIGetTasksByStream(ms, &t, &n));
    aclmdlRITaskParams p;
    CHECK_OK(aclmdlRITaskGetParams(t, &p));
    CHECK_EQ(p.opInfoSize, sizeof info);
    CHECK(p.opInfoPtr != NULL && memcmp(p.opInfoPtr, info, sizeof info) == 0);
    char dir[] = "/tmp/mock_graph_dir_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK_OK(aclmdlRIDebugJsonPrint(ri, dir, ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE));
    uint32_t id = 0;
    CHECK_OK(aclmdlRIGetId(ri, &id));
    char path[128];
    snprintf(path, sizeof path, "%s/aclmdlRI_%u.json", dir, id);
    FILE *f = fopen(path, "r");
    char buf[4096] = {0};
    size_t got = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL) {
        fclose(f);
    }
    CHECK_GT(got, 0);
    CHECK_STR_CONTAINS(buf, "\"extendInfo\":{\"op\":\"add\"}");
    unlink(path);
    rmdir(dir);
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtDestroyStream(s));
}

/* A stream destroyed while it captures invalidates the capture; a model left
 * alive at aclFinalize is released (no leak under ASAN). */
static void test_stream_destroyed_while_capturing(void)
{
    aclrtStream s = new_stream(), j = new_stream();
    aclrtEvent ev = NULL;
    CHECK_OK(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC));
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    CHECK_OK(aclrtRecordEvent(ev, s));
    CHECK_OK(aclrtStreamWaitEvent(j, ev));
    CHECK_OK(aclrtDestroyStream(j));
    CHECK_EQ(status_of(s, NULL), ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED);
    end_expect(s, ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED);
    CHECK_OK(aclrtDestroyEvent(ev));
    /* left for aclFinalize */
    s = new_stream();
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_RELAXED));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    CHECK_OK(aclrtDestroyStream(s));
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_two_stream_replay);
    RUN_TEST(test_capture_errors);
    RUN_TEST(test_modes_threads);
    RUN_TEST(test_task_group_update);
    RUN_TEST(test_set_params_update);
    RUN_TEST(test_management);
    RUN_TEST(test_cached_task_info);
    RUN_TEST(test_stream_destroyed_while_capturing);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
