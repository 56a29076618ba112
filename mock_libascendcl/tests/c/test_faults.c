/* test_faults.c - fault injection and device-lost across subsystems: an injected
 * failure has no side effect and is reported like a real one; a lost device makes
 * every later call on it fail with the sticky code (mock-core). */
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static void drain_errors(void)
{
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    (void)aclGetRecentErrMsg();
}

static void test_injected_failures_have_no_side_effects(void)
{
    /* set device */
    CHECK_OK(aclmockInjectFault("aclrtSetDevice", 1, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL));
    CHECK_EQ(aclrtSetDevice(0), ACL_ERROR_RT_RESOURCE_ALLOC_FAIL);
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_CONTEXTS), 0);
    int32_t dev;
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_RESOURCE_ALLOC_FAIL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSetDevice: injected fault");
    drain_errors();
    CHECK_OK(aclrtSetDevice(0));

    /* context */
    aclrtContext ctx = NULL;
    CHECK_OK(aclmockInjectFault("aclrtCreateContext", 1, 507899));
    CHECK_EQ(aclrtCreateContext(&ctx, 1), 507899);
    CHECK(ctx == NULL);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_CONTEXTS), 0);

    /* stream */
    aclrtStream s = NULL;
    int64_t streams = aclmockGetStat(0, ACLMOCK_STAT_STREAMS);
    CHECK_OK(aclmockInjectFault("aclrtCreateStream", 1, ACL_ERROR_RT_NO_STREAM_RESOURCE));
    CHECK_EQ(aclrtCreateStream(&s), ACL_ERROR_RT_NO_STREAM_RESOURCE);
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_STREAMS), streams);
    CHECK_OK(aclrtCreateStream(&s));

    /* memory: the 3rd allocation fails like an OOM */
    void *p[3] = {NULL, NULL, NULL};
    CHECK_OK(aclmockInjectFault("aclrtMalloc", 3, ACL_ERROR_RT_MEMORY_ALLOCATION));
    CHECK_OK(aclrtMalloc(&p[0], 100, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&p[1], 100, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtMalloc(&p[2], 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK(p[2] == NULL);
    CHECK_EQ(aclmockGetStat(0, ACLMOCK_STAT_ALLOCATIONS), 2);
    CHECK_EQ(aclmockGetFaultHits("aclrtMalloc"), 1);

    /* copies */
    char host[64] = "hello";
    CHECK_OK(aclmockInjectFault("aclrtMemcpy", 1, 507053));
    CHECK_EQ(aclrtMemcpy(p[0], 100, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE), 507053);
    CHECK_OK(aclrtMemcpy(p[0], 100, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    char back[64] = {0};
    CHECK_OK(aclrtMemcpy(back, sizeof back, p[0], sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_STR_EQ(back, "hello");

    CHECK_OK(aclrtFree(p[0]));
    CHECK_OK(aclrtFree(p[1]));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
    aclmockClearFaults();
    drain_errors();
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), 0);
}

static void test_device_lost_everywhere(void)
{
    const aclError LOST = ACL_ERROR_RT_LOST_HEARTBEAT;
    CHECK_OK(aclrtSetDevice(2));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *dp = NULL;
    CHECK_OK(aclrtMalloc(&dp, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtEvent ev = NULL;
    CHECK_OK(aclrtCreateEvent(&ev));

    CHECK_OK(aclmockSetDeviceLost(2, LOST));
    void *dp2 = NULL;
    CHECK_EQ(aclrtMalloc(&dp2, 256, ACL_MEM_MALLOC_HUGE_FIRST), LOST);
    aclrtStream s2 = NULL;
    CHECK_EQ(aclrtCreateStream(&s2), LOST);
    CHECK_EQ(aclrtSynchronizeDevice(), LOST);
    CHECK_EQ(aclrtSetDevice(2), LOST);
    aclrtContext c;
    CHECK_EQ(aclrtCreateContext(&c, 2), LOST);
    aclrtStream ds = NULL;
    CHECK_EQ(aclrtCtxGetCurrentDefaultStream(&ds), LOST);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), LOST);
    /* another device keeps working */
    CHECK_OK(aclrtSetDevice(3));
    void *dp3 = NULL;
    CHECK_OK(aclrtMalloc(&dp3, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtFree(dp3));
    CHECK_OK(aclrtResetDevice(3));

    /* revive to clean up (a real card would need a reboot) */
    CHECK_OK(aclmockSetDeviceLost(2, 0));
    aclrtContext primary = NULL;
    CHECK_OK(aclrtSetDevice(2));
    CHECK_OK(aclrtGetCurrentContext(&primary));
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtFree(dp));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDeviceForce(2));
    drain_errors();
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_STREAMS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_EVENTS), 0);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_ALLOCATIONS), 0);
}

static void test_fault_on_unsupported_and_init(void)
{
    /* faults apply to every MOCK_ENTER-guarded entry point, including aclInit */
    CHECK_OK(aclmockInjectFault("aclInit", 1, 507899));
    CHECK_EQ(aclInit(NULL), 507899);
    CHECK_EQ(aclFinalize(), ACL_ERROR_REPEAT_FINALIZE); /* not initialised */
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclmockInjectFault("aclFinalize", 1, 507899));
    CHECK_EQ(aclFinalize(), 507899);
    CHECK_OK(aclFinalize());
    aclmockClearFaults();
    drain_errors();
}

int main(void)
{
    RUN_TEST(test_injected_failures_have_no_side_effects);
    RUN_TEST(test_device_lost_everywhere);
    RUN_TEST(test_fault_on_unsupported_and_init);
    return TEST_REPORT();
}
