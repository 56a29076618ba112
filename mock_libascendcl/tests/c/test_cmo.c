/* test_cmo.c - cache maintenance (aclrtCmo*, aclrtDeviceL2CacheFlush): argument checks,
 * per-SoC support, stream order (acl_next_semantics.md section 5.3). */
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "mock_test.h"

/* section 5.3: aclrtCmoAsync - device memory of this device only, PREFETCH only; A2 */
static void test_cmo_async(void)
{
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *dev = NULL, *other = NULL;
    CHECK_OK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtCmoAsync(dev, 4096, ACL_RT_CMO_TYPE_PREFETCH, s));
    CHECK_OK(aclrtCmoAsync((char *)dev + 100, 100, ACL_RT_CMO_TYPE_PREFETCH, NULL)); /* default stream */
    /* other types are not supported, values outside the enum are invalid */
    CHECK_EQ(aclrtCmoAsync(dev, 64, ACL_RT_CMO_TYPE_WRITEBACK, s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtCmoAsync(dev, 64, ACL_RT_CMO_TYPE_FLUSH, s), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "only ACL_RT_CMO_TYPE_PREFETCH");
    CHECK_EQ(aclrtCmoAsync(dev, 64, (aclrtCmoType)9, s), ACL_ERROR_INVALID_PARAM);
    /* the range: device memory, inside its allocation, not empty */
    CHECK_EQ(aclrtCmoAsync(dev, 0, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCmoAsync(NULL, 64, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_INVALID_PARAM);
    size_t usable = 4096 + 32; /* aclrtMalloc's rounding (+32) */
    CHECK_EQ(aclrtCmoAsync(dev, usable + 1, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "overrun");
    char host[64];
    CHECK_EQ(aclrtCmoAsync(host, 64, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "is not device memory");
    void *pinned = NULL;
    CHECK_OK(aclrtMallocHost(&pinned, 64));
    CHECK_EQ(aclrtCmoAsync(pinned, 64, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFreeHost(pinned));
    /* memory of another device than the stream's */
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtMalloc(&other, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_EQ(aclrtCmoAsync(other, 64, ACL_RT_CMO_TYPE_PREFETCH, s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "memory of device 1");
    /* stream order: an event recorded after the prefetch completes with it */
    aclrtEvent ev = NULL;
    CHECK_OK(aclrtCreateEvent(&ev));
    CHECK_OK(aclrtCmoAsync(dev, 64, ACL_RT_CMO_TYPE_PREFETCH, s));
    CHECK_OK(aclrtRecordEvent(ev, s));
    CHECK_OK(aclrtSynchronizeEvent(ev));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtDestroyEvent(ev));
    int junk = 0;
    CHECK_EQ(aclrtCmoAsync(dev, 64, ACL_RT_CMO_TYPE_PREFETCH, (aclrtStream)&junk), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtFree(other));
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtDestroyStream(s));
}

/* section 5.3: GetDescSize -> SetDesc (device memory the user allocates) -> AsyncWithDesc */
static void test_cmo_desc(void)
{
    size_t dsize = 0;
    CHECK_OK(aclrtCmoGetDescSize(&dsize));
    CHECK_GT(dsize, 0);
    CHECK_EQ(aclrtCmoGetDescSize(NULL), ACL_ERROR_INVALID_PARAM);
    void *desc = NULL, *dev = NULL;
    CHECK_OK(aclrtMalloc(&desc, dsize, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&dev, 1024, ACL_MEM_MALLOC_HUGE_FIRST));
    /* a descriptor that was never set */
    CHECK_EQ(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_PREFETCH, NULL, NULL), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not filled by aclrtCmoSetDesc");
    CHECK_OK(aclrtCmoSetDesc(desc, dev, 1024));
    CHECK_OK(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_PREFETCH, NULL, NULL));
    CHECK_EQ(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_INVALID, NULL, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    int reserve = 0;
    CHECK_EQ(aclrtCmoAsyncWithDesc(desc, ACL_RT_CMO_TYPE_PREFETCH, NULL, &reserve), ACL_ERROR_INVALID_PARAM);
    /* descriptors live in device memory */
    char host[64];
    CHECK_EQ(aclrtCmoSetDesc(host, dev, 1024), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCmoSetDesc(desc, host, 64), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtCmoSetDesc(desc, dev, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtSynchronizeDevice());
    CHECK_OK(aclrtFree(desc));
    CHECK_OK(aclrtFree(dev));
}

static void test_l2_flush(void)
{
    CHECK_OK(aclrtDeviceL2CacheFlush(NULL));
    int rsv = 0;
    CHECK_EQ(aclrtDeviceL2CacheFlush(&rsv), ACL_ERROR_INVALID_PARAM);
}

/* The barrier forms are 310B only. */
static void test_barrier_not_on_a2(void)
{
    void *dev = NULL;
    CHECK_OK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtCmoAsyncWithBarrier(dev, 64, ACL_RT_CMO_TYPE_INVALID, 1, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "Ascend910B1");
    aclrtBarrierTaskInfo info;
    memset(&info, 0, sizeof info);
    CHECK_EQ(aclrtCmoWaitBarrier(&info, NULL, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtFree(dev));
}

/* Child (Ascend310B1): the barrier forms; no prefetch there. */
static void child_310b(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    void *dev = NULL;
    CHECK_OK(aclrtMalloc(&dev, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_EQ(aclrtCmoAsync(dev, 64, ACL_RT_CMO_TYPE_PREFETCH, NULL), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    size_t dsize = 0;
    CHECK_EQ(aclrtCmoGetDescSize(&dsize), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    /* the stream must be bound to a model: a persistent stream in the mock */
    aclrtStream plain = NULL, model = NULL;
    CHECK_OK(aclrtCreateStream(&plain));
    CHECK_OK(aclrtCreateStreamWithConfig(&model, 0, ACL_STREAM_PERSISTENT));
    CHECK_EQ(aclrtCmoAsyncWithBarrier(dev, 64, ACL_RT_CMO_TYPE_INVALID, 1, plain), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "bound to a model");
    CHECK_OK(aclrtCmoAsyncWithBarrier(dev, 64, ACL_RT_CMO_TYPE_INVALID, 1, model));
    CHECK_OK(aclrtCmoAsyncWithBarrier(dev, 64, ACL_RT_CMO_TYPE_FLUSH, 0, model));
    /* barrierId > 0 only with INVALID */
    CHECK_EQ(aclrtCmoAsyncWithBarrier(dev, 64, ACL_RT_CMO_TYPE_FLUSH, 2, model), ACL_ERROR_INVALID_PARAM);
    aclrtBarrierTaskInfo info;
    memset(&info, 0, sizeof info);
    info.barrierNum = 2;
    info.cmoInfo[0].cmoType = ACL_RT_CMO_TYPE_INVALID;
    info.cmoInfo[0].barrierId = 1;
    info.cmoInfo[1].cmoType = ACL_RT_CMO_TYPE_INVALID;
    info.cmoInfo[1].barrierId = 2;
    CHECK_OK(aclrtCmoWaitBarrier(&info, model, 0));
    CHECK_EQ(aclrtCmoWaitBarrier(&info, model, 1), ACL_ERROR_INVALID_PARAM);   /* flag */
    CHECK_EQ(aclrtCmoWaitBarrier(&info, plain, 0), ACL_ERROR_RT_PARAM_INVALID); /* not a model stream */
    info.cmoInfo[1].cmoType = ACL_RT_CMO_TYPE_FLUSH;                            /* INVALID only */
    CHECK_EQ(aclrtCmoWaitBarrier(&info, model, 0), ACL_ERROR_INVALID_PARAM);
    info.cmoInfo[1].cmoType = ACL_RT_CMO_TYPE_INVALID;
    info.barrierNum = ACL_RT_CMO_MAX_BARRIER_NUM + 1;
    CHECK_EQ(aclrtCmoWaitBarrier(&info, model, 0), ACL_ERROR_INVALID_PARAM);
    info.barrierNum = 0;
    CHECK_EQ(aclrtCmoWaitBarrier(&info, model, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCmoWaitBarrier(NULL, model, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDestroyStream(plain));
    CHECK_OK(aclrtDestroyStream(model));
    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

int main(void)
{
    const char *child = mt_child_scenario();
    if (child != NULL) {
        if (strcmp(child, "310b") == 0) {
            RUN_TEST(child_310b);
        }
        return TEST_REPORT();
    }
    mt_mock_env((const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclrtDeviceL2CacheFlush(NULL), ACL_ERROR_RT_CONTEXT_NULL); /* needs a context */
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_cmo_async);
    RUN_TEST(test_cmo_desc);
    RUN_TEST(test_l2_flush);
    RUN_TEST(test_barrier_not_on_a2);
    CHECK(mt_run_child("310b", "ASCEND_MOCK_SOC_NAME", "Ascend310B1"));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
