/* test_device.c - device count/set/reset/refcounts, per-thread current device,
 * device queries, id mapping, limits, timeouts, callbacks, device lost (mock-core). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static void test_count_and_set(void)
{
    uint32_t n = 0;
    CHECK_EQ(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 8);
    CHECK_EQ(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtSetDevice(8), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "deviceId");
    CHECK_EQ(aclrtResetDevice(8), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtResetDeviceForce(-3), ACL_ERROR_RT_INVALID_DEVICEID);

    int32_t dev = -1;
    CHECK_EQ(aclrtGetDevice(NULL), ACL_ERROR_INVALID_PARAM);
    (void)aclGetRecentErrMsg();
    /* no device yet: 107002, and (special state) no error message recorded */
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclGetRecentErrMsg() == NULL);
    CHECK_EQ(dev, -1);

    CHECK_OK(aclrtSetDevice(2));
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 2);
    CHECK_OK(aclrtSetDevice(5)); /* switching is allowed */
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 5);
    CHECK_OK(aclrtResetDevice(5));
    CHECK_OK(aclrtResetDevice(2));
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_CONTEXTS), 0);
}

static void test_refcount(void)
{
    uint32_t flags = 9;
    int32_t active = -1;
    CHECK_EQ(aclrtGetPrimaryCtxState(1, &flags, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetPrimaryCtxState(99, &flags, &active), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtGetPrimaryCtxState(1, &flags, &active));
    CHECK_EQ(active, 0);
    CHECK_EQ(flags, 0);

    aclrtContext c1 = NULL, c2 = NULL;
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtGetCurrentContext(&c1));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtGetCurrentContext(&c2));
    CHECK(c1 == c2); /* the same default context */
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_GE(aclmockGetStat(1, ACLMOCK_STAT_STREAMS), 1);
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclrtGetPrimaryCtxState(1, &flags, &active));
    CHECK_EQ(active, 1); /* still one reference */
    int32_t dev = -1;
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 1);
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclrtGetPrimaryCtxState(1, &flags, &active));
    CHECK_EQ(active, 0);
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_STREAMS), 0);
    /* a reset without a matching aclrtSetDevice is refused (test_unbalanced_reset) */
    CHECK_EQ(aclrtResetDevice(1), ACL_ERROR_RT_CONTEXT_NULL);

    /* force releases whatever the count */
    CHECK_OK(aclrtSetDevice(3));
    CHECK_OK(aclrtSetDevice(3));
    CHECK_OK(aclrtSetDevice(3));
    CHECK_OK(aclrtResetDeviceForce(3));
    CHECK_OK(aclrtGetPrimaryCtxState(3, &flags, &active));
    CHECK_EQ(active, 0);
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtResetDeviceForce(3), ACL_ERROR_RT_CONTEXT_NULL);
}

