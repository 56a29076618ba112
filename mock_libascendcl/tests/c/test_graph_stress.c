/* test_graph_stress.c - graphs under concurrency (run plain, asan and tsan):
 * a capture with a fork/join on one thread while other threads submit work to
 * their own streams (event records and waits included, which go through the
 * capture port), and one model replayed concurrently on two streams. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#define ROUNDS 40
#define N 1024

static aclrtContext g_ctx;
static _Atomic int g_stop;

static void *submitter(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetCurrentContext(g_ctx));
    aclrtStream s = NULL;
    aclrtEvent ev = NULL;
    void *d = NULL, *h = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC));
    CHECK_OK(aclrtMalloc(&d, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h, N));
    int bad = 0;
    for (int i = 0; !__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE); i++) {
        memset(h, i & 0xFF, N);
        bad += aclrtMemcpyAsync(d, N, h, N, ACL_MEMCPY_HOST_TO_DEVICE, s) != ACL_SUCCESS;
        bad += aclrtRecordEvent(ev, s) != ACL_SUCCESS;
        bad += aclrtStreamWaitEvent(s, ev) != ACL_SUCCESS;
        bad += aclrtMemsetAsync(d, N, 7, 16, s) != ACL_SUCCESS;
        bad += aclrtMemcpyAsync(h, N, d, N, ACL_MEMCPY_DEVICE_TO_HOST, s) != ACL_SUCCESS;
        bad += aclrtSynchronizeStream(s) != ACL_SUCCESS;
        bad += ((unsigned char *)h)[0] != 7 || ((unsigned char *)h)[N - 1] != (unsigned char)(i & 0xFF);
    }
    CHECK_EQ(bad, 0);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(h));
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtDestroyStream(s));
    return NULL;
}

/* Capture (THREAD_LOCAL: the other threads keep their sync calls) while others submit. */
static void test_capture_while_others_submit(void)
{
    pthread_t t[3];
    __atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++) {
        pthread_create(&t[i], NULL, submitter, NULL);
    }
    aclrtStream s1 = NULL, s2 = NULL;
    aclrtEvent fork = NULL, join = NULL;
    void *a = NULL, *b = NULL, *out = NULL;
    CHECK_OK(aclrtCreateStream(&s1));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEventWithFlag(&fork, ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&join, ACL_EVENT_SYNC));
    CHECK_OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&out, N));
    for (int r = 0; r < ROUNDS; r++) {
        CHECK_OK(aclmdlRICaptureBegin(s1, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL));
        CHECK_OK(aclrtMemsetAsync(a, N, r & 0xFF, N, s1));
        CHECK_OK(aclrtRecordEvent(fork, s1));
        CHECK_OK(aclrtStreamWaitEvent(s2, fork));
        CHECK_OK(aclrtMemcpyAsync(b, N, a, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
        CHECK_OK(aclrtRecordEvent(join, s2));
        CHECK_OK(aclrtStreamWaitEvent(s1, join));
        CHECK_OK(aclrtMemcpyAsync(out, N, b, N, ACL_MEMCPY_DEVICE_TO_HOST, s1));
        aclmdlRI ri = NULL;
        CHECK_OK(aclmdlRICaptureEnd(s1, &ri));
        CHECK_OK(aclmdlRIExecuteAsync(ri, s2));
        CHECK_OK(aclrtSynchronizeStream(s2));
        CHECK_EQ(((unsigned char *)out)[N - 1], (unsigned char)(r & 0xFF));
        CHECK_OK(aclmdlRIDestroy(ri));
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtFreeHost(out));
    CHECK_OK(aclrtDestroyEvent(fork));
    CHECK_OK(aclrtDestroyEvent(join));
    CHECK_OK(aclrtDestroyStream(s1));
    CHECK_OK(aclrtDestroyStream(s2));
}

#define TOGGLES 20000

/* Captures begin and end on one thread, back to back, while another records, waits on
 * and resets events of its own: every operation offered to the capture port while the
 * last capture ends drops its event reference (LeakSanitizer reported the events of
 * submitter() before: a task offered just after the end was never freed). */
static void *event_user(void *arg)
{
    (void)arg;
    CHECK_OK(aclrtSetCurrentContext(g_ctx));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    int bad = 0;
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        aclrtEvent ev = NULL;
        bad += aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC) != ACL_SUCCESS;
        bad += aclrtRecordEvent(ev, s) != ACL_SUCCESS;
        bad += aclrtStreamWaitEvent(s, ev) != ACL_SUCCESS;
        bad += aclrtResetEvent(ev, s) != ACL_SUCCESS;
        bad += aclrtDestroyEvent(ev) != ACL_SUCCESS;
    }
    bad += aclrtSynchronizeStream(s) != ACL_SUCCESS;
    CHECK_EQ(bad, 0);
    CHECK_OK(aclrtDestroyStream(s));
    return NULL;
}

