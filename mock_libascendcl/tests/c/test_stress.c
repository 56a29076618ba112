/* test_stress.c - multi-thread stress over several devices: per-thread current
 * devices, reference-counted set/reset racing across threads, explicit and shared
 * contexts, streams, events, device/pinned memory and async copies. Everything must
 * balance to zero live objects at the end (mock-core; run under TSAN and ASAN too). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#define THREADS 10
#define DEVICES 4
#define ITERS 30
#define BUF 4096

static aclrtContext g_shared; /* explicit context on device 5, used by every thread */

static void one_round(int id, int it, int dev)
{
    CHECK_OK(aclrtSetDevice(dev));
    int32_t cur = -1;
    CHECK_OK(aclrtGetDevice(&cur));
    CHECK_EQ(cur, dev);

    aclrtStream s = NULL;
    aclrtEvent ev = NULL;
    void *d = NULL;
    unsigned char *h = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtCreateEvent(&ev));
    CHECK_OK(aclrtMalloc(&d, BUF, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost((void **)&h, 2 * BUF));
    if (s != NULL && ev != NULL && d != NULL && h != NULL) {
        memset(h, (id * 31 + it) & 0xff, BUF);
        memset(h + BUF, 0, BUF);
        CHECK_OK(aclrtMemcpyAsync(d, BUF, h, BUF, ACL_MEMCPY_HOST_TO_DEVICE, s));
        CHECK_OK(aclrtMemcpyAsync(h + BUF, BUF, d, BUF, ACL_MEMCPY_DEVICE_TO_HOST, s));
        CHECK_OK(aclrtRecordEvent(ev, s));
        CHECK_OK(aclrtSynchronizeEvent(ev));
        CHECK(memcmp(h, h + BUF, BUF) == 0);
        /* the default stream (NULL) of the current context */
        CHECK_OK(aclrtMemsetAsync(d, BUF, 0x5a, BUF, NULL));
        CHECK_OK(aclrtSynchronizeStream(NULL));
    }
    if (h != NULL) {
        CHECK_OK(aclrtFreeHost(h));
    }
    if (d != NULL) {
        CHECK_OK(aclrtFree(d));
    }
    if (ev != NULL) {
        CHECK_OK(aclrtDestroyEvent(ev));
    }
    if (s != NULL) {
        CHECK_OK(aclrtDestroyStream(s));
    }

    if (it % 5 == 0) {
        /* an explicit context on another device, used and destroyed */
        aclrtContext c = NULL;
        int other = (dev + 1) % DEVICES;
        CHECK_OK(aclrtCreateContext(&c, other));
        CHECK_OK(aclrtGetDevice(&cur));
        CHECK_EQ(cur, other);
        aclrtStream s2 = NULL;
        CHECK_OK(aclrtCreateStream(&s2));
        CHECK_OK(aclrtSynchronizeDevice());
        CHECK_OK(aclrtDestroyStream(s2));
        CHECK_OK(aclrtDestroyContext(c));
        CHECK_EQ(aclrtGetDevice(&cur), ACL_ERROR_RT_CONTEXT_NULL);
    }
    if (it % 3 == 0) {
        /* the shared context, current in many threads at once */
        CHECK_OK(aclrtSetCurrentContext(g_shared));
        CHECK_OK(aclrtGetDevice(&cur));
        CHECK_EQ(cur, 5);
        aclrtStream s3 = NULL;
        CHECK_OK(aclrtCreateStream(&s3));
        CHECK_OK(aclrtSynchronizeStream(s3));
        CHECK_OK(aclrtDestroyStream(s3));
    }
    CHECK_OK(aclrtResetDevice(dev));
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int it = 0; it < ITERS; it++) {
        one_round(id, it, (id + it) % DEVICES);
    }
    uint32_t flags;
    int32_t active;
    CHECK_OK(aclrtGetPrimaryCtxState(id % DEVICES, &flags, &active));
    return NULL;
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtCreateContext(&g_shared, 5));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) {
        CHECK_OK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i));
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    /* only the shared context (with its default stream) is left */
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_EQ(aclmockGetStat(5, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_EVENTS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_HOST_ALLOCATIONS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_BYTES), 0);
    for (int d = 0; d < DEVICES; d++) {
        uint32_t flags;
        int32_t active = -1;
        CHECK_OK(aclrtGetPrimaryCtxState(d, &flags, &active));
        CHECK_EQ(active, 0);
    }
    CHECK_OK(aclrtDestroyContext(g_shared));
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_STREAMS), 0);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