/* aclrtGetPrimaryCtxState: `flags` is optional (only `active` is required). */
static void test_primary_ctx_state_null_flags(void)
{
    int32_t active = -1;
    CHECK_OK(aclrtGetPrimaryCtxState(2, NULL, &active));
    CHECK_EQ(active, 0);
    CHECK_OK(aclrtSetDevice(2));
    CHECK_OK(aclrtGetPrimaryCtxState(2, NULL, &active));
    CHECK_EQ(active, 1);
    CHECK_OK(aclrtResetDevice(2));
    CHECK_EQ(aclrtGetPrimaryCtxState(2, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "active");
}

static int g_unbalanced_state_events;

static void on_unbalanced_state(int32_t devId, aclrtDeviceState state, void *args)
{
    (void)devId;
    (void)state;
    (void)args;
    __atomic_fetch_add(&g_unbalanced_state_events, 1, __ATOMIC_RELAXED);
}

/* Once a device's reference count is 0, aclrtResetDevice and aclrtResetDeviceForce fail
 * with ACL_ERROR_RT_CONTEXT_NULL and touch nothing (no state callbacks). */
static void test_unbalanced_reset(void)
{
    int32_t dev = -1;
    CHECK_EQ(aclrtResetDevice(7), ACL_ERROR_RT_CONTEXT_NULL); /* never set */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not set");
    CHECK_EQ(aclrtResetDeviceForce(7), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtResetDeviceForce");

    CHECK_OK(aclrtRegDeviceStateCallback("unbalanced", on_unbalanced_state, NULL));
    CHECK_OK(aclrtSetDevice(7));
    CHECK_OK(aclrtSetDevice(7));
    CHECK_OK(aclrtResetDevice(7));
    CHECK_OK(aclrtResetDevice(7));
    int before = __atomic_load_n(&g_unbalanced_state_events, __ATOMIC_RELAXED);
    CHECK_EQ(aclrtResetDevice(7), ACL_ERROR_RT_CONTEXT_NULL); /* one reset too many */
    CHECK_EQ(aclrtResetDeviceForce(7), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(__atomic_load_n(&g_unbalanced_state_events, __ATOMIC_RELAXED), before);
    CHECK_OK(aclrtRegDeviceStateCallback("unbalanced", NULL, NULL));

    /* after a force reset, neither kind of reset finds anything to release */
    CHECK_OK(aclrtSetDevice(7));
    CHECK_OK(aclrtSetDevice(7));
    CHECK_OK(aclrtResetDeviceForce(7));
    CHECK_EQ(aclrtResetDevice(7), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtResetDeviceForce(7), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    /* the device can be set again afterwards */
    CHECK_OK(aclrtSetDevice(7));
    CHECK_OK(aclrtResetDevice(7));
}

#define RESET_RACERS 4

typedef struct reset_racer {
    pthread_barrier_t *go;
    aclError rc;
} reset_racer;

static void *force_reset_thread(void *arg)
{
    reset_racer *r = arg;
    pthread_barrier_wait(r->go);
    r->rc = aclrtResetDeviceForce(6);
    return NULL;
}

static void *set_device_6_thread(void *arg)
{
    aclError *rc = arg;
    *rc = aclrtSetDevice(6);
    return NULL;
}

/* A second thread's aclrtResetDeviceForce after the first one released the device fails,
 * and of several threads racing to force-reset the same device exactly one succeeds. */
static void test_second_thread_force_reset(void)
{
    aclError set_rc = -1;
    pthread_t th;
    CHECK_OK(pthread_create(&th, NULL, set_device_6_thread, &set_rc));
    pthread_join(th, NULL);
    CHECK_OK(set_rc);
    CHECK_OK(aclrtSetDevice(6));
    CHECK_OK(aclrtResetDeviceForce(6)); /* releases both references */
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 1);
    reset_racer late = {&go, -1};
    CHECK_OK(pthread_create(&th, NULL, force_reset_thread, &late));
    pthread_join(th, NULL);
    pthread_barrier_destroy(&go);
    CHECK_EQ(late.rc, ACL_ERROR_RT_CONTEXT_NULL);

    for (int round = 0; round < 20; round++) {
        CHECK_OK(aclrtSetDevice(6));
        CHECK_OK(aclrtSetDevice(6));
        pthread_barrier_init(&go, NULL, RESET_RACERS);
        reset_racer r[RESET_RACERS];
        pthread_t t[RESET_RACERS];
        for (int i = 0; i < RESET_RACERS; i++) {
            r[i].go = &go;
            r[i].rc = -1;
            CHECK_OK(pthread_create(&t[i], NULL, force_reset_thread, &r[i]));
        }
        int ok = 0, refused = 0;
        for (int i = 0; i < RESET_RACERS; i++) {
            pthread_join(t[i], NULL);
            ok += r[i].rc == ACL_SUCCESS;
            refused += r[i].rc == ACL_ERROR_RT_CONTEXT_NULL;
        }
        pthread_barrier_destroy(&go);
        CHECK_EQ(ok, 1);
        CHECK_EQ(refused, RESET_RACERS - 1);
    }
    CHECK_EQ(aclmockGetStat(6, ACLMOCK_STAT_CONTEXTS), 0);
}

typedef struct thr {
    aclError before;
    int32_t after;
    aclError set_rc;
} thr;

static void *device_thread(void *arg)
{
    thr *t = arg;
    int32_t d = -1;
    t->before = aclrtGetDevice(&d);
    t->set_rc = aclrtSetDevice(6);
    t->after = -1;
    (void)aclrtGetDevice(&t->after);
    (void)aclrtResetDevice(6);
    return NULL;
}

static void test_per_thread_device(void)
{
    CHECK_OK(aclrtSetDevice(4));
    thr t;
    pthread_t th;
    CHECK_OK(pthread_create(&th, NULL, device_thread, &t));
    pthread_join(th, NULL);
    CHECK_EQ(t.before, ACL_ERROR_RT_CONTEXT_NULL); /* the main thread's device is not inherited */
    CHECK_OK(t.set_rc);
    CHECK_EQ(t.after, 6);
    int32_t d = -1;
    CHECK_OK(aclrtGetDevice(&d));
    CHECK_EQ(d, 4); /* unchanged by the other thread */
    CHECK_OK(aclrtResetDevice(4));
}

static void test_queries(void)
{
    const char *soc = aclrtGetSocName();
    CHECK_STR_EQ(soc, "Ascend910B1");
    CHECK_STR_EQ(aclmockGetSocName(), "Ascend910B1");
    aclrtRunMode mode = ACL_DEVICE;
    CHECK_EQ(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtGetRunMode(&mode));
    CHECK_EQ(mode, ACL_HOST);

    int64_t v = 0;
    CHECK_OK(aclGetDeviceCapability(0, ACL_DEVICE_INFO_AI_CORE_NUM, &v));
    CHECK_EQ(v, 24);
    CHECK_OK(aclGetDeviceCapability(7, ACL_DEVICE_INFO_VECTOR_CORE_NUM, &v));
    CHECK_EQ(v, 48);
    CHECK_OK(aclGetDeviceCapability(0, ACL_DEVICE_INFO_L2_SIZE, &v));
    CHECK_EQ(v, 192ll << 20);
    CHECK_EQ(aclGetDeviceCapability(0, ACL_DEVICE_INFO_UNDEFINED, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclGetDeviceCapability(8, ACL_DEVICE_INFO_L2_SIZE, &v), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclGetDeviceCapability(0xFFFFFFFFu, ACL_DEVICE_INFO_L2_SIZE, &v),
             ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclGetDeviceCapability(0, ACL_DEVICE_INFO_L2_SIZE, NULL), ACL_ERROR_INVALID_PARAM);

    CHECK_OK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, &v));
    CHECK_EQ(v, 64ll << 30);
    CHECK_EQ(v, aclmockGetConfig(ACLMOCK_CONFIG_MEM_PER_DEVICE));
    CHECK_OK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, &v));
    CHECK_EQ(v, 24);
    CHECK_OK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_VECTOR_CORE_NUM, &v));
    CHECK_EQ(v, 48);
    CHECK_OK(aclrtGetDeviceInfo(3, ACL_DEV_ATTR_PHY_CHIP_ID, &v));
    CHECK_EQ(v, 3);
    CHECK_OK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_L2_CACHE_SIZE, &v));
    CHECK_EQ(v, 192ll << 20);
    CHECK_EQ(aclrtGetDeviceInfo(0, (aclrtDevAttr)12345, &v), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_WARP_SIZE, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDeviceInfo(9, ACL_DEV_ATTR_WARP_SIZE, &v), ACL_ERROR_RT_INVALID_DEVICEID);

    int32_t cap = -1;
    CHECK_OK(aclrtGetDeviceCapability(0, ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, &cap));
    CHECK_EQ(cap, ACL_DEV_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtGetDeviceCapability(0, (aclrtDevFeatureType)999, &cap), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDeviceCapability(0, ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV, NULL),
             ACL_ERROR_INVALID_PARAM);

    aclrtAtomicOperation ops[2] = {ACL_RT_ATOMIC_OPERATION_INTEGER_ADD, ACL_RT_ATOMIC_OPERATION_CAS};
    uint32_t caps[2] = {7, 7};
    CHECK_OK(aclrtDeviceGetHostAtomicCapabilities(caps, ops, 2, 0));
    CHECK_EQ(caps[0], 0);
    CHECK_EQ(caps[1], 0);
    CHECK_EQ(aclrtDeviceGetHostAtomicCapabilities(caps, ops, 0, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetHostAtomicCapabilities(NULL, ops, 2, 0), ACL_ERROR_INVALID_PARAM);
    ops[1] = (aclrtAtomicOperation)20;
    CHECK_EQ(aclrtDeviceGetHostAtomicCapabilities(caps, ops, 2, 0), ACL_ERROR_INVALID_PARAM);

    aclrtUtilizationInfo u;
    memset(&u, 0x55, sizeof u);
    u.utilizationExtend = NULL;
    CHECK_OK(aclrtGetDeviceUtilizationRate(0, &u));
    CHECK_EQ(u.memoryUtilization, -1);
    CHECK_GE(u.cubeUtilization, 0);
    CHECK_LE(u.cubeUtilization, 100);
    u.utilizationExtend = (aclrtUtilizationExtendInfo *)&u;
    CHECK_EQ(aclrtGetDeviceUtilizationRate(0, &u), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "utilizationExtend");
    CHECK_EQ(aclrtGetDeviceUtilizationRate(0, NULL), ACL_ERROR_INVALID_PARAM);

    aclrtDeviceStatus st = ACL_RT_DEVICE_STATUS_END;
    CHECK_OK(aclrtQueryDeviceStatus(0, &st));
    CHECK_EQ(st, ACL_RT_DEVICE_STATUS_NORMAL);
    CHECK_EQ(aclrtQueryDeviceStatus(0, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtQueryDeviceStatus(8, &st), ACL_ERROR_RT_INVALID_DEVICEID);

    aclrtUuid a, b, a2;
    CHECK_OK(aclrtDeviceGetUuid(0, &a));
    CHECK_OK(aclrtDeviceGetUuid(1, &b));
    CHECK_OK(aclrtDeviceGetUuid(0, &a2));
    CHECK(memcmp(a.bytes, a2.bytes, sizeof a.bytes) == 0);
    CHECK(memcmp(a.bytes, b.bytes, sizeof a.bytes) != 0);
    CHECK_EQ(aclrtDeviceGetUuid(0, NULL), ACL_ERROR_INVALID_PARAM);

    int32_t least = -1, greatest = -1;
    CHECK_OK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK_EQ(least, 7);
    CHECK_EQ(greatest, 0);
    CHECK_EQ(aclrtDeviceGetStreamPriorityRange(NULL, &greatest), ACL_ERROR_INVALID_PARAM);
}

static void test_id_mapping(void)
{
    int32_t out = -1;
    CHECK_OK(aclrtGetLogicDevIdByUserDevId(3, &out));
    CHECK_EQ(out, 3);
    CHECK_OK(aclrtGetPhyDevIdByUserDevId(5, &out));
    CHECK_EQ(out, 5);
    CHECK_OK(aclrtGetUserDevIdByLogicDevId(2, &out));
    CHECK_EQ(out, 2);
    CHECK_OK(aclrtGetUserDevIdByPhyDevId(7, &out));
    CHECK_EQ(out, 7);
    CHECK_OK(aclrtGetLogicDevIdByPhyDevId(6, &out));
    CHECK_EQ(out, 6);
    CHECK_OK(aclrtGetPhyDevIdByLogicDevId(1, &out));
    CHECK_EQ(out, 1);
    CHECK_EQ(aclrtGetLogicDevIdByUserDevId(8, &out), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtGetUserDevIdByPhyDevId(-1, &out), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtGetPhyDevIdByLogicDevId(64, &out), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtGetPhyDevIdByUserDevId(0, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockGetPhysicalDevice(4), 4);
    CHECK_EQ(aclmockGetPhysicalDevice(8), -1);
}

/* Runs this program again in a child process with `var`=`value` in its environment
 * (the mock reads its configuration once, at the first call), executing the child
 * scenario `name` (see main); checks that every check of the child passed. */
static void run_child(const char *name, const char *var, const char *value)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        setenv(var, value, 1);
        setenv("TEST_DEVICE_CHILD", name, 1);
        execl("/proc/self/exe", "test_device", (char *)NULL);
        _exit(127);
    }
    CHECK_GT(pid, 0);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child scenario '%s' (%s=%s) failed\n", name, var, value);
    }
}

