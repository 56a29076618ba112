/* test_rest.c - the remaining runtime calls the mock simulates without device code:
 * memory-copy descriptors and offset copies, task-scheduler memory, peer mapping and link
 * selection, compute groups and the task-scheduler selection, the device error queries
 * and repair, the per-context float-overflow status area (mock README, "Memory copy
 * descriptors", "Peer mapping and links", "Compute groups", "Device errors and repair",
 * "Float overflow status area"), and aclrtPersistentTaskClean ("Streams: abort, forced
 * destroy, persistent streams"). */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_mock_kernel.h"
#include "mock_test.h"

static void test_memcpy_desc(void)
{
    size_t dsize = 0;
    CHECK_OK(aclrtGetMemcpyDescSize(ACL_MEMCPY_DEVICE_TO_DEVICE, &dsize));
    CHECK_GE(dsize, 40);
    CHECK_EQ(aclrtGetMemcpyDescSize((aclrtMemcpyKind)7, &dsize), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetMemcpyDescSize(ACL_MEMCPY_DEVICE_TO_DEVICE, NULL), ACL_ERROR_INVALID_PARAM);
    void *desc = NULL, *a = NULL, *b = NULL;
    CHECK_OK(aclrtMalloc(&desc, dsize, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&a, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    uint8_t host[256], back[256];
    for (int i = 0; i < 256; i++) {
        host[i] = (uint8_t)i;
    }
    CHECK_OK(aclrtMemcpy(a, 256, host, 256, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_EQ(aclrtMemcpyAsyncWithDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not filled by aclrtSetMemcpyDesc");
    CHECK_OK(aclrtSetMemcpyDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, a, b, 200, NULL));
    CHECK_EQ(aclrtMemcpyAsyncWithDesc(desc, ACL_MEMCPY_HOST_TO_DEVICE, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtMemcpyAsyncWithDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL));
    CHECK_OK(aclrtSynchronizeDevice());
    memset(back, 0, sizeof back);
    CHECK_OK(aclrtMemcpy(back, 256, b, 256, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(back, host, 200) == 0 && back[200] == 0);
    /* checks of the descriptor itself */
    char hostdesc[64];
    CHECK_EQ(aclrtSetMemcpyDesc(hostdesc, ACL_MEMCPY_DEVICE_TO_DEVICE, a, b, 8, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSetMemcpyDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, a, b, 0, NULL), ACL_ERROR_INVALID_PARAM);
    int cfg = 0;
    CHECK_EQ(aclrtSetMemcpyDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, a, b, 8, &cfg), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetMemcpyDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL, b, 8, NULL), ACL_ERROR_INVALID_PARAM);
    /* the copy is checked like aclrtMemcpyAsync when it is issued */
    CHECK_OK(aclrtSetMemcpyDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, a, b, 100000, NULL));
    CHECK_EQ(aclrtMemcpyAsyncWithDesc(desc, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtMemcpyAsyncWithDesc: argument 'dst'");
    CHECK_OK(aclrtFree(desc));
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
}

static void test_memcpy_with_offset(void)
{
    uint8_t *a = NULL, *b = NULL;
    CHECK_OK(aclrtMalloc((void **)&a, 128, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&b, 128, ACL_MEM_MALLOC_HUGE_FIRST));
    uint8_t host[128];
    for (int i = 0; i < 128; i++) {
        host[i] = (uint8_t)(i + 1);
    }
    CHECK_OK(aclrtMemcpy(a, 128, host, 128, ACL_MEMCPY_HOST_TO_DEVICE));
    /* pointer slots in host memory ... */
    void *dst_slot = b;
    const void *src_slot = a;
    CHECK_OK(aclrtMemcpyAsyncWithOffset(&dst_slot, 64, 8, &src_slot, 16, 32, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL));
    /* ... and in device memory */
    void **dev_slots = NULL;
    CHECK_OK(aclrtMalloc((void **)&dev_slots, 2 * sizeof(void *), ACL_MEM_MALLOC_HUGE_FIRST));
    void *slots[2] = {b, a};
    CHECK_OK(aclrtMemcpy(dev_slots, 2 * sizeof(void *), slots, sizeof slots, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpyAsyncWithOffset(&dev_slots[0], 32, 64, (const void **)&dev_slots[1], 4, 0,
                                        ACL_MEMCPY_DEVICE_TO_DEVICE, NULL));
    CHECK_OK(aclrtSynchronizeDevice());
    uint8_t back[128];
    CHECK_OK(aclrtMemcpy(back, 128, b, 128, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(memcmp(back + 8, host + 32, 16) == 0);
    CHECK(memcmp(back + 64, host, 4) == 0);
    /* bad slots */
    void *null_slot = NULL;
    CHECK_EQ(aclrtMemcpyAsyncWithOffset(&null_slot, 64, 0, &src_slot, 4, 0, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL),
             ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpyAsyncWithOffset(NULL, 64, 0, &src_slot, 4, 0, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL),
             ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemcpyAsyncWithOffset(&dst_slot, 8, 120, &src_slot, 16, 0, ACL_MEMCPY_DEVICE_TO_DEVICE, NULL),
             ACL_ERROR_RT_PARAM_INVALID); /* count > destMax */
    CHECK_OK(aclrtFree(dev_slots));
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
}

static void test_malloc_for_task_scheduler(void)
{
    void *p = NULL;
    int64_t allocs = aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS);
    CHECK_OK(aclrtMallocForTaskScheduler(&p, 100, ACL_MEM_MALLOC_HUGE_FIRST, NULL));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs + 1);
    aclrtPtrAttributes attr;
    CHECK_OK(aclrtPointerGetAttributes(p, &attr));
    CHECK_EQ(attr.location.type, ACL_MEM_LOCATION_TYPE_DEVICE);
    CHECK_OK(aclrtFree(p));
    CHECK_EQ(aclrtMallocForTaskScheduler(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtMallocForTaskScheduler");
}

static void test_peer_map_and_links(void)
{
    void *dev = NULL;
    CHECK_OK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemP2PMap(dev, 4096, 1, 0));
    CHECK_EQ(aclrtMemP2PMap(dev, 4096, 0, 0), ACL_ERROR_RT_PARAM_INVALID); /* its own device */
    CHECK_EQ(aclrtMemP2PMap(dev, 4096, 99, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtMemP2PMap(dev, 4096, 1, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemP2PMap(dev, 1 << 20, 1, 0), ACL_ERROR_RT_PARAM_INVALID);
    char host[16];
    CHECK_EQ(aclrtMemP2PMap(host, 16, 1, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(dev));

    /* link selection on physical handles and reserved ranges */
    aclrtPhysicalMemProp prop;
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    CHECK_OK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran));
    aclrtDrvMemHandle h = NULL;
    CHECK_OK(aclrtMallocPhysical(&h, gran, &prop, 0));
    CHECK_OK(aclrtMemMapSetLink(h, ACL_RT_MEM_ACCESS_LINK_HCCS)); /* A2 has HCCS */
    CHECK_EQ(aclrtMemMapSetLink(h, ACL_RT_MEM_ACCESS_LINK_SIO), ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED);
    CHECK_EQ(aclrtMemMapSetLink(h, ACL_RT_MEM_ACCESS_UB_ONE_PORT_PATH), ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED);
    CHECK_EQ(aclrtMemMapSetLink(h, (aclrtMemLinkType)9), ACL_ERROR_INVALID_PARAM);
    int junk = 0;
    CHECK_EQ(aclrtMemMapSetLink(&junk, ACL_RT_MEM_ACCESS_LINK_HCCS), ACL_ERROR_INVALID_PARAM);
    void *va = NULL, *vb = NULL;
    CHECK_OK(aclrtReserveMemAddress(&va, gran, 0, NULL, 0));
    CHECK_OK(aclrtReserveMemAddress(&vb, gran, 0, NULL, 0));
    CHECK_OK(aclrtMemMapSelectedLink(va, gran, vb, ACL_RT_MEM_LINK_IDX_1));
    CHECK_EQ(aclrtMemMapSelectedLink(va, gran, vb, 2), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemMapSelectedLink(va, 0, vb, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtMemMapSelectedLink(host, 16, vb, 0), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtReleaseMemAddress(va));
    CHECK_OK(aclrtReleaseMemAddress(vb));
    CHECK_OK(aclrtFreePhysical(h));
    CHECK_EQ(aclrtMemMapSetLink(h, ACL_RT_MEM_ACCESS_LINK_HCCS), ACL_ERROR_INVALID_PARAM); /* freed */
}

static void test_groups_and_ts(void)
{
    uint32_t count = 9;
    CHECK_OK(aclrtGetGroupCount(&count));
    CHECK_EQ(count, 0); /* the devices are not partitioned */
    aclrtGroupInfo *g = aclrtCreateGroupInfo();
    CHECK(g != NULL);
    CHECK_OK(aclrtGetAllGroupInfo(g));
    int32_t v = 0;
    size_t ret = 0;
    CHECK_EQ(aclrtGetGroupInfoDetail(g, 0, ACL_GROUP_AICORE_INT, &v, sizeof v, &ret), ACL_ERROR_RT_GROUP_NOT_CREATE);
    CHECK_EQ(aclrtGetGroupInfoDetail(g, 0, (aclrtGroupAttr)9, &v, sizeof v, &ret), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetGroupInfoDetail(g, 0, ACL_GROUP_AICORE_INT, &v, 2, &ret), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetGroup(0), ACL_ERROR_RT_GROUP_NOT_CREATE);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSetGroup: compute group 0 does not exist");
    CHECK_OK(aclrtDestroyGroupInfo(g));
    CHECK_EQ(aclrtDestroyGroupInfo(g), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetAllGroupInfo(g), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetGroupCount(NULL), ACL_ERROR_INVALID_PARAM);

    CHECK_OK(aclrtSetTsDevice(ACL_TS_ID_AIVECTOR));
    CHECK_OK(aclrtSetTsDevice(ACL_TS_ID_AICORE));
    CHECK_EQ(aclrtSetTsDevice(ACL_TS_ID_RESERVED), ACL_ERROR_INVALID_PARAM);
}

static void test_error_queries_and_repair(void)
{
    aclrtMemUceInfo info[4];
    size_t n = 9;
    CHECK_OK(aclrtGetMemUceInfo(0, info, 4, &n));
    CHECK_EQ(n, 0); /* no uncorrectable errors */
    CHECK_OK(aclrtGetMemUceInfo(0, NULL, 0, &n));
    CHECK_EQ(aclrtGetMemUceInfo(0, NULL, 4, &n), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetMemUceInfo(99, info, 4, &n), ACL_ERROR_RT_INVALID_DEVICEID);
    memset(info, 0, sizeof info);
    info[0].addr = &n;
    info[0].len = 8;
    CHECK_OK(aclrtMemUceRepair(0, info, 1)); /* nothing to repair */
    CHECK_EQ(aclrtMemUceRepair(0, info, 2), ACL_ERROR_INVALID_PARAM); /* entry 1 is empty */
    CHECK_EQ(aclrtMemUceRepair(0, info, MAX_MEM_UCE_INFO_ARRAY_SIZE + 1), ACL_ERROR_INVALID_PARAM);

    aclrtErrorInfo e;
    memset(&e, 0xFF, sizeof e);
    CHECK_OK(aclrtGetErrorVerbose(0, &e));
    CHECK_EQ(e.errorType, ACL_RT_NO_ERROR);
    CHECK_EQ(e.tryRepair, 0);
    CHECK_EQ(e.hasDetail, 0);
    CHECK_OK(aclrtRepairError(0, &e));
    e.errorType = ACL_RT_ERROR_MEMORY;
    CHECK_EQ(aclrtRepairError(0, &e), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "reported no error");
    e.errorType = (aclrtErrorType)77;
    CHECK_EQ(aclrtRepairError(0, &e), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetErrorVerbose(0, NULL), ACL_ERROR_INVALID_PARAM);
    /* a lost device answers its sticky code, like every device query */
    CHECK_OK(aclmockSetDeviceLost(3, ACL_ERROR_RT_DEVICE_MEM_ERROR));
    CHECK_EQ(aclrtGetErrorVerbose(3, &e), ACL_ERROR_RT_DEVICE_MEM_ERROR);
    CHECK_EQ(aclrtGetMemUceInfo(3, info, 4, &n), ACL_ERROR_RT_DEVICE_MEM_ERROR);
    CHECK_OK(aclmockSetDeviceLost(3, 0));
}

static void test_overflow_addr(void)
{
    void *p = NULL, *q = NULL;
    int64_t allocs = aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS);
    CHECK_OK(aclrtCtxGetFloatOverflowAddr(&p));
    CHECK(p != NULL);
    CHECK_OK(aclrtCtxGetFloatOverflowAddr(&q));
    CHECK(p == q); /* one area per context */
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs + 1);
    uint8_t status[64];
    memset(status, 0xFF, sizeof status);
    CHECK_OK(aclrtMemcpy(status, sizeof status, p, sizeof status, ACL_MEMCPY_DEVICE_TO_HOST));
    for (size_t i = 0; i < sizeof status; i++) {
        CHECK_EQ(status[i], 0); /* no overflow */
    }
    /* another context has its own, freed with it */
    aclrtContext ctx = NULL, primary = NULL;
    CHECK_OK(aclrtGetCurrentContext(&primary));
    CHECK_OK(aclrtCreateContext(&ctx, 0));
    CHECK_OK(aclrtCtxGetFloatOverflowAddr(&q));
    CHECK(q != p);
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs + 2);
    CHECK_OK(aclrtDestroyContext(ctx));
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), allocs + 1);
    CHECK_OK(aclrtSetCurrentContext(primary));
    CHECK_EQ(aclrtCtxGetFloatOverflowAddr(NULL), ACL_ERROR_INVALID_PARAM);
}

/* A twin that must never run: its launches go to a persistent stream. */
static atomic_int g_kept_runs;
ACLMOCK_KERNEL(kept_never_run, 0, ACLMOCK_PTR_OUT, ACLMOCK_PTR_IN)
{
    (void)args;
    (void)userData;
    (void)blockIdx;
    (void)blockDim;
    atomic_fetch_add(&g_kept_runs, 1);
    return 0;
}

static void count_fn(void *arg)
{
    atomic_fetch_add((atomic_int *)arg, 1);
}

static size_t hbm_free(void)
{
    size_t f = 0, t = 0;
    CHECK_OK(aclrtGetMemInfo(ACL_HBM_MEM, &f, &t));
    return f;
}

/* aclrtPersistentTaskClean (06_stream_management.md): the tasks a persistent stream keeps
 * are released without running - a launch's placeholder copy (1 MiB of device memory
 * the launch owns) goes back to the device - and the stream keeps what comes next. */
static void test_persistent_task_clean(void)
{
    enum { PH_BYTES = 1 << 20 };
    static struct { void *out; void *ph; uint8_t data[PH_BYTES]; } host;
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)kept_never_run, &f));
    void *out = NULL;
    CHECK_OK(aclrtMalloc(&out, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    host.out = out;
    aclrtPlaceHolderInfo info = {8, 16};
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStreamWithConfig(&s, 0, ACL_STREAM_PERSISTENT));
    atomic_int hits;
    atomic_init(&hits, 0);
    size_t before = hbm_free();
    for (int round = 0; round < 2; round++) {
        CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, s, NULL, &host, sizeof host, &info, 1));
        CHECK_OK(aclrtLaunchHostFunc(s, count_fn, &hits));
        CHECK_LE(hbm_free() + PH_BYTES, before); /* the kept launch holds its copy */
        CHECK_OK(aclrtPersistentTaskClean(s));
        CHECK_EQ(hbm_free(), before);
        CHECK_OK(aclrtPersistentTaskClean(s)); /* nothing kept: still fine */
    }
    /* kept again after a clean, released by the destruction */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, s, NULL, &host, sizeof host, &info, 1));
    CHECK_LE(hbm_free() + PH_BYTES, before);
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(hbm_free(), before);
    CHECK_EQ(atomic_load(&hits), 0);
    CHECK_EQ(atomic_load(&g_kept_runs), 0);
    /* argument checks */
    CHECK_EQ(aclrtPersistentTaskClean(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtPersistentTaskClean(s), ACL_ERROR_RT_PARAM_INVALID); /* destroyed */
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_EQ(aclrtPersistentTaskClean(s), ACL_ERROR_RT_PARAM_INVALID); /* mock choice */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtPersistentTaskClean: the stream was not created with");
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtFree(out));
}

int main(void)
{
    mt_mock_env((const char *)NULL);
    CHECK_OK(aclInit(NULL));
    uint32_t count = 0;
    CHECK_EQ(aclrtGetGroupCount(&count), ACL_ERROR_RT_CONTEXT_NULL);
    void *p = NULL;
    CHECK_EQ(aclrtCtxGetFloatOverflowAddr(&p), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_memcpy_desc);
    RUN_TEST(test_memcpy_with_offset);
    RUN_TEST(test_malloc_for_task_scheduler);
    RUN_TEST(test_peer_map_and_links);
    RUN_TEST(test_groups_and_ts);
    RUN_TEST(test_error_queries_and_repair);
    RUN_TEST(test_overflow_addr);
    RUN_TEST(test_persistent_task_clean);
    CHECK_OK(aclrtResetDevice(0)); /* frees the primary context's overflow area */
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), 0);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
