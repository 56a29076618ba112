/*
 * test_memory.c - device/host allocation, rounding, errors, capacity (OOM),
 * meminfo, pointer attributes, host registration, managed memory, VMM and
 * multi-thread allocation of the mock (memory.c, managed.c, vmm.c).
 * Runs with ASCEND_MOCK_MEM_PER_DEVICE=64M so that OOM is cheap to reach.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#define MIB ((size_t)1024 * 1024)
#define CAP (64 * MIB)

static int64_t stat_of(int32_t dev, aclmockStat which)
{
    return aclmockGetStat(dev, which);
}

static size_t free_now(void)
{
    size_t f = 0, t = 0;
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    return f;
}

static void test_rounding_and_alignment(void)
{
    /* expect = usable (rounded) size; the capacity it costs is whole pages
     * (test_page_granularity): one normal page here, 2 MiB for HUGE_ONLY.
     * The HUGE1G policies (no +32) are checked in tests/test_lowlevel.py,
     * where a 1 GiB page fits the capacity. */
    struct {
        int api; /* 0 Malloc, 1 Align32, 2 Cached, 3 WithCfg */
        size_t size;
        int policy;
        size_t expect;
    } cases[] = {
        {0, 1, ACL_MEM_MALLOC_HUGE_FIRST, 64},   {0, 32, ACL_MEM_MALLOC_HUGE_FIRST, 64},
        {0, 33, ACL_MEM_MALLOC_NORMAL_ONLY, 96}, {0, 1000, ACL_MEM_MALLOC_HUGE_ONLY, 1056},
        {1, 1, ACL_MEM_MALLOC_HUGE_FIRST, 32},   {1, 64, ACL_MEM_MALLOC_HUGE_FIRST, 64},
        {1, 65, ACL_MEM_MALLOC_HUGE_FIRST, 96},  {2, 1, ACL_MEM_MALLOC_HUGE_FIRST, 64},
        {3, 100, ACL_MEM_MALLOC_HUGE_FIRST, 160},
        {0, 10, ACL_MEM_MALLOC_HUGE_FIRST | ACL_MEM_TYPE_HIGH_BAND_WIDTH, 64},
    };
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        void *p = NULL;
        size_t before = free_now();
        int64_t bytes = stat_of(0, ACLMOCK_STAT_BYTES);
        aclError rc;
        switch (cases[i].api) {
        case 0:
            rc = aclrtMalloc(&p, cases[i].size, (aclrtMemMallocPolicy)cases[i].policy);
            break;
        case 1:
            rc = aclrtMallocAlign32(&p, cases[i].size, (aclrtMemMallocPolicy)cases[i].policy);
            break;
        case 2:
            rc = aclrtMallocCached(&p, cases[i].size, (aclrtMemMallocPolicy)cases[i].policy);
            break;
        default:
            rc = aclrtMallocWithCfg(&p, cases[i].size, (aclrtMemMallocPolicy)cases[i].policy, NULL);
            break;
        }
        CHECK_OK(rc);
        CHECK(p != NULL);
        CHECK_EQ((uintptr_t)p % 64, 0);
        CHECK_EQ(before - free_now(), cases[i].policy == ACL_MEM_MALLOC_HUGE_ONLY ? 2 * MIB : page);
        CHECK_EQ(stat_of(0, ACLMOCK_STAT_BYTES) - bytes, (int64_t)cases[i].expect);
        void *base = NULL;
        size_t size = 0;
        CHECK_OK(aclrtMemGetAddressRange((char *)p + 1, &base, &size));
        CHECK(base == p);
        CHECK_EQ(size, cases[i].expect);
        /* the whole rounded size is usable */
        CHECK_OK(aclrtMemset(p, size, 0x5a, size));
        CHECK_OK(aclrtFree(p));
        CHECK_EQ(free_now(), before);
    }
}