static void test_limits_and_timeouts(void)
{
    uint32_t v = 0;
    CHECK_OK(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, 24);
    CHECK_OK(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, 8));
    CHECK_OK(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, 8);
    CHECK_OK(aclrtGetDeviceResLimit(1, ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, 24); /* per device */
    CHECK_EQ(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_VECTOR_CORE, 49), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetDeviceResLimit(0, ACL_RT_DEV_RES_VECTOR_CORE, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetDeviceResLimit(0, (aclrtDevResLimitType)5, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDeviceResLimit(10, ACL_RT_DEV_RES_CUBE_CORE, &v), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtResetDeviceResLimit(0));
    CHECK_OK(aclrtGetDeviceResLimit(0, ACL_RT_DEV_RES_CUBE_CORE, &v));
    CHECK_EQ(v, 24);

    size_t lim = 0;
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 65536));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, &lim));
    CHECK_EQ(lim, 65536);
    CHECK_EQ(aclrtDeviceGetLimit((aclrtDeviceLimit)9, &lim), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, 32 * 1024)); /* back to the default */
    CHECK_OK(aclrtResetDevice(0));
}

/* Doc 12_execution_control.md, the API reference of each function (the mock follows it
 * where other documents disagree: acl_abi.md §1.2 records torch_npu's 547 s, a value
 * torch_npu sets, which the mock used to take for the maximum):
 * aclrtGetOpExecuteTimeout before any set answers the default 1091 s (in ms); a set
 * rounds up to aclrtGetOpTimeOutInterval and clamps to 254 intervals; V2 with 0 means
 * that maximum (the default interval, 4294967 us, is >= 100000 us). */
