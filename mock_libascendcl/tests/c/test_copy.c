/*
 * test_copy.c - copies, memset and value operations of the mock (copy.c):
 * every kind sync and async against reference buffers, argument-check order,
 * wrong kinds, out-of-bounds ranges, 2D pitches, memset/D32, batches, and
 * aclrtValueWrite/aclrtValueWait across two streams and from the host.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"
#include "streams_util.h"

#define N 4096

static unsigned char ref[N];

static void fill_ref(unsigned seed)
{
    for (int i = 0; i < N; i++) {
        ref[i] = (unsigned char)(i * 31 + seed);
    }
}

static void test_all_kinds_sync(void)
{
    void *d1 = NULL, *d2 = NULL, *pin = NULL;
    unsigned char *host = malloc(N), *out = malloc(N);
    CHECK_OK(aclrtMalloc(&d1, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&pin, N));
    fill_ref(1);
    memcpy(host, ref, N);
    /* H2D, D2D, D2H, H2H */
    CHECK_OK(aclrtMemcpy(d1, N, host, N, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(d2, N, d1, N, ACL_MEMCPY_DEVICE_TO_DEVICE));
    memset(out, 0, N);
    CHECK_OK(aclrtMemcpy(out, N, d2, N, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, ref, N) == 0);
    CHECK_OK(aclrtMemcpy(pin, N, host, N, ACL_MEMCPY_HOST_TO_HOST));
    CHECK(memcmp(pin, ref, N) == 0);
    /* DEFAULT infers, HOST_TO_BUF_TO_DEVICE is H2D */
    fill_ref(2);
    memcpy(host, ref, N);
    CHECK_OK(aclrtMemcpy(d1, N, host, N, ACL_MEMCPY_DEFAULT));
    CHECK_OK(aclrtMemcpy(d2, N, d1, N, ACL_MEMCPY_DEFAULT));
    CHECK_OK(aclrtMemcpy(pin, N, d2, N, ACL_MEMCPY_DEFAULT));
    CHECK(memcmp(pin, ref, N) == 0);
    fill_ref(3);
    CHECK_OK(aclrtMemcpy(d1, N, ref, N, ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(out, N, d1, N, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, ref, N) == 0);
    /* partial copy at an offset, destMax larger than count */
    CHECK_OK(aclrtMemcpy((char *)d1 + 100, N - 100, host, 50, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(out, N, (char *)d1 + 100, 50, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, host, 50) == 0);
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(pin));
    free(host);
    free(out);
}

static void test_argument_order(void)
{
    void *d = NULL;
    char h[64];
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    /* count 0 succeeds before anything else is looked at */
    CHECK_OK(aclrtMemcpy(NULL, 0, NULL, 0, (aclrtMemcpyKind)99));
    CHECK_EQ(aclrtMemcpy(NULL, 64, h, 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "dst");
    CHECK_EQ(aclrtMemcpy(d, 64, NULL, 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpy(d, 64, h, 8, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpy(d, 64, h, 8, ACL_MEMCPY_INTER_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpy(d, 64, h, 8, (aclrtMemcpyKind)-1), ACL_ERROR_INVALID_PARAM);
    /* kind is checked before destMax */
    CHECK_EQ(aclrtMemcpy(d, 0, h, 8, (aclrtMemcpyKind)9), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpy(d, 0, h, 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemcpy(d, 4, h, 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "destMax");
    /* dst == src: nothing to do, even with a kind that does not match */
    CHECK_OK(aclrtMemcpy(h, 64, h, 8, ACL_MEMCPY_DEVICE_TO_DEVICE));
    /* async variants share the order */
    CHECK_OK(aclrtMemcpyAsync(NULL, 0, NULL, 0, ACL_MEMCPY_HOST_TO_DEVICE, NULL));
    CHECK_EQ(aclrtMemcpyAsync(d, 64, h, 8, (aclrtMemcpyKind)6, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpyAsync(d, 4, h, 8, ACL_MEMCPY_HOST_TO_DEVICE, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(d));
}

/* The kind is a reserved parameter (CANN infers the direction from the
 * addresses): a kind that disagrees with where the pointers live still copies,
 * by their real locations. */
static void test_kind_is_reserved(void)
{
    void *d = NULL, *d2 = NULL, *pin = NULL;
    unsigned char h[64], h2[64], out[64];
    for (int i = 0; i < 64; i++) {
        h[i] = (unsigned char)(i + 1);
    }
    memset(h2, 0, sizeof(h2));
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&pin, 64));
    /* host -> host with HOST_TO_DEVICE */
    CHECK_OK(aclrtMemcpy(h2, 64, h, 64, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(memcmp(h2, h, 64) == 0);
    /* host -> device with DEVICE_TO_HOST, DEVICE_TO_DEVICE and HOST_TO_HOST */
    CHECK_OK(aclrtMemcpy(d, 64, h, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    memset(out, 0, sizeof(out));
    CHECK_OK(aclrtMemcpy(out, 64, d, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, h, 64) == 0);
    CHECK_OK(aclrtMemset(d, 64, 0, 64));
    CHECK_OK(aclrtMemcpy(d, 64, h, 64, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(out, 64, d, 64, ACL_MEMCPY_HOST_TO_HOST)); /* device -> host with H2H */
    CHECK(memcmp(out, h, 64) == 0);
    /* device -> device (overlapping, inside one allocation) with HOST_TO_DEVICE */
    CHECK_OK(aclrtMemcpy(d, 64, (char *)d + 32, 32, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(out, 64, d, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, h + 32, 32) == 0 && memcmp(out + 32, h + 32, 32) == 0);
    /* device -> device with HOST_TO_HOST, device -> pinned host with HOST_TO_DEVICE */
    CHECK_OK(aclrtMemcpy(d2, 64, d, 64, ACL_MEMCPY_HOST_TO_HOST));
    memset(pin, 0, 64);
    CHECK_OK(aclrtMemcpy(pin, 64, d2, 64, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(memcmp(pin, out, 64) == 0);
    /* async: same rule; device -> pageable host completes before returning */
    memset(h2, 0, sizeof(h2));
    CHECK_OK(aclrtMemcpyAsync(h2, 64, d2, 64, ACL_MEMCPY_HOST_TO_DEVICE, NULL));
    CHECK(memcmp(h2, out, 64) == 0);
    CHECK_OK(aclrtMemcpyAsync(d, 64, pin, 64, ACL_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(aclrtMemcpyAsync(d2, 64, h, 64, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtMemcpy(out, 64, d2, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, h, 64) == 0);
    /* the accepted enumerators are still validated (ACL layer) */
    CHECK_EQ(aclrtMemcpy(d, 64, h, 64, ACL_MEMCPY_INNER_DEVICE_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    /* async host-to-host is not supported on an EP host: decided by the
     * addresses, whatever the kind says */
    CHECK_EQ(aclrtMemcpyAsync(pin, 64, h, 64, ACL_MEMCPY_HOST_TO_HOST, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtMemcpyAsync(pin, 64, h, 64, ACL_MEMCPY_DEFAULT, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtMemcpyAsync(pin, 64, h, 64, ACL_MEMCPY_HOST_TO_DEVICE, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(pin));
}

static void test_bounds(void)
{
    void *d = NULL, *d2 = NULL, *pin = NULL;
    static char big[8192];
    CHECK_OK(aclrtMalloc(&d, 100, ACL_MEM_MALLOC_HUGE_FIRST)); /* usable size 160 */
    CHECK_OK(aclrtMalloc(&d2, 100, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&pin, 100));
    CHECK_OK(aclrtMemcpy(d, 160, big, 160, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_EQ(aclrtMemcpy(d, 8192, big, 161, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "overrun");
    CHECK_EQ(aclrtMemcpy((char *)d + 150, 8192, big, 20, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemcpy(big, 8192, d, 4096, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemcpy(d2, 8192, d, 200, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemcpyAsync(d, 8192, pin, 101, ACL_MEMCPY_HOST_TO_DEVICE, NULL), ACL_ERROR_RT_PARAM_INVALID);
    /* a pointer just past the allocation, or into freed device memory */
    CHECK_EQ(aclrtMemcpy((char *)d + 160, 16, big, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    /* garbage host pointers are refused, not dereferenced */
    CHECK_EQ(aclrtMemcpy(d, 160, (void *)(uintptr_t)0x10, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not mapped");
    CHECK_EQ(aclrtMemcpy((void *)(uintptr_t)0x1000, 16, d, 16, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemcpy(big, 16, (void *)(uintptr_t)0x30000, 16, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(d2));
    CHECK_EQ(aclrtMemcpy(d2, 16, big, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemcpy(big, 16, d2, 16, ACL_MEMCPY_DEFAULT), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemset(d2, 16, 0, 16), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(pin));
}

static void test_async_kinds(void)
{
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *d1 = NULL, *d2 = NULL, *p1 = NULL, *p2 = NULL;
    CHECK_OK(aclrtMalloc(&d1, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&p1, N));
    CHECK_OK(aclrtMallocHost(&p2, N));
    fill_ref(7);
    memcpy(p1, ref, N);
    memset(p2, 0, N);
    /* pinned memory: truly asynchronous, ordered on the stream */
    CHECK_OK(aclrtMemcpyAsync(d1, N, p1, N, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtMemcpyAsync(d2, N, d1, N, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    CHECK_OK(aclrtMemcpyAsyncWithCondition(p2, N, d2, N, ACL_MEMCPY_DEVICE_TO_HOST, s));
#pragma GCC diagnostic pop
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK(memcmp(p2, ref, N) == 0);
    /* pageable memory: complete when the call returns */
    unsigned char *h = malloc(N), *o = malloc(N);
    fill_ref(8);
    memcpy(h, ref, N);
    CHECK_OK(aclrtMemcpyAsync(d1, N, h, N, ACL_MEMCPY_HOST_TO_DEVICE, s));
    memset(h, 0, N); /* the copy already happened */
    memset(o, 0, N);
    CHECK_OK(aclrtMemcpyAsync(o, N, d1, N, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK(memcmp(o, ref, N) == 0);
    /* default stream */
    CHECK_OK(aclrtMemcpyAsync(d2, N, d1, N, ACL_MEMCPY_DEFAULT, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    memset(o, 0, N);
    CHECK_OK(aclrtMemcpy(o, N, d2, N, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(o, ref, N) == 0);
    /* many queued copies keep FIFO order */
    for (int i = 0; i < 200; i++) {
        unsigned char v = (unsigned char)i;
        CHECK_OK(aclrtMemsetAsync(d1, N, v, 1, s));
        CHECK_OK(aclrtMemcpyAsync((char *)d2 + i, N - i, d1, 1, ACL_MEMCPY_DEVICE_TO_DEVICE, s));
    }
    CHECK_OK(aclrtMemcpyAsync(p2, N, d2, 200, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    int ok = 1;
    for (int i = 0; i < 200; i++) {
        ok &= ((unsigned char *)p2)[i] == (unsigned char)i;
    }
    CHECK(ok);
    int junk;
    CHECK_EQ(aclrtMemcpyAsync(d1, N, p1, 8, ACL_MEMCPY_HOST_TO_DEVICE, (aclrtStream)&junk), ACL_ERROR_RT_PARAM_INVALID);
    free(h);
    free(o);
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(p1));
    CHECK_OK(aclrtFreeHost(p2));
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_free_during_async(void)
{
    /* aclrtFree does not wait for tasks; the in-flight copy must not crash */
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *d = NULL, *p = NULL;
    size_t f0 = 0, f1 = 0, t = 0;
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f0, &t));
    CHECK_OK(aclrtMalloc(&d, 1 << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&p, 1 << 20));
    for (int i = 0; i < 20; i++) {
        CHECK_OK(aclrtMemcpyAsync(d, 1 << 20, p, 1 << 20, ACL_MEMCPY_HOST_TO_DEVICE, s));
    }
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f1, &t)); /* free at once, copies may still run */
    CHECK_EQ(f1, f0);
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtFreeHost(p));
    CHECK_OK(aclrtDestroyStream(s));
}

static void test_2d(void)
{
    enum { W = 10, H = 5, SP = 16, DP = 32 };
    unsigned char src[SP * H], out[DP * H];
    for (int i = 0; i < SP * H; i++) {
        src[i] = (unsigned char)(i + 1);
    }
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, DP * H, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(d, DP * H, 0, DP * H));
    CHECK_OK(aclrtMemcpy2d(d, DP, src, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(out, 0xee, sizeof(out));
    CHECK_OK(aclrtMemcpy(out, sizeof(out), d, DP * H, ACL_MEMCPY_DEVICE_TO_HOST));
    int ok = 1;
    for (int r = 0; r < H; r++) {
        for (int c = 0; c < DP; c++) {
            unsigned char want = c < W ? src[r * SP + c] : 0;
            ok &= out[r * DP + c] == want;
        }
    }
    CHECK(ok);
    /* back to the host with the source pitch */
    unsigned char back[SP * H];
    memset(back, 0, sizeof(back));
    CHECK_OK(aclrtMemcpy2d(back, SP, d, DP, W, H, ACL_MEMCPY_DEVICE_TO_HOST));
    ok = 1;
    for (int r = 0; r < H; r++) {
        ok &= memcmp(back + r * SP, src + r * SP, W) == 0;
    }
    CHECK(ok);
    /* async (pinned) and D2D */
    void *d2 = NULL, *pin = NULL;
    CHECK_OK(aclrtMalloc(&d2, DP * H, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&pin, DP * H));
    CHECK_OK(aclrtMemcpy2dAsync(d2, DP, d, DP, DP, H, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL));
    CHECK_OK(aclrtMemcpy2dAsync(pin, DP, d2, DP, DP, H, ACL_MEMCPY_DEFAULT, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK(memcmp(pin, out, DP * H) == 0);
    /* rules */
    CHECK_OK(aclrtMemcpy2d(NULL, 0, NULL, 0, 0, 5, (aclrtMemcpyKind)77)); /* width 0 */
    CHECK_OK(aclrtMemcpy2d(d, DP, src, SP, W, 0, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_EQ(aclrtMemcpy2d(d, DP, src, 8, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM); /* width > spitch */
    CHECK_EQ(aclrtMemcpy2d(d, 8, src, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM); /* width > dpitch */
    CHECK_EQ(aclrtMemcpy2d(d, DP, src, SP, W, H, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpy2d(d, DP, NULL, SP, W, H, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpy2d(d, DP, src, SP, W, H + 10, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID); /* OOB */
    /* the kind is reserved: device -> host with HOST_TO_DEVICE copies by the addresses */
    unsigned char back2[SP * H];
    memset(back2, 0, sizeof(back2));
    CHECK_OK(aclrtMemcpy2d(back2, SP, d, DP, W, H, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(memcmp(back2, back, sizeof(back)) == 0);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(pin));
}

/* The documented limits apply to the async 2D copy exactly as to the sync
 * one: width <= both pitches (100000) and height <= 5*1024*1024 rows (107000),
 * even when the buffers are large enough. */
static void test_2d_limits(void)
{
    const size_t max_h = (size_t)5 * 1024 * 1024;
    unsigned char *host = calloc(max_h + 1, 1);
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, max_h + 1, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtMemcpy2d(d, 1, host, 1, 1, max_h + 1, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "height");
    CHECK_EQ(aclrtMemcpy2dAsync(d, 1, host, 1, 1, max_h + 1, ACL_MEMCPY_HOST_TO_DEVICE, NULL),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "height");
    CHECK_EQ(aclrtMemcpy2dAsync(d, 4, host, 8, 5, 2, ACL_MEMCPY_HOST_TO_DEVICE, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpy2dAsync(d, 8, host, 4, 5, 2, ACL_MEMCPY_HOST_TO_DEVICE, NULL), ACL_ERROR_INVALID_PARAM);
    /* the maximum itself is fine */
    host[max_h - 1] = 0x5c;
    CHECK_OK(aclrtMemcpy2dAsync(d, 1, host, 1, 1, max_h, ACL_MEMCPY_HOST_TO_DEVICE, NULL));
    CHECK_OK(aclrtMemcpy2d(host, 1, d, 1, 1, max_h, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    unsigned char last = 0;
    CHECK_OK(aclrtMemcpy(&last, 1, (char *)d + max_h - 1, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(last, 0x5c);
    CHECK_OK(aclrtFree(d));
    free(host);
}

/* Doc 11-03_memory_copy_and_set.md: a width above 5000000 bytes fails, for
 * aclrtMemcpy2dAsync exactly like for aclrtMemcpy2d (ACL_ERROR_RT_PARAM_INVALID,
 * the mock's code for the runtime limits), even when the buffers are large enough. */
static void test_2d_width_limit(void)
{
    const size_t max_w = 5000000;
    unsigned char *host = calloc(2 * (max_w + 1), 1);
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, 2 * (max_w + 1), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtMemcpy2d(d, max_w + 1, host, max_w + 1, max_w + 1, 2, ACL_MEMCPY_HOST_TO_DEVICE),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "width");
    CHECK_EQ(aclrtMemcpy2dAsync(d, max_w + 1, host, max_w + 1, max_w + 1, 2, ACL_MEMCPY_HOST_TO_DEVICE, NULL),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "width");
    /* the maximum itself is fine */
    host[max_w - 1] = 0x3a;
    CHECK_OK(aclrtMemcpy2dAsync(d, max_w + 1, host, max_w + 1, max_w, 2, ACL_MEMCPY_HOST_TO_DEVICE, NULL));
    CHECK_OK(aclrtMemcpy2d(d, max_w, host, max_w, max_w, 2, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    unsigned char last = 0;
    CHECK_OK(aclrtMemcpy(&last, 1, (char *)d + max_w - 1, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(last, 0x3a);
    CHECK_OK(aclrtFree(d));
    free(host);
}

/* aclrtMemsetAsync / aclrtMemsetD32Async on host memory behave like the sync
 * calls: the bytes are set when the call returns, even while the stream is
 * still busy; device memory stays stream-ordered. */
static void test_memset_async_host(void)
{
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    gate g;
    gate_init(&g);
    void *pin = NULL, *d = NULL;
    CHECK_OK(aclrtMallocHost(&pin, 64));
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    memset(pin, 0, 64);
    static uint32_t reg[1024] __attribute__((aligned(4096)));
    void *reg_dev = NULL;
    CHECK_OK(aclrtHostRegister(reg, sizeof(reg), ACL_HOST_REGISTER_MAPPED, &reg_dev));
    hold_stream(s, &g);
    CHECK_OK(aclrtMemsetD32Async(pin, 64, 0xa1b2c3d4u, 4, s));
    CHECK_EQ(((uint32_t *)pin)[0], 0xa1b2c3d4u);
    CHECK_EQ(((uint32_t *)pin)[3], 0xa1b2c3d4u);
    CHECK_EQ(((uint32_t *)pin)[4], 0);
    CHECK_OK(aclrtMemsetAsync((char *)pin + 32, 32, 0x77, 8, s));
    CHECK_EQ(((unsigned char *)pin)[39], 0x77);
    CHECK_OK(aclrtMemsetD32Async(reg, sizeof(reg), 9u, 2, s));
    CHECK_EQ(reg[1], 9u);
    /* the same checks as the sync call */
    CHECK_EQ(aclrtMemsetD32Async((char *)pin + 2, 62, 1u, 2, s), ACL_ERROR_RT_ADDR_UNALIGNED);
    CHECK_EQ(aclrtMemsetD32Async(pin, 64, 1u, 17, s), ACL_ERROR_RT_PARAM_INVALID);
    char plain[16];
    CHECK_EQ(aclrtMemsetD32Async(plain, 16, 1u, 4, s), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
    /* device memory: queued behind the held task */
    CHECK_OK(aclrtMemsetD32Async(d, 64, 0x01010101u, 16, s));
    gate_open(&g);
    CHECK_OK(aclrtSynchronizeStream(s));
    uint32_t w[16];
    CHECK_OK(aclrtMemcpy(w, sizeof(w), d, sizeof(w), ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(w[15], 0x01010101u);
    CHECK_OK(aclrtHostUnregister(reg));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(pin));
    CHECK_OK(aclrtDestroyStream(s));
    gate_destroy(&g);
}

static void test_memset(void)
{
    void *d = NULL, *pin = NULL;
    unsigned char out[256];
    CHECK_OK(aclrtMalloc(&d, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(d, 256, 0x1ab, 256)); /* low byte */
    CHECK_OK(aclrtMemcpy(out, 256, d, 256, ACL_MEMCPY_DEVICE_TO_HOST));
    int ok = 1;
    for (int i = 0; i < 256; i++) {
        ok &= out[i] == 0xab;
    }
    CHECK(ok);
    CHECK_OK(aclrtMemset(d, 0, 0, 0)); /* count 0 */
    CHECK_EQ(aclrtMemset(NULL, 8, 0, 8), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemset(d, 8, 0, 16), ACL_ERROR_RT_PARAM_INVALID); /* count > maxCount */
    CHECK_EQ(aclrtMemset(d, 1024, 0, 1024), ACL_ERROR_RT_PARAM_INVALID); /* past the allocation */
    char plain[16];
    CHECK_EQ(aclrtMemset(plain, 16, 0, 16), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
    CHECK_OK(aclrtMallocHost(&pin, 64));
    CHECK_OK(aclrtMemset(pin, 64, 7, 64)); /* runtime host memory is fine */
    CHECK_EQ(((unsigned char *)pin)[63], 7);
    CHECK_OK(aclrtMemsetAsync((char *)d + 10, 246, 0x22, 20, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtMemcpy(out, 256, d, 256, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(out[9], 0xab);
    CHECK_EQ(out[10], 0x22);
    CHECK_EQ(out[29], 0x22);
    CHECK_EQ(out[30], 0xab);
    /* D32 */
    CHECK_OK(aclrtMemsetD32(d, 256, 0xdeadbeefu, 64));
    uint32_t w[64];
    CHECK_OK(aclrtMemcpy(w, sizeof(w), d, sizeof(w), ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(w[0], 0xdeadbeefu);
    CHECK_EQ(w[63], 0xdeadbeefu);
    CHECK_OK(aclrtMemsetD32Async(d, 256, 5u, 2, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtMemcpy(w, sizeof(w), d, sizeof(w), ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(w[1], 5u);
    CHECK_EQ(w[2], 0xdeadbeefu);
    CHECK_EQ(aclrtMemsetD32(d, 256, 0, 65), ACL_ERROR_RT_PARAM_INVALID); /* N * 4 > memSize */
    CHECK_EQ(aclrtMemsetD32((char *)d + 1, 200, 0, 4), ACL_ERROR_RT_ADDR_UNALIGNED);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(pin));
}

static void test_batch(void)
{
    void *d1 = NULL, *d2 = NULL;
    CHECK_OK(aclrtMalloc(&d1, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&d2, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    char a[64], b[64], o1[64], o2[64];
    memset(a, 'a', 64);
    memset(b, 'b', 64);
    void *dsts[2] = {d1, d2};
    void *srcs[2] = {a, b};
    size_t maxs[2] = {256, 256}, sizes[2] = {64, 64};
    aclrtMemcpyBatchAttr attr;
    memset(&attr, 0, sizeof(attr));
    attr.dstLoc.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    attr.dstLoc.id = 0;
    attr.srcLoc.type = ACL_MEM_LOCATION_TYPE_HOST;
    size_t idx[1] = {0};
    size_t fail = 0;
    CHECK_OK(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 2, &attr, idx, 1, &fail));
    CHECK_EQ(fail, SIZE_MAX);
    CHECK_OK(aclrtMemcpy(o1, 64, d1, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_OK(aclrtMemcpy(o2, 64, d2, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(o1, a, 64) == 0 && memcmp(o2, b, 64) == 0);
    /* back to the host, async, two attribute groups */
    void *pin = NULL;
    CHECK_OK(aclrtMallocHost(&pin, 128));
    void *dsts2[2] = {pin, (char *)pin + 64};
    void *srcs2[2] = {d2, d1};
    aclrtMemcpyBatchAttr attrs2[2];
    memset(attrs2, 0, sizeof(attrs2));
    attrs2[0].dstLoc.type = ACL_MEM_LOCATION_TYPE_HOST;
    attrs2[0].srcLoc.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    attrs2[1] = attrs2[0];
    size_t idx2[2] = {0, 1};
    CHECK_OK(aclrtMemcpyBatchAsync(dsts2, maxs, srcs2, sizes, 2, attrs2, idx2, 2, &fail, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK(memcmp(pin, b, 64) == 0 && memcmp((char *)pin + 64, a, 64) == 0);
    CHECK_OK(aclrtMemcpyBatchV2(dsts, maxs, srcs, sizes, 2, &attr, idx, 1));
    CHECK_OK(aclrtMemcpyBatchAsyncV2(dsts2, maxs, srcs2, sizes, 2, attrs2, idx2, 2, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    /* errors report the failing copy */
    size_t bad_sizes[2] = {64, 512};
    CHECK_EQ(aclrtMemcpyBatch(dsts, maxs, srcs, bad_sizes, 2, &attr, idx, 1, &fail), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(fail, 1);
    void *wrong_srcs[2] = {a, d1};
    CHECK_EQ(aclrtMemcpyBatch(dsts, maxs, wrong_srcs, sizes, 2, &attr, idx, 1, &fail),
             ACL_ERROR_RT_INVALID_MEMORY_TYPE);
    CHECK_EQ(fail, 1);
    CHECK_EQ(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 0, &attr, idx, 1, &fail), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 2, &attr, idx, 1, NULL), ACL_ERROR_INVALID_PARAM);
    size_t bad_idx[2] = {0, 0};
    CHECK_EQ(aclrtMemcpyBatch(dsts, maxs, srcs, sizes, 2, attrs2, bad_idx, 2, &fail), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtFree(d1));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtFreeHost(pin));
}

/* ------------------------------------------------------------ value ops */

static void test_value_write_wait(void)
{
    aclrtStream sa = NULL, sb = NULL;
    CHECK_OK(aclrtCreateStream(&sa));
    CHECK_OK(aclrtCreateStream(&sb));
    uint64_t *flag = NULL;
    void *data = NULL, *pin = NULL;
    CHECK_OK(aclrtMalloc((void **)&flag, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&data, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&pin, 64));
    CHECK_OK(aclrtMemset(flag, 64, 0, 64));
    CHECK_OK(aclrtMemset(data, 64, 0, 64));
    memset(pin, 0, 64);

    /* stream A: wait for flag >= 1, then copy data to the host */
    CHECK_OK(aclrtValueWait(flag, 1, ACL_STREAM_WAIT_VALUE_GEQ, sa));
    CHECK_OK(aclrtMemcpyAsync(pin, 64, data, 64, ACL_MEMCPY_DEVICE_TO_HOST, sa));
    /* A is blocked: it cannot be complete */
    aclrtStreamStatus st = ACL_STREAM_STATUS_COMPLETE;
    usleep(20000);
    CHECK_OK(aclrtStreamQuery(sa, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_NOT_READY);
    CHECK_EQ(((unsigned char *)pin)[0], 0);
    /* stream B: produce the data, then release A */
    CHECK_OK(aclrtMemsetAsync(data, 64, 0x42, 64, sb));
    CHECK_OK(aclrtValueWrite(flag, 1, 0, sb));
    CHECK_OK(aclrtSynchronizeStream(sa));
    CHECK_EQ(((unsigned char *)pin)[0], 0x42);
    CHECK_EQ(((unsigned char *)pin)[63], 0x42);

    /* EQ released by a host aclrtMemcpy */
    CHECK_OK(aclrtValueWait(flag, 7, ACL_STREAM_WAIT_VALUE_EQ, sa));
    CHECK_OK(aclrtMemsetAsync(data, 64, 0x43, 64, sa));
    usleep(10000);
    CHECK_OK(aclrtStreamQuery(sa, &st));
    CHECK_EQ(st, ACL_STREAM_STATUS_NOT_READY);
    uint64_t seven = 7;
    CHECK_OK(aclrtMemcpy(flag, 8, &seven, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtSynchronizeStream(sa));
    unsigned char b = 0;
    CHECK_OK(aclrtMemcpy(&b, 1, data, 1, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(b, 0x43);

    /* AND / NOR conditions already true do not block */
    CHECK_OK(aclrtValueWait(flag, 0x3, ACL_STREAM_WAIT_VALUE_AND, sa)); /* 7 & 3 != 0 */
    CHECK_OK(aclrtValueWait(flag, 0x8, ACL_STREAM_WAIT_VALUE_NOR, sa)); /* ~(7|8) != 0 */
    CHECK_OK(aclrtValueWait(flag, 5, ACL_STREAM_WAIT_VALUE_GEQ, sa));
    CHECK_OK(aclrtSynchronizeStream(sa));

    /* a chain of ping-pong between the streams */
    for (uint64_t i = 10; i < 30; i += 2) {
        CHECK_OK(aclrtValueWait(flag, i, ACL_STREAM_WAIT_VALUE_EQ, sa));
        CHECK_OK(aclrtValueWrite(flag, i + 1, 0, sa));
        CHECK_OK(aclrtValueWrite(flag, i, 0, sb));
        CHECK_OK(aclrtValueWait(flag, i + 1, ACL_STREAM_WAIT_VALUE_EQ, sb));
    }
    CHECK_OK(aclrtSynchronizeStream(sa));
    CHECK_OK(aclrtSynchronizeStream(sb));
    uint64_t v = 0;
    CHECK_OK(aclrtMemcpy(&v, 8, flag, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(v, 29);

    /* errors */
    uint64_t hostword = 0;
    CHECK_EQ(aclrtValueWait(NULL, 1, 0, sa), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtValueWait(flag, 1, 4, sa), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtValueWrite(&hostword, 1, 0, sa), ACL_ERROR_RT_INVALID_MEMORY_TYPE);
    CHECK_EQ(aclrtValueWrite((char *)flag + 124, 1, 0, sa), ACL_ERROR_RT_PARAM_INVALID); /* 128 usable: 4 bytes past the end */

    /* freeing the watched memory fails the waiting task instead of hanging */
    void *tmp = NULL;
    CHECK_OK(aclrtMalloc(&tmp, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(tmp, 64, 0, 64));
    CHECK_OK(aclrtValueWait(tmp, 1, ACL_STREAM_WAIT_VALUE_EQ, sa));
    CHECK_OK(aclrtFree(tmp));
    CHECK_EQ(aclrtSynchronizeStream(sa), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSynchronizeStream(sa)); /* the error was reported once */

    /* a wait that never completes is cancelled by destroy-force */
    CHECK_OK(aclrtValueWait(flag, 1000, ACL_STREAM_WAIT_VALUE_EQ, sb));
    CHECK_OK(aclrtDestroyStreamForce(sb));
    CHECK_OK(aclrtDestroyStream(sa));
    CHECK_OK(aclrtFree(flag));
    CHECK_OK(aclrtFree(data));
    CHECK_OK(aclrtFreeHost(pin));
}

/* ------------------------------------------------------ cross-device */

static void test_cross_device(void)
{
    void *d0 = NULL, *d1 = NULL;
    CHECK_OK(aclrtMalloc(&d0, 1024, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtMalloc(&d1, 1024, ACL_MEM_MALLOC_HUGE_FIRST));
    char src[1024], out[1024];
    for (int i = 0; i < 1024; i++) {
        src[i] = (char)(i ^ 0x5a);
    }
    CHECK_OK(aclrtMemcpy(d1, 1024, src, 1024, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtSetDevice(0));
    /* without peer access the copy between devices is refused */
    CHECK_EQ(aclrtMemcpy(d0, 1024, d1, 1024, ACL_MEMCPY_DEVICE_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtDeviceEnablePeerAccess");
    CHECK_OK(aclrtDeviceEnablePeerAccess(1, 0));
    CHECK_OK(aclrtMemcpy(d0, 1024, d1, 1024, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK_OK(aclrtMemcpyAsync(d1, 1024, d0, 512, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtMemcpy(out, 1024, d0, 1024, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(out, src, 1024) == 0);
    CHECK_OK(aclrtDeviceDisablePeerAccess(1));
    CHECK_EQ(aclrtMemcpy(d0, 1024, d1, 1024, ACL_MEMCPY_DEFAULT), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(d0));
    CHECK_OK(aclrtFree(d1)); /* freeing another device's memory is fine */
    CHECK_OK(aclrtResetDevice(1));
}

static void test_device_lost(void)
{
    void *d0 = NULL, *d3 = NULL;
    char h[64] = {0};
    CHECK_OK(aclrtMalloc(&d0, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtSetDevice(3));
    CHECK_OK(aclrtMalloc(&d3, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclmockSetDeviceLost(3, ACL_ERROR_RT_LOST_HEARTBEAT));
    CHECK_EQ(aclrtMemcpy(h, 64, d3, 64, ACL_MEMCPY_DEVICE_TO_HOST), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_EQ(aclrtMemset(d3, 64, 0, 64), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_OK(aclrtMemcpy(d0, 64, h, 64, ACL_MEMCPY_HOST_TO_DEVICE)); /* device 0 is fine */
    CHECK_EQ(aclrtFree(d3), ACL_ERROR_RT_LOST_HEARTBEAT);            /* released anyway */
    CHECK_EQ(aclrtFree(d3), ACL_ERROR_RT_MEMORY_FREE);
    CHECK_OK(aclmockSetDeviceLost(3, 0));
    CHECK_OK(aclrtFree(d0));
    aclrtResetDevice(3);
}

static void *no_ctx_copy(void *arg)
{
    (void)arg;
    char a[8] = {0}, b[8];
    CHECK_EQ(aclrtMemcpy(b, 8, a, 8, ACL_MEMCPY_HOST_TO_HOST), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtMemset(b, 8, 0, 8), ACL_ERROR_RT_CONTEXT_NULL);
    return NULL;
}

static void test_no_context(void)
{
    pthread_t t;
    pthread_create(&t, NULL, no_ctx_copy, NULL);
    pthread_join(t, NULL);
}

/* Many threads copying at once through the same registry. */
static void *copy_worker(void *arg)
{
    int dev = (int)(intptr_t)arg;
    CHECK_OK(aclrtSetDevice(dev));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *d = NULL, *p = NULL;
    CHECK_OK(aclrtMalloc(&d, 8192, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&p, 8192));
    int ok = 1;
    for (int i = 0; i < 200; i++) {
        memset(p, i & 0xff, 8192);
        CHECK_OK(aclrtMemcpyAsync(d, 8192, p, 8192, ACL_MEMCPY_HOST_TO_DEVICE, s));
        CHECK_OK(aclrtSynchronizeStream(s));
        memset(p, 0, 8192);
        CHECK_OK(aclrtMemcpy(p, 8192, d, 8192, ACL_MEMCPY_DEVICE_TO_HOST));
        ok &= ((unsigned char *)p)[8191] == (i & 0xff);
    }
    CHECK(ok);
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(p));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(dev));
    return NULL;
}

static void test_threads(void)
{
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        pthread_create(&t[i], NULL, copy_worker, (void *)(intptr_t)(i % 4));
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
    }
}

int main(void)
{
    mt_mock_env("ASCEND_MOCK_DEVICE_COUNT", "4", "ASCEND_MOCK_MEM_PER_DEVICE", "1G", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_no_context);
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_all_kinds_sync);
    RUN_TEST(test_argument_order);
    RUN_TEST(test_kind_is_reserved);
    RUN_TEST(test_bounds);
    RUN_TEST(test_async_kinds);
    RUN_TEST(test_free_during_async);
    RUN_TEST(test_2d);
    RUN_TEST(test_2d_limits);
    RUN_TEST(test_2d_width_limit);
    RUN_TEST(test_memset);
    RUN_TEST(test_memset_async_host);
    RUN_TEST(test_batch);
    RUN_TEST(test_value_write_wait);
    RUN_TEST(test_cross_device);
    RUN_TEST(test_device_lost);
    RUN_TEST(test_threads);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), 0);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