static void test_bad_args(void)
{
    void *p = NULL;
    CHECK_EQ(aclrtMalloc(NULL, 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "size");
    CHECK_EQ(aclrtMallocAlign32(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMallocCached(NULL, 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMallocHost(&p, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMallocHost(NULL, 8), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtFree(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtFreeHost(NULL), ACL_ERROR_INVALID_PARAM);

    /* absurd sizes fail cleanly */
    CHECK_EQ(aclrtMalloc(&p, SIZE_MAX, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_EQ(aclrtMallocAlign32(&p, SIZE_MAX - 10, ACL_MEM_MALLOC_HUGE1G_ONLY), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_EQ(aclrtMallocHost(&p, SIZE_MAX), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_EQ(aclrtMallocHostWithCfg(&p, UINT64_MAX / 2, NULL), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_EQ(aclrtMemAllocManaged(&p, UINT64_MAX, ACL_RT_MEM_ATTACH_GLOBAL), ACL_ERROR_RT_MEMORY_ALLOCATION);

    /* double free, interior pointer, foreign pointer, wrong free function */
    CHECK_OK(aclrtMalloc(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtFree((char *)p + 64), ACL_ERROR_RT_MEMORY_FREE);
    CHECK_EQ(aclrtFreeHost(p), ACL_ERROR_RT_MEMORY_FREE);
    CHECK_OK(aclrtFree(p));
    CHECK_EQ(aclrtFree(p), ACL_ERROR_RT_MEMORY_FREE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtFree");
    int local = 0;
    CHECK_EQ(aclrtFree(&local), ACL_ERROR_RT_MEMORY_FREE);
    void *h = NULL;
    CHECK_OK(aclrtMallocHost(&h, 100));
    CHECK_EQ(aclrtFree(h), ACL_ERROR_RT_MEMORY_FREE);
    CHECK_OK(aclrtFreeHost(h));
    CHECK_EQ(aclrtFreeHost(h), ACL_ERROR_RT_MEMORY_FREE);

    /* bad config attributes */
    aclrtMallocAttribute attr;
    memset(&attr, 0, sizeof(attr));
    attr.attr = (aclrtMallocAttrType)99;
    aclrtMallocConfig cfg = {&attr, 1};
    CHECK_EQ(aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_ERROR_INVALID_PARAM);
    aclrtMallocConfig cfg_null = {NULL, 2};
    CHECK_EQ(aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg_null), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMallocHostWithCfg(&p, 64, &cfg_null), ACL_ERROR_INVALID_PARAM);
    /* device from the config, allocated on device 1 without switching */
    attr.attr = ACL_RT_MEM_ATTR_DEVICE_ID;
    attr.value.deviceId = 1;
    int64_t d1 = stat_of(1, ACLMOCK_STAT_ALLOCATIONS);
    CHECK_OK(aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg));
    CHECK_EQ(stat_of(1, ACLMOCK_STAT_ALLOCATIONS), d1 + 1);
    aclrtPtrAttributes pa;
    CHECK_OK(aclrtPointerGetAttributes(p, &pa));
    CHECK_EQ(pa.location.type, ACL_MEM_LOCATION_TYPE_DEVICE);
    CHECK_EQ(pa.location.id, 1);
    CHECK_OK(aclrtFree(p));
    attr.value.deviceId = 999;
    CHECK_EQ(aclrtMallocWithCfg(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_ERROR_RT_INVALID_DEVICEID);
}

static void *no_context_thread(void *arg)
{
    (void)arg;
    void *p = NULL;
    size_t f, t;
    CHECK_EQ(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t), ACL_ERROR_RT_CONTEXT_NULL);
    /* host memory does not need a device */
    CHECK_OK(aclrtMallocHost(&p, 64));
    CHECK_OK(aclrtFreeHost(p));
    return NULL;
}

static void test_no_context(void)
{
    pthread_t th;
    pthread_create(&th, NULL, no_context_thread, NULL);
    pthread_join(th, NULL);
}

static bool all_zero_on_device(const void *dev, size_t n)
{
    unsigned char *h = (unsigned char *)malloc(n);
    if (h == NULL) {
        return false;
    }
    memset(h, 0x5a, n);
    bool ok = aclrtMemcpy(h, n, dev, n, ACL_MEMCPY_DEVICE_TO_HOST) == ACL_SUCCESS;
    for (size_t i = 0; ok && i < n; i++) {
        ok = h[i] == 0;
    }
    free(h);
    return ok;
}

/* README "Zero-filled device memory": new device and managed allocations read as
 * zeros, also when they reuse pages a previous allocation dirtied. */
static void test_zero_filled(void)
{
    const size_t sizes[] = {1, 100, 4096, 5000, (size_t)3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int round = 0; round < 3; round++) {
            void *p = NULL;
            CHECK_OK(aclrtMalloc(&p, sizes[i], ACL_MEM_MALLOC_HUGE_FIRST));
            CHECK(all_zero_on_device(p, sizes[i]));
            CHECK_OK(aclrtMemset(p, sizes[i], 0xab, sizes[i]));
            CHECK_OK(aclrtFree(p));
        }
    }
    void *m = NULL;
    CHECK_OK(aclrtMemAllocManaged(&m, 8192, ACL_RT_MEM_ATTACH_GLOBAL));
    bool zero = true;
    for (size_t i = 0; i < 8192; i++) {
        zero = zero && ((unsigned char *)m)[i] == 0;
    }
    CHECK(zero);
    CHECK_OK(aclrtFree(m));
}

static void test_oom_and_meminfo(void)
{
    size_t f = 0, t = 0;
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    CHECK_EQ(t, CAP);
    CHECK_EQ(f, CAP);
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, NULL, &t), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetMemInfo((aclrtMemAttr)99, &f, &t), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtGetMemInfo(ACL_DDR_MEM, &f, &t)); /* HBM-only card: DDR reports 0/0 */
    CHECK_EQ(t, 0);

    void *big = NULL, *a = NULL, *b = NULL, *c = NULL;
    CHECK_EQ(aclrtMalloc(&big, CAP + 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "out of device memory");
    /* exactly the capacity fits with Align32 (no padding) */
    CHECK_OK(aclrtMallocAlign32(&big, CAP, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    CHECK_EQ(f, 0);
    CHECK_EQ(aclrtMalloc(&a, 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_OK(aclrtFree(big));
    CHECK_OK(aclrtMalloc(&a, 30 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, 30 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtMalloc(&c, 30 * MIB, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    CHECK_EQ(f, 0); /* 30 MiB + 32 of HUGE_FIRST cost 16 pages of 2 MiB */
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtMalloc(&c, 30 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    /* other devices have their own capacity */
    CHECK_OK(aclrtSetDevice(2));
    CHECK_OK(aclrtMalloc(&a, 60 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtFree(c));
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    CHECK_EQ(f, CAP);

    /* many small allocations: each costs a whole normal page */
    enum { N = 2000 };
    static void *ps[N];
    for (int i = 0; i < N; i++) {
        CHECK_OK(aclrtMallocAlign32(&ps[i], 32, ACL_MEM_MALLOC_NORMAL_ONLY));
    }
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    CHECK_EQ(CAP - f, (size_t)N * (size_t)sysconf(_SC_PAGESIZE));
    for (int i = 0; i < N; i += 2) {
        CHECK_OK(aclrtFree(ps[i]));
    }
    for (int i = 1; i < N; i += 2) {
        CHECK_OK(aclrtFree(ps[i]));
    }
    CHECK_EQ(free_now(), CAP);

    size_t out = 0;
    aclrtMemUsageInfo info[2];
    CHECK_OK(aclrtGetMemUsageInfo(0, info, 2, &out));
    CHECK_EQ(out, 1);
    CHECK_EQ(info[0].curMemSize, 0);
    CHECK_GE(info[0].memPeakSize, CAP);
    CHECK_EQ(aclrtGetMemUsageInfo(0, info, 0, &out), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetMemUsageInfo(77, info, 2, &out), ACL_ERROR_RT_INVALID_DEVICEID);
}

/* aclrtGetMemInfo counts whole pages of the allocation's policy: normal pages
 * for NORMAL_ONLY and HUGE_FIRST up to 1 MiB, 2 MiB for HUGE_ONLY and larger
 * HUGE_FIRST requests (which fall back to normal pages when huge ones do not
 * fit), 1 GiB for HUGE1G_ONLY. */
static void test_page_granularity(void)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct {
        size_t size;
        int policy;
        size_t cost;
    } cases[] = {
        {1, ACL_MEM_MALLOC_NORMAL_ONLY, page},
        {page + 1, ACL_MEM_MALLOC_NORMAL_ONLY_P2P, 2 * page},
        {1, ACL_MEM_MALLOC_HUGE_FIRST, page},
        {MIB, ACL_MEM_MALLOC_HUGE_FIRST, MIB},         /* <= 1 MiB: normal pages */
        {MIB + 1, ACL_MEM_MALLOC_HUGE_FIRST, 2 * MIB}, /* > 1 MiB: huge pages */
        {5 * MIB, ACL_MEM_MALLOC_HUGE_FIRST_P2P, 6 * MIB},
        {1, ACL_MEM_MALLOC_HUGE_ONLY, 2 * MIB},
        {3 * MIB, ACL_MEM_MALLOC_HUGE_ONLY_P2P, 4 * MIB},
        {2 * MIB, ACL_MEM_MALLOC_HUGE_ONLY, 2 * MIB},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        void *p = NULL;
        size_t before = free_now();
        CHECK_OK(aclrtMallocAlign32(&p, cases[i].size, (aclrtMemMallocPolicy)cases[i].policy));
        CHECK_EQ(before - free_now(), cases[i].cost);
        aclrtPtrAttributes pa;
        CHECK_OK(aclrtPointerGetAttributes(p, &pa));
        CHECK_EQ(pa.pageSize, cases[i].cost % (2 * MIB) == 0 ? 2 * MIB : page);
        CHECK_OK(aclrtFree(p));
        CHECK_EQ(free_now(), before);
    }
    /* aclrtMalloc: the +32 bytes can need one more page */
    void *p = NULL;
    size_t before = free_now();
    CHECK_OK(aclrtMalloc(&p, 2 * MIB, ACL_MEM_MALLOC_HUGE_ONLY));
    CHECK_EQ(before - free_now(), 4 * MIB);
    CHECK_OK(aclrtFree(p));
    CHECK_OK(aclrtMalloc(&p, MIB, ACL_MEM_MALLOC_HUGE_FIRST)); /* 1 MiB asked: normal pages */
    CHECK_EQ(before - free_now(), MIB + page);
    CHECK_OK(aclrtFree(p));

    /* a 1 GiB page does not fit the 64 MiB device */
    CHECK_EQ(aclrtMallocAlign32(&p, 1, ACL_MEM_MALLOC_HUGE1G_ONLY), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "1073741824");
    CHECK_EQ(free_now(), CAP);

    /* 1.5 MiB left: HUGE_ONLY fails, HUGE_FIRST takes normal pages */
    void *fill = NULL, *q = NULL;
    CHECK_OK(aclrtMallocAlign32(&fill, CAP - 3 * MIB / 2, ACL_MEM_MALLOC_NORMAL_ONLY));
    CHECK_EQ(free_now(), 3 * MIB / 2);
    CHECK_EQ(aclrtMallocAlign32(&q, 64, ACL_MEM_MALLOC_HUGE_ONLY), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_OK(aclrtMallocAlign32(&q, 5 * MIB / 4, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(free_now(), MIB / 4);
    aclrtPtrAttributes pa;
    CHECK_OK(aclrtPointerGetAttributes(q, &pa));
    CHECK_EQ(pa.pageSize, page);
    CHECK_OK(aclrtFree(q));
    CHECK_OK(aclrtFree(fill));
    CHECK_EQ(free_now(), CAP);
}

static void test_host_memory(void)
{
    int64_t ha = stat_of(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_HOST_ALLOCATIONS);
    void *h = NULL;
    CHECK_OK(aclrtMallocHost(&h, 1000));
    CHECK_EQ((uintptr_t)h % 64, 0);
    memset(h, 7, 1000); /* host memory is host accessible */
    CHECK_EQ(stat_of(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_HOST_ALLOCATIONS), ha + 1);
    aclrtPtrAttributes pa;
    CHECK_OK(aclrtPointerGetAttributes((char *)h + 999, &pa));
    CHECK_EQ(pa.location.type, ACL_MEM_LOCATION_TYPE_HOST);
    /* aclrtMemGetAddressRange works on aclrtMallocHost memory too */
    void *base = NULL;
    size_t size = 0;
    CHECK_OK(aclrtMemGetAddressRange((char *)h + 999, &base, &size));
    CHECK(base == h);
    CHECK_EQ(size, 1000);
    CHECK_OK(aclrtMemGetAddressRange(h, NULL, &size));
    CHECK_EQ(size, 1000);
    CHECK_EQ(aclrtMemGetAddressRange((char *)h + 1000 + 64, &base, &size), ACL_ERROR_RT_PARAM_INVALID);
    void *h2 = NULL;
    aclrtMallocAttribute attr;
    memset(&attr, 0, sizeof(attr));
    attr.attr = ACL_RT_MEM_ATTR_MODULE_ID;
    attr.value.moduleId = 3;
    aclrtMallocConfig cfg = {&attr, 1};
    CHECK_OK(aclrtMallocHostWithCfg(&h2, 4096, &cfg));
    CHECK_OK(aclrtFreeHostWithDevSync(h2));
    CHECK_OK(aclrtFreeHost(h));
    CHECK_EQ(stat_of(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_HOST_ALLOCATIONS), ha);
}

static void test_pointer_attributes(void)
{
    aclrtPtrAttributes pa;
    void *d = NULL, *d2 = NULL;
    CHECK_EQ(aclrtPointerGetAttributes(NULL, &pa), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtMalloc(&d, 100, ACL_MEM_MALLOC_NORMAL_ONLY));
    CHECK_EQ(aclrtPointerGetAttributes(d, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtPointerGetAttributes(d, &pa));
    CHECK_EQ(pa.location.type, ACL_MEM_LOCATION_TYPE_DEVICE);
    CHECK_EQ(pa.location.id, 0);
    CHECK_EQ(pa.pageSize, 4096);
    CHECK_OK(aclrtMalloc(&d2, 4 * MIB, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtPointerGetAttributes(d2, &pa));
    CHECK_EQ(pa.pageSize, 2 * MIB);
    CHECK_EQ((uintptr_t)d2 % (2 * MIB), 0); /* huge-page granule aligned */
    int stack = 0;
    CHECK_OK(aclrtPointerGetAttributes(&stack, &pa));
    CHECK_EQ(pa.location.type, ACL_MEM_LOCATION_TYPE_UNREGISTERED);

    uint32_t res = 9;
    void *list[2] = {d, d2};
    CHECK_OK(aclrtCheckMemType(list, 2, ACL_RT_MEM_TYPE_DEV, &res, 0));
    CHECK_EQ(res, 1);
    void *list2[2] = {d, &stack};
    CHECK_OK(aclrtCheckMemType(list2, 2, ACL_RT_MEM_TYPE_DEV, &res, 0));
    CHECK_EQ(res, 0);
    CHECK_EQ(aclrtCheckMemType(list, 0, ACL_RT_MEM_TYPE_DEV, &res, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCheckMemType(list, 2, 0x1, &res, 0), ACL_ERROR_INVALID_PARAM);

    void *base;
    size_t size;
    CHECK_EQ(aclrtMemGetAddressRange(&stack, &base, &size), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtMemFlush(d, 100));
    CHECK_OK(aclrtMemInvalidate((char *)d + 8, 8));
    CHECK_EQ(aclrtMemFlush(d, 1 << 20), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemFlush(NULL, 8), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtFreeWithDevSync(d));
    CHECK_OK(aclrtFree(d2));
    CHECK_OK(aclrtPointerGetAttributes(d, &pa));
    CHECK_EQ(pa.location.type, ACL_MEM_LOCATION_TYPE_UNREGISTERED);
}

static void test_host_register(void)
{
    size_t n = 8192;
    char *buf = aligned_alloc(4096, n);
    void *dev = NULL;
    CHECK_EQ(aclrtHostRegister(buf, 0, ACL_HOST_REGISTER_MAPPED, &dev), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtHostRegister(buf, n, (aclrtHostRegisterType)3, &dev), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtHostRegister(buf, n, ACL_HOST_REGISTER_MAPPED, &dev));
    CHECK(dev != NULL);
    CHECK_EQ(aclrtHostRegister(buf + 100, 10, ACL_HOST_REGISTER_MAPPED, &dev), ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    void *dp = NULL;
    CHECK_OK(aclrtHostGetDevicePointer(buf + 16, &dp, 0));
    CHECK(dp == (char *)dev + 16);
    /* registered memory is a valid H2D destination / D2H source */
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    memset(buf, 3, 64);
    CHECK_OK(aclrtMemcpy(d, 64, dp, 64, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK_OK(aclrtFree(d));
    CHECK_EQ(aclrtHostUnregister(buf + 16), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_OK(aclrtHostUnregister(buf));
    CHECK_EQ(aclrtHostUnregister(buf), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_EQ(aclrtHostGetDevicePointer(buf, &dp, 0), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_EQ(aclrtHostRegisterV2((void *)(uintptr_t)0x10000, 4096, ACL_HOST_REG_MAPPED), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtHostRegisterV2(buf, n, ACL_HOST_REG_PINNED));
    CHECK_EQ(aclrtHostGetDevicePointer(buf, &dp, 0), ACL_ERROR_RT_PARAM_INVALID); /* not MAPPED */
    CHECK_OK(aclrtHostUnregister(buf));
    CHECK_EQ(aclrtHostRegisterV2(buf, n, 0x1), ACL_ERROR_INVALID_PARAM);
    aclrtHostMemMapCapability cap;
    CHECK_OK(aclrtHostMemMapCapabilities(0, ACL_RT_HAC_TYPE_AIC, &cap));
    CHECK_EQ(cap, ACL_RT_HOST_MEM_MAP_SUPPORTED);
    CHECK_EQ(aclrtHostMemMapCapabilities(0, (aclrtHacType)42, &cap), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtHostMemMapCapabilities(100, ACL_RT_HAC_TYPE_AIC, &cap), ACL_ERROR_RT_INVALID_DEVICEID);
    free(buf);
}

static void test_managed(void)
{
    void *m = NULL;
    CHECK_EQ(aclrtMemAllocManaged(&m, 0, ACL_RT_MEM_ATTACH_GLOBAL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemAllocManaged(&m, 64, 0x8), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtMemAllocManaged(&m, 10000, ACL_RT_MEM_ATTACH_GLOBAL));
    memset(m, 1, 10000); /* host accessible */
    aclrtPtrAttributes pa;
    CHECK_OK(aclrtPointerGetAttributes(m, &pa));
    CHECK_EQ(pa.location.type, ACL_MEM_LOCATION_TYPE_MANAGED);
    aclrtMemManagedLocation dev1 = {ACL_MEM_LOCATIONTYPE_DEVICE, 1};
    aclrtMemManagedLocation host = {ACL_MEM_LOCATIONTYPE_HOST, 0};
    CHECK_OK(aclrtMemManagedAdvise(m, 10000, ACL_MEM_ADVISE_SET_READ_MOSTLY, host));
    CHECK_OK(aclrtMemManagedAdvise(m, 100, ACL_MEM_ADVISE_SET_PREFERRED_LOCATION, dev1));
    CHECK_OK(aclrtMemManagedAdvise(m, 100, ACL_MEM_ADVISE_SET_ACCESSED_BY, dev1));
    CHECK_EQ(aclrtMemManagedAdvise(m, 20000, ACL_MEM_ADVISE_SET_READ_MOSTLY, host), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtMemManagedAdvise(m, 100, (aclrtMemManagedAdviseType)9, host), ACL_ERROR_INVALID_PARAM);
    aclrtMemManagedLocation bad = {ACL_MEM_LOCATIONTYPE_DEVICE, 99};
    CHECK_EQ(aclrtMemManagedAdvise(m, 100, ACL_MEM_ADVISE_SET_PREFERRED_LOCATION, bad), ACL_ERROR_RT_INVALID_DEVICEID);
    int32_t v = -5;
    CHECK_OK(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, m, 100, &v, sizeof(v)));
    CHECK_EQ(v, 1);
    CHECK_OK(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, m, 100, &v, sizeof(v)));
    CHECK_EQ(v, 1);
    int32_t acc[3];
    CHECK_OK(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, 100, acc, sizeof(acc)));
    CHECK_EQ(acc[0], 1);
    CHECK_EQ(acc[1], -2);
    CHECK_OK(aclrtMemManagedPrefetchAsync(m, 100, dev1, 0, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    int32_t t = 0, id = 0;
    aclrtMemManagedRangeAttribute attrs[2] = {ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
                                               ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID};
    void *data[2] = {&t, &id};
    size_t sizes[2] = {4, 4};
    CHECK_OK(aclrtMemManagedGetAttrs(attrs, 2, m, 100, data, sizes));
    CHECK_EQ(t, ACL_MEM_LOCATIONTYPE_DEVICE);
    CHECK_EQ(id, 1);
    const void *ptrs[2] = {m, (char *)m + 5000};
    size_t psz[2] = {100, 100};
    size_t idx[1] = {0};
    CHECK_OK(aclrtMemManagedPrefetchBatchAsync(ptrs, psz, 2, &host, idx, 1, 0, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, m, 100, &v, sizeof(v)));
    CHECK_EQ(v, -1);
    int local;
    CHECK_EQ(aclrtMemManagedPrefetchAsync(&local, 4, dev1, 0, NULL), ACL_ERROR_RT_PARAM_INVALID);
    /* usable as a copy endpoint of either kind */
    void *d = NULL;
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemcpy(d, 64, m, 64, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(m, 64, d, 64, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(m));
}

static void test_vmm(void)
{
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof(prop));
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK_OK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran));
    CHECK_EQ(gran, 2 * MIB);
    CHECK_EQ(aclrtMemGetAllocationGranularity(&prop, (aclrtMemGranularityOptions)7, &gran), ACL_ERROR_INVALID_PARAM);

    void *va = NULL;
    CHECK_OK(aclrtReserveMemAddress(&va, 8 * MIB, 0, NULL, 0));
    CHECK_EQ((uintptr_t)va % gran, 0);
    size_t before = free_now();
    aclrtDrvMemHandle h = NULL;
    CHECK_EQ(aclrtMallocPhysical(&h, 1000, &prop, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtMallocPhysical(&h, 2 * MIB, &prop, 0));
    CHECK_EQ(before - free_now(), 2 * MIB);
    aclrtPhysicalMemProp got;
    CHECK_OK(aclrtMemGetAllocationPropertiesFromHandle(h, &got));
    CHECK_EQ(got.memAttr, ACL_HBM_MEM_HUGE);

    /* the same physical memory mapped twice aliases */
    char *a = va, *b = (char *)va + 4 * MIB;
    CHECK_OK(aclrtMapMem(a, 2 * MIB, 0, h, 0));
    CHECK_OK(aclrtMapMem(b, 2 * MIB, 0, h, 0));
    CHECK_EQ(aclrtMapMem(a, 2 * MIB, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID); /* already mapped */
    CHECK_EQ(aclrtMapMem((char *)va + 2 * MIB, 4 * MIB, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);
    char src[256], dst[256];
    for (int i = 0; i < 256; i++) {
        src[i] = (char)i;
    }
    CHECK_OK(aclrtMemcpy(a + 100, 256, src, 256, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(dst, 0, sizeof(dst));
    CHECK_OK(aclrtMemcpy(dst, 256, b + 100, 256, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(src, dst, 256) == 0);
    /* unmapped parts of the reservation are not copy targets */
    CHECK_EQ(aclrtMemcpy((char *)va + 2 * MIB, 16, src, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    aclrtPtrAttributes pa;
    CHECK_OK(aclrtPointerGetAttributes(a, &pa));
    CHECK_EQ(pa.location.type, ACL_MEM_LOCATION_TYPE_DEVICE);

    /* access flags */
    aclrtMemLocation loc = {0, ACL_MEM_LOCATION_TYPE_DEVICE};
    uint64_t flag = 9;
    CHECK_OK(aclrtMemGetAccess(a, &loc, &flag));
    CHECK_EQ(flag, ACL_RT_MEM_ACCESS_FLAGS_READWRITE);
    aclrtMemAccessDesc desc;
    memset(&desc, 0, sizeof(desc));
    desc.flags = ACL_RT_MEM_ACCESS_FLAGS_READ;
    desc.location = loc;
    CHECK_OK(aclrtMemSetAccess(a, 2 * MIB, &desc, 1));
    CHECK_OK(aclrtMemGetAccess(a, &loc, &flag));
    CHECK_EQ(flag, ACL_RT_MEM_ACCESS_FLAGS_READ);
    CHECK_EQ(aclrtMemcpy(a, 16, src, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID); /* read-only */
    CHECK_OK(aclrtMemcpy(dst, 16, a, 16, ACL_MEMCPY_DEVICE_TO_HOST));
    desc.flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
    CHECK_OK(aclrtMemSetAccess(a, 2 * MIB, &desc, 1));
    CHECK_EQ(aclrtMemSetAccess((char *)va + 2 * MIB, 2 * MIB, &desc, 1), ACL_ERROR_RT_PARAM_INVALID);

    aclrtDrvMemHandle h2 = NULL;
    CHECK_OK(aclrtMemRetainAllocationHandle(b + 5, &h2));
    CHECK(h2 == h);
    CHECK_OK(aclrtFreePhysical(h2)); /* drops the retained reference */
    uint32_t res = 0;
    void *l[1] = {a};
    CHECK_OK(aclrtCheckMemType(l, 1, ACL_RT_MEM_TYPE_RSVD, &res, 0));
    CHECK_EQ(res, 1);

    CHECK_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID); /* still mapped */
    CHECK_OK(aclrtFreePhysical(h)); /* mapped memory stays alive */
    CHECK_EQ(aclrtFreePhysical(h), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK_OK(aclrtMemcpy(dst, 256, a + 100, 256, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(src, dst, 256) == 0);
    CHECK_OK(aclrtUnmapMem(a));
    CHECK_EQ(aclrtUnmapMem(a), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtUnmapMem(b));
    CHECK_EQ(free_now(), before); /* physical memory released with its last mapping */
    CHECK_OK(aclrtReleaseMemAddress(va));
    CHECK_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID);

    /* NoAccess mapping and NoUC reservation */
    CHECK_OK(aclrtReserveMemAddressNoUCMemory(&va, 2 * MIB, 0, NULL, 0));
    CHECK_OK(aclrtMallocPhysical(&h, 2 * MIB, &prop, 0));
    CHECK_OK(aclrtMemMapNoAccess(va, 2 * MIB, 0, h, 0));
    CHECK_EQ(aclrtMemcpy(va, 16, src, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtMemSetAccess(va, 2 * MIB, &desc, 1));
    CHECK_OK(aclrtMemcpy(va, 16, src, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtUnmapMem(va));
    CHECK_OK(aclrtFreePhysical(h));
    CHECK_OK(aclrtReleaseMemAddress(va));

    /* errors */
    CHECK_EQ(aclrtMallocPhysical(&h, 100 * MIB, &prop, 0), ACL_ERROR_RT_MEMORY_ALLOCATION);
    prop.location.id = 50;
    CHECK_EQ(aclrtMallocPhysical(&h, 2 * MIB, &prop, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    prop.location.type = ACL_MEM_LOCATION_TYPE_HOST;
    CHECK_EQ(aclrtMallocPhysical(&h, 2 * MIB, &prop, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtReserveMemAddress(NULL, 2 * MIB, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtReserveMemAddress(&va, 0, 0, NULL, 0), ACL_ERROR_INVALID_PARAM);
    int junk;
    CHECK_EQ(aclrtFreePhysical(&junk), ACL_ERROR_RT_INVALID_HANDLE);
    CHECK_EQ(aclrtMapMem(&junk, 2 * MIB, 0, &junk, 0), ACL_ERROR_RT_PARAM_INVALID);
}

/* ------------------------------------------------------------ threads */

typedef struct worker_arg {
    int dev;
    int iters;
} worker_arg;

static void *alloc_worker(void *p)
{
    worker_arg *w = p;
    CHECK_OK(aclrtSetDevice(w->dev));
    void *ptrs[16] = {0};
    for (int i = 0; i < w->iters; i++) {
        int slot = i % 16;
        if (ptrs[slot] != NULL) {
            unsigned char b = 0;
            CHECK_OK(aclrtMemcpy(&b, 1, ptrs[slot], 1, ACL_MEMCPY_DEVICE_TO_HOST));
            CHECK_EQ(b, (unsigned char)w->dev);
            CHECK_OK(aclrtFree(ptrs[slot]));
        }
        size_t sz = (size_t)(1 + (i * 7919) % 50000);
        CHECK_OK(aclrtMalloc(&ptrs[slot], sz, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK_OK(aclrtMemset(ptrs[slot], sz, w->dev, sz));
    }
    for (int i = 0; i < 16; i++) {
        if (ptrs[i] != NULL) {
            CHECK_OK(aclrtFree(ptrs[i]));
        }
    }
    CHECK_OK(aclrtResetDevice(w->dev));
    return NULL;
}

static void test_threads(void)
{
    enum { T = 8 };
    pthread_t th[T];
    worker_arg args[T];
    int64_t allocs = stat_of(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS);
    for (int i = 0; i < T; i++) {
        args[i].dev = i % 4;
        args[i].iters = 300;
        pthread_create(&th[i], NULL, alloc_worker, &args[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
    }
    CHECK_EQ(stat_of(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), allocs);
    CHECK_EQ(free_now(), CAP);
}

static void test_finalize_releases(void)
{
    void *d = NULL, *h = NULL;
    CHECK_OK(aclrtMalloc(&d, 1000, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h, 1000));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    CHECK_EQ(stat_of(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), 0);
    CHECK_EQ(stat_of(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_HOST_ALLOCATIONS), 0);
    /* the runtime is usable again after a new aclInit */
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_EQ(free_now(), CAP);
    CHECK_OK(aclrtMalloc(&d, 1000, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

int main(void)
{
    mt_mock_env("ASCEND_MOCK_MEM_PER_DEVICE", "64M", "ASCEND_MOCK_DEVICE_COUNT", "4", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_no_context);
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_rounding_and_alignment);
    RUN_TEST(test_bad_args);
    RUN_TEST(test_zero_filled);
    RUN_TEST(test_oom_and_meminfo);
    RUN_TEST(test_page_granularity);
    RUN_TEST(test_host_memory);
    RUN_TEST(test_pointer_attributes);
    RUN_TEST(test_host_register);
    RUN_TEST(test_managed);
    RUN_TEST(test_vmm);
    RUN_TEST(test_threads);
    RUN_TEST(test_finalize_releases);
    return TEST_REPORT();
}