static void test_op_timeouts(void)
{
    uint64_t interval = 0, actual = 0;
    uint32_t ms = 0;
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms)); /* before any set in this process */
    CHECK_EQ(ms, 1091000);
    CHECK_OK(aclrtGetOpTimeOutInterval(&interval));
    CHECK_EQ(interval, 4294967);
    const uint64_t max = 254 * interval;
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(0, &actual)); /* 0 = the maximum */
    CHECK_EQ(actual, max);
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, max / 1000);
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(1000000000000ull, &actual)); /* above: clamped */
    CHECK_EQ(actual, max);
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(max, &actual));
    CHECK_EQ(actual, max);
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(547000000ull, &actual)); /* torch_npu's value: kept, rounded up */
    CHECK_EQ(actual, 128 * interval);
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(1500, &actual)); /* rounded up to the interval */
    CHECK_EQ(actual, interval);
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, actual / 1000);
    CHECK_OK(aclrtSetOpExecuteTimeOut(10)); /* seconds, same rules */
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, 3 * interval / 1000);
    CHECK_OK(aclrtSetOpExecuteTimeOut(5000)); /* above the maximum */
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, max / 1000);
    CHECK_OK(aclrtSetOpExecuteTimeOutWithMs(250));
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, interval / 1000);
    CHECK_OK(aclrtSetOpExecuteTimeOut(0)); /* 0 = maximum */
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, max / 1000);
    CHECK_EQ(aclrtSetOpExecuteTimeOutV2(1, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetOpExecuteTimeout(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetOpTimeOutInterval(NULL), ACL_ERROR_INVALID_PARAM);
    run_child("small_interval", "ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US", "1000");
}

/* Child: an interval below 100000 us (ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US=1000): V2 with 0
 * means "never" (UINT64_MAX; aclrtGetOpExecuteTimeout saturates at UINT32_MAX ms), and the
 * maximum is 254 ms. */
static void child_small_interval(void)
{
    uint64_t interval = 0, actual = 0;
    uint32_t ms = 0;
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, 1091000); /* the default is not tied to the interval */
    CHECK_OK(aclrtGetOpTimeOutInterval(&interval));
    CHECK_EQ(interval, 1000);
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(0, &actual));
    CHECK(actual == UINT64_MAX);
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, UINT32_MAX);
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(1000000, &actual));
    CHECK_EQ(actual, 254000);
    CHECK_OK(aclrtSetOpExecuteTimeOutV2(1500, &actual));
    CHECK_EQ(actual, 2000);
    CHECK_OK(aclrtSetOpExecuteTimeOut(0));
    CHECK_OK(aclrtGetOpExecuteTimeout(&ms));
    CHECK_EQ(ms, UINT32_MAX);
}