static void test_event_ops_while_captures_end(void)
{
    __atomic_store_n(&g_stop, 0, __ATOMIC_RELEASE);
    pthread_t t;
    pthread_create(&t, NULL, event_user, NULL);
    aclrtStream s = NULL;
    void *d = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtMalloc(&d, N, ACL_MEM_MALLOC_HUGE_FIRST));
    for (int r = 0; r < TOGGLES; r++) {
        CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL));
        CHECK_OK(aclrtMemsetAsync(d, N, 1, N, s));
        aclmdlRI ri = NULL;
        CHECK_OK(aclmdlRICaptureEnd(s, &ri));
        CHECK_OK(aclmdlRIDestroy(ri));
    }
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtDestroyStream(s));
}

typedef struct replay_arg {
    aclmdlRI ri;
    int bad;
} replay_arg;

static void *replayer(void *p)
{
    replay_arg *a = p;
    CHECK_OK(aclrtSetCurrentContext(g_ctx));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    for (int i = 0; i < 200; i++) {
        a->bad += aclmdlRIExecuteAsync(a->ri, s) != ACL_SUCCESS;
        if (i % 10 == 0) {
            a->bad += aclrtSynchronizeStream(s) != ACL_SUCCESS;
        }
    }
    a->bad += aclrtSynchronizeStream(s) != ACL_SUCCESS;
    CHECK_OK(aclrtDestroyStream(s));
    return NULL;
}

/* One model, two threads replaying it on their own streams: runs never overlap
 * (a model is one instance), every replay completes, the result is right. */
static void test_concurrent_replay(void)
{
    aclrtStream s = NULL, s2 = NULL;
    aclrtEvent fork = NULL, join = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateStream(&s2));
    CHECK_OK(aclrtCreateEventWithFlag(&fork, ACL_EVENT_SYNC));
    CHECK_OK(aclrtCreateEventWithFlag(&join, ACL_EVENT_SYNC));
    void *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(aclrtMalloc(&a, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&c, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(a, N, 0x3C, N));
    CHECK_OK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK_OK(aclrtRecordEvent(fork, s));
    CHECK_OK(aclrtStreamWaitEvent(s2, fork));
    CHECK_OK(aclrtMemcpyAsync(b, N, a, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s2));
    CHECK_OK(aclrtRecordEvent(join, s2));
    CHECK_OK(aclrtMemsetAsync(c, N, 0x11, N, s));
    CHECK_OK(aclrtStreamWaitEvent(s, join));
    CHECK_OK(aclrtMemcpyAsync(c, N, b, N / 2, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    aclmdlRI ri = NULL;
    CHECK_OK(aclmdlRICaptureEnd(s, &ri));
    replay_arg r1 = {ri, 0}, r2 = {ri, 0};
    pthread_t t1, t2;
    pthread_create(&t1, NULL, replayer, &r1);
    pthread_create(&t2, NULL, replayer, &r2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_EQ(r1.bad + r2.bad, 0);
    unsigned char host[N];
    CHECK_OK(aclrtMemcpy(host, N, c, N, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(host[0], 0x3C);
    CHECK_EQ(host[N - 1], 0x11);
    CHECK_OK(aclmdlRIDestroy(ri));
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtFree(c));
    CHECK_OK(aclrtDestroyEvent(fork));
    CHECK_OK(aclrtDestroyEvent(join));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtDestroyStream(s2));
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtGetCurrentContext(&g_ctx));
    RUN_TEST(test_capture_while_others_submit);
    RUN_TEST(test_event_ops_while_captures_end);
    RUN_TEST(test_concurrent_replay);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