/* aclrtDeviceSetLimit / aclrtDeviceGetLimit: process-wide, usable before any
 * aclrtSetDevice, default values until set. Doc 25-02_Enumerations.md,
 * aclrtDeviceLimit: SIMD printf FIFO default 32768, rounded up to a multiple of 8;
 * SIMD stack rounded up to 16 KiB, values <= 32 KiB give 32768; the SIMT stack size is
 * not supported on Atlas A2/A3 (the default SoC, Ascend910B1). Mock choices: the SIMT
 * divergent-warp stack is rounded up to 16 bytes, the SIMT printf FIFO kept as given. */
static void test_device_limits_per_process(void)
{
    static const size_t defaults[5] = {0 /* not on A2/A3 */, 1024, 32 * 1024, 32 * 1024, 1024 * 1024};
    size_t lim = 0;
    int32_t dev = -1;
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL); /* no device on this thread */
    for (int i = 1; i < 5; i++) {
        lim = 0;
        CHECK_OK(aclrtDeviceGetLimit((aclrtDeviceLimit)i, &lim));
        CHECK_EQ(lim, defaults[i]);
    }
    CHECK_EQ(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, &lim), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "SIMT_STACK_SIZE");
    CHECK_EQ(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, 2048), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, 2000)); /* before aclrtSetDevice */
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, &lim));
    CHECK_EQ(lim, 2000); /* already a multiple of 16 */
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, 1000));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, &lim));
    CHECK_EQ(lim, 1008); /* rounded up to 16 bytes */
    /* SIMD stack: 16 KiB multiples, at least 32 KiB */
    static const size_t simd_stack[][2] = {
        {1, 32768}, {32768, 32768}, {32769, 49152}, {49152, 49152}, {65537, 81920},
    };
    for (size_t i = 0; i < sizeof simd_stack / sizeof simd_stack[0]; i++) {
        CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, simd_stack[i][0]));
        CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, &lim));
        CHECK_EQ(lim, simd_stack[i][1]);
    }
    /* SIMD printf FIFO: multiples of 8 */
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, 1025));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, &lim));
    CHECK_EQ(lim, 1032);
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, 4096));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE, &lim));
    CHECK_EQ(lim, 4096);
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE, 4097));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE, &lim));
    CHECK_EQ(lim, 4097); /* the SIMT FIFO is taken as given */
    CHECK_EQ(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE, SIZE_MAX), ACL_ERROR_INVALID_PARAM);
    /* per process: every device and thread sees the same values */
    CHECK_OK(aclrtSetDevice(3));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, &lim));
    CHECK_EQ(lim, 1008);
    CHECK_OK(aclrtSetDevice(4));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, &lim));
    CHECK_EQ(lim, 1008);
    CHECK_OK(aclrtResetDevice(4));
    CHECK_OK(aclrtResetDevice(3));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE, &lim)); /* outlives the devices */
    CHECK_EQ(lim, 1008);
    /* aclFinalize restores the defaults */
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclFinalize());
    for (int i = 1; i < 5; i++) {
        CHECK_OK(aclrtDeviceGetLimit((aclrtDeviceLimit)i, &lim));
        CHECK_EQ(lim, defaults[i]);
    }
    CHECK_EQ(aclrtDeviceSetLimit((aclrtDeviceLimit)5, 16), ACL_ERROR_INVALID_PARAM);
    run_child("simt_stack", "ASCEND_MOCK_SOC_NAME", "Ascend950");
}

/* Child on a SoC that is not A2/A3 (ASCEND_MOCK_SOC_NAME=Ascend950): the SIMT stack
 * size exists (default 1 KiB, rounded up to 16 bytes). */
static void child_simt_stack(void)
{
    size_t lim = 0;
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, &lim));
    CHECK_EQ(lim, 1024);
    CHECK_OK(aclrtDeviceSetLimit(ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, 1000));
    CHECK_OK(aclrtDeviceGetLimit(ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE, &lim));
    CHECK_EQ(lim, 1008);
}

/* aclrtCheckArchCompatibility: the SoC of this machine (and only it) is compatible. */
static void test_check_arch_compatibility(void)
{
    int32_t can = -1;
    CHECK_OK(aclrtCheckArchCompatibility(aclrtGetSocName(), &can));
    CHECK_EQ(can, 1);
    CHECK_OK(aclrtCheckArchCompatibility("Ascend310P3", &can));
    CHECK_EQ(can, 0);
    CHECK_OK(aclrtCheckArchCompatibility("", &can));
    CHECK_EQ(can, 0);
    CHECK_EQ(aclrtCheckArchCompatibility(NULL, &can), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCheckArchCompatibility("Ascend910B1", NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "canCompatible");
}

/* The cheap start-up queries: PCI bus ids (one per physical device, round trip through
 * aclrtDeviceGetByPCIBusId) and the bare thread-group id (the process id). */
static void test_pci_bus_id_and_tgid(void)
{
    char a[64], b[64];
    CHECK_OK(aclrtDeviceGetPCIBusId(0, a, (int32_t)sizeof a));
    CHECK_OK(aclrtDeviceGetPCIBusId(5, b, (int32_t)sizeof b));
    CHECK_EQ(strlen(a), 12); /* "dddd:bb:dd.f" */
    CHECK(strcmp(a, b) != 0);
    int32_t dev = -1;
    CHECK_OK(aclrtDeviceGetByPCIBusId(b, &dev));
    CHECK_EQ(dev, 5);
    CHECK_OK(aclrtDeviceGetByPCIBusId(a, &dev));
    CHECK_EQ(dev, 0);
    char upper[64];
    snprintf(upper, sizeof upper, "%s", a);
    for (char *p = upper; *p != '\0'; p++) {
        if (*p >= 'a' && *p <= 'f') {
            *p = (char)(*p - 'a' + 'A');
        }
    }
    CHECK_OK(aclrtDeviceGetByPCIBusId(upper, &dev)); /* hex digits in either case */
    CHECK_EQ(dev, 0);
    CHECK_EQ(aclrtDeviceGetByPCIBusId("0000:ff:00.0", &dev), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtDeviceGetByPCIBusId("garbage", &dev), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetByPCIBusId(NULL, &dev), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetByPCIBusId(a, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetPCIBusId(0, a, 12), ACL_ERROR_INVALID_PARAM); /* no room for the NUL */
    CHECK_EQ(aclrtDeviceGetPCIBusId(0, NULL, 64), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceGetPCIBusId(8, a, 64), ACL_ERROR_RT_INVALID_DEVICEID);

    int32_t pid = 0;
    CHECK_OK(aclrtDeviceGetBareTgid(&pid));
    CHECK_EQ(pid, getpid());
    CHECK_EQ(aclrtDeviceGetBareTgid(NULL), ACL_ERROR_INVALID_PARAM);
}

static void test_synchronize(void)
{
    CHECK_EQ(aclrtSynchronizeDevice(), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtSynchronizeDeviceWithTimeout(-2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSynchronizeDeviceWithTimeout(100), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtSetDevice(2));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_OK(aclrtSynchronizeDeviceWithTimeout(-1));
    CHECK_OK(aclrtSynchronizeDeviceWithTimeout(1000));
    CHECK_EQ(aclrtDeviceTaskAbort(2, 36u * 60u * 1000u + 1u), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtDeviceTaskAbort(20, 0), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtDeviceTaskAbort(2, 1000));

    /* abort discards pending work: a task blocked on a value that never comes, and a
     * copy queued behind it that must never run */
    uint64_t *flag = NULL;
    unsigned char *buf = NULL;
    CHECK_OK(aclrtMalloc((void **)&flag, sizeof *flag, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&buf, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(flag, sizeof *flag, 0, sizeof *flag));
    CHECK_OK(aclrtMemset(buf, 64, 0, 64));
    CHECK_OK(aclrtValueWait(flag, 1, ACL_STREAM_WAIT_VALUE_EQ, s));
    CHECK_OK(aclrtMemsetAsync(buf, 64, 0x7f, 64, s));
    aclrtStreamStatus status = ACL_STREAM_STATUS_COMPLETE;
    CHECK_OK(aclrtStreamQuery(s, &status));
    CHECK_EQ(status, ACL_STREAM_STATUS_NOT_READY);
    CHECK_OK(aclrtDeviceTaskAbort(2, 5000));
    CHECK_OK(aclrtSynchronizeStream(s));
    unsigned char host[64];
    memset(host, 1, sizeof host);
    CHECK_OK(aclrtMemcpy(host, sizeof host, buf, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(host[0], 0);  /* the queued memset was discarded */
    CHECK_EQ(host[63], 0);
    CHECK_OK(aclrtMemsetAsync(buf, 64, 0x11, 64, s)); /* the stream stays usable */
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(host, sizeof host, buf, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(host[5], 0x11);
    CHECK_OK(aclrtFree(flag));
    CHECK_OK(aclrtFree(buf));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(2));
}

/* A failed device synchronize records its error like every other entry point:
 * last error (thread level) and a recent message naming the function. */
static void test_synchronize_records_errors(void)
{
    CHECK_OK(aclrtSetDevice(2));
    aclrtStream blocked = NULL, failing = NULL;
    aclrtEvent ev = NULL;
    uint64_t *flag = NULL;
    CHECK_OK(aclrtCreateStream(&blocked));
    CHECK_OK(aclrtCreateStream(&failing));
    CHECK_OK(aclrtSetStreamFailureMode(failing, ACL_STOP_ON_FAILURE));
    CHECK_OK(aclrtCreateEventWithFlag(&ev, ACL_EVENT_SYNC));
    CHECK_OK(aclrtMalloc((void **)&flag, sizeof *flag, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(flag, sizeof *flag, 0, sizeof *flag));
    CHECK_OK(aclrtValueWait(flag, 1, ACL_STREAM_WAIT_VALUE_EQ, blocked));
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    (void)aclGetRecentErrMsg();

    /* timeout: `blocked` cannot finish */
    CHECK_EQ(aclrtSynchronizeDeviceWithTimeout(20), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSynchronizeDeviceWithTimeout");

    /* a failed task: `failing` waits 20 ms for an event `blocked` never reaches */
    CHECK_OK(aclrtRecordEvent(ev, blocked));
    CHECK_OK(aclrtStreamWaitEventWithTimeout(failing, ev, 20));
    CHECK_EQ(aclrtSynchronizeStream(failing), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    (void)aclGetRecentErrMsg();
    CHECK_OK(aclrtValueWrite(flag, 1, 0, NULL)); /* releases `blocked` */
    CHECK_OK(aclrtSynchronizeStream(blocked));
    CHECK_EQ(aclrtSynchronizeDevice(), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSynchronizeDevice");
    CHECK_EQ(aclrtSynchronizeDeviceWithTimeout(1000), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_EVENT_SYNC_TIMEOUT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSynchronizeDeviceWithTimeout");

    CHECK_OK(aclrtStreamAbort(failing));
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_OK(aclrtDestroyEvent(ev));
    CHECK_OK(aclrtFree(flag));
    CHECK_OK(aclrtDestroyStream(failing));
    CHECK_OK(aclrtDestroyStream(blocked));
    CHECK_OK(aclrtResetDevice(2));
}

static int g_state_events[4];
static int g_abort_events[2];
static uint32_t g_state_dev;

static void on_state(int32_t devId, aclrtDeviceState state, void *args)
{
    CHECK(args == g_state_events);
    g_state_dev = devId;
    if ((int)state >= 0 && (int)state < 4) {
        g_state_events[state]++;
    }
}

static int32_t on_abort(int32_t deviceId, aclrtDeviceTaskAbortStage stage, uint32_t timeout, void *args)
{
    (void)deviceId;
    (void)timeout;
    (void)args;
    if ((int)stage >= 0 && (int)stage < 2) {
        g_abort_events[stage]++;
    }
    return 0;
}

static void test_callbacks(void)
{
    CHECK_EQ(aclrtRegDeviceStateCallback(NULL, on_state, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtRegDeviceStateCallback("", on_state, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtRegDeviceStateCallback("t", on_state, g_state_events));
    CHECK_OK(aclrtSetDevice(5));
    CHECK_EQ(g_state_dev, 5);
    CHECK_EQ(g_state_events[ACL_RT_DEVICE_STATE_SET_PRE], 1);
    CHECK_EQ(g_state_events[ACL_RT_DEVICE_STATE_SET_POST], 1);
    CHECK_OK(aclrtResetDevice(5));
    CHECK_EQ(g_state_events[ACL_RT_DEVICE_STATE_RESET_PRE], 1);
    CHECK_EQ(g_state_events[ACL_RT_DEVICE_STATE_RESET_POST], 1);
    CHECK_OK(aclrtRegDeviceStateCallback("t", NULL, NULL)); /* unregister */
    CHECK_OK(aclrtSetDevice(5));
    CHECK_OK(aclrtResetDevice(5));
    CHECK_EQ(g_state_events[ACL_RT_DEVICE_STATE_SET_PRE], 1);

    CHECK_EQ(aclrtSetDeviceTaskAbortCallback(NULL, on_abort, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtSetDeviceTaskAbortCallback("a", on_abort, NULL));
    CHECK_OK(aclrtDeviceTaskAbort(0, 0));
    CHECK_EQ(g_abort_events[ACL_RT_DEVICE_TASK_ABORT_PRE], 1);
    CHECK_EQ(g_abort_events[ACL_RT_DEVICE_TASK_ABORT_POST], 1);
    CHECK_OK(aclrtSetDeviceTaskAbortCallback("a", NULL, NULL));
}

static void test_device_lost(void)
{
    CHECK_EQ(aclmockSetDeviceLost(8, 507010), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclmockSetDeviceLost(1, ACL_ERROR_RT_LOST_HEARTBEAT));
    CHECK_EQ(aclmockGetDeviceLost(1), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_EQ(aclmockGetDeviceLost(0), 0);
    /* every call on the device fails with the sticky code */
    CHECK_EQ(aclrtSetDevice(1), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_EQ(aclrtSetDevice(1), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "lost");
    int64_t v;
    CHECK_EQ(aclrtGetDeviceInfo(1, ACL_DEV_ATTR_WARP_SIZE, &v), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_EQ(aclrtSynchronizeDevice(), ACL_ERROR_RT_LOST_HEARTBEAT);
    aclrtContext ctx;
    CHECK_EQ(aclrtCreateContext(&ctx, 1), ACL_ERROR_RT_LOST_HEARTBEAT);
    aclrtStream s = NULL;
    CHECK_EQ(aclrtCreateStream(&s), ACL_ERROR_RT_LOST_HEARTBEAT);
    aclrtDeviceStatus st;
    CHECK_OK(aclrtQueryDeviceStatus(1, &st));
    CHECK_EQ(st, ACL_RT_DEVICE_STATUS_ABNORMAL);
    /* other devices are fine */
    CHECK_OK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_WARP_SIZE, &v));
    /* reset still releases the device's resources but reports the code */
    CHECK_EQ(aclrtResetDevice(1), ACL_ERROR_RT_LOST_HEARTBEAT);
    CHECK_EQ(aclmockGetStat(1, ACLMOCK_STAT_CONTEXTS), 0);
    /* revive (test convenience) */
    CHECK_OK(aclmockSetDeviceLost(1, 0));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtQueryDeviceStatus(1, &st));
    CHECK_EQ(st, ACL_RT_DEVICE_STATUS_NORMAL);
    CHECK_OK(aclrtResetDevice(1));
}

static void test_stats(void)
{
    CHECK_EQ(aclmockGetStat(0, (aclmockStat)99), -1);
    CHECK_EQ(aclmockGetStat(8, ACLMOCK_STAT_CONTEXTS), -1);
    CHECK_EQ(aclmockGetStat(-2, ACLMOCK_STAT_CONTEXTS), -1);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_PHYSICAL_DEVICE_COUNT), 8);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_VISIBLE_DEVICE_COUNT), 8);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_VISIBLE_INVALID), 0);
    CHECK_EQ(aclmockGetConfig((aclmockConfigKey)77), -1);
}

int main(void)
{
    const char *child = getenv("TEST_DEVICE_CHILD");
    if (child != NULL) { /* a scenario run by run_child: exit code only */
        if (strcmp(child, "small_interval") == 0) {
            child_small_interval();
        } else if (strcmp(child, "simt_stack") == 0) {
            child_simt_stack();
        } else {
            return 2;
        }
        return TEST_FAILED_COUNT() == 0 ? 0 : 1;
    }
    RUN_TEST(test_op_timeouts);
    RUN_TEST(test_count_and_set);
    RUN_TEST(test_refcount);
    RUN_TEST(test_primary_ctx_state_null_flags);
    RUN_TEST(test_unbalanced_reset);
    RUN_TEST(test_second_thread_force_reset);
    RUN_TEST(test_per_thread_device);
    RUN_TEST(test_queries);
    RUN_TEST(test_id_mapping);
    RUN_TEST(test_limits_and_timeouts);
    RUN_TEST(test_device_limits_per_process);
    RUN_TEST(test_check_arch_compatibility);
    RUN_TEST(test_pci_bus_id_and_tgid);
    RUN_TEST(test_synchronize);
    RUN_TEST(test_synchronize_records_errors);
    RUN_TEST(test_callbacks);
    RUN_TEST(test_device_lost);
    RUN_TEST(test_stats);
    return TEST_REPORT();
}
