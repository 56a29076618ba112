/* test_context.c - explicit contexts, current context per thread, default streams,
 * garbage handles, cross-thread use, system parameters (mock-core). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static void test_create_destroy(void)
{
    aclrtContext ctx = NULL, cur = NULL;
    CHECK_EQ(aclrtCreateContext(NULL, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCreateContext(&ctx, 8), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtCreateContext(&ctx, -1), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK(ctx == NULL);
    CHECK_EQ(aclrtGetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);

    CHECK_OK(aclrtCreateContext(&ctx, 3));
    CHECK(ctx != NULL);
    CHECK_OK(aclrtGetCurrentContext(&cur));
    CHECK(cur == ctx); /* becomes current */
    int32_t dev = -1;
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 3);
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_GE(aclmockGetStat(3, ACLMOCK_STAT_STREAMS), 1); /* its default stream */

    aclrtStream ds = NULL;
    CHECK_EQ(aclrtCtxGetCurrentDefaultStream(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtCtxGetCurrentDefaultStream(&ds));
    CHECK(ds != NULL);
    /* the default stream is usable as a handle */
    CHECK_OK(aclrtSynchronizeStream(ds));
    CHECK_OK(aclrtSynchronizeStream(NULL));

    /* each context has its own default stream */
    aclrtContext ctx2 = NULL;
    aclrtStream ds2 = NULL;
    CHECK_OK(aclrtCreateContext(&ctx2, 3));
    CHECK_OK(aclrtCtxGetCurrentDefaultStream(&ds2));
    CHECK(ds2 != ds);
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 2);

    /* explicit streams die with their context */
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    int64_t streams_before = aclmockGetStat(3, ACLMOCK_STAT_STREAMS);
    CHECK_OK(aclrtDestroyContext(ctx2));
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_STREAMS), streams_before - 2);
    CHECK_EQ(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL); /* was current */
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtDestroyContext(ctx2), ACL_ERROR_RT_PARAM_INVALID); /* twice */
    CHECK_EQ(aclrtSetCurrentContext(ctx2), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSetCurrentContext(ctx));
    CHECK_OK(aclrtGetCurrentContext(&cur));
    CHECK(cur == ctx);
    CHECK_OK(aclrtDestroyContext(ctx));
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_CONTEXTS), 0);
    CHECK_EQ(aclmockGetStat(3, ACLMOCK_STAT_STREAMS), 0);
    CHECK_EQ(aclrtDestroyContext(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtSetCurrentContext(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCtxGetCurrentDefaultStream(&ds), ACL_ERROR_RT_CONTEXT_NULL);
}

static void test_garbage_handles(void)
{
    int on_stack = 0;
    void *heap = malloc(64);
    memset(heap, 0xAB, 64);
    CHECK_EQ(aclrtDestroyContext((aclrtContext)&on_stack), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSetCurrentContext((aclrtContext)heap), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSetCurrentContext((aclrtContext)(uintptr_t)0x10), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtDestroyContext((aclrtContext)(uintptr_t)0xdeadbeef), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not a live context");
    free(heap);
}

static void test_primary_context(void)
{
    aclrtContext primary = NULL, cur = NULL, mine = NULL;
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtGetCurrentContext(&primary));
    /* the default context cannot be destroyed explicitly */
    CHECK_EQ(aclrtDestroyContext(primary), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtResetDevice");
    /* SetCurrentContext switches the device */
    CHECK_OK(aclrtCreateContext(&mine, 4));
    int32_t dev = -1;
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 4);
    CHECK_OK(aclrtSetCurrentContext(primary));
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 0);
    /* explicit contexts survive aclrtResetDevice of their device */
    CHECK_OK(aclrtResetDevice(0));
    CHECK_EQ(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL); /* primary gone */
    CHECK_EQ(aclrtSetCurrentContext(primary), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSetCurrentContext(mine));
    CHECK_EQ(aclrtResetDevice(4), ACL_ERROR_RT_CONTEXT_NULL); /* not set: refused, context untouched */
    CHECK_OK(aclrtGetCurrentContext(&cur));
    CHECK(cur == mine);
    CHECK_OK(aclrtDestroyContext(mine));
}

typedef struct shared {
    aclrtContext ctx;
    aclError set_rc;
    int32_t dev;
    aclrtContext seen;
    aclError destroy_rc;
} shared;

static void *use_ctx_thread(void *arg)
{
    shared *sh = arg;
    sh->set_rc = aclrtSetCurrentContext(sh->ctx);
    sh->dev = -1;
    (void)aclrtGetDevice(&sh->dev);
    (void)aclrtGetCurrentContext(&sh->seen);
    aclrtStream s = NULL;
    if (aclrtCreateStream(&s) == ACL_SUCCESS) {
        (void)aclrtSynchronizeStream(s);
        (void)aclrtDestroyStream(s);
    }
    return NULL;
}

static void *destroy_ctx_thread(void *arg)
{
    shared *sh = arg;
    sh->destroy_rc = aclrtDestroyContext(sh->ctx);
    return NULL;
}

static void test_other_threads(void)
{
    shared sh;
    memset(&sh, 0, sizeof sh);
    CHECK_OK(aclrtCreateContext(&sh.ctx, 6));
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, use_ctx_thread, &sh));
    pthread_join(t, NULL);
    CHECK_OK(sh.set_rc);
    CHECK_EQ(sh.dev, 6);
    CHECK(sh.seen == sh.ctx);

    /* another thread destroys our current context: we see "no context", not a crash */
    CHECK_OK(pthread_create(&t, NULL, destroy_ctx_thread, &sh));
    pthread_join(t, NULL);
    CHECK_OK(sh.destroy_rc);
    aclrtContext cur = NULL;
    CHECK_EQ(aclrtGetCurrentContext(&cur), ACL_ERROR_RT_CONTEXT_NULL);
    int32_t dev = -1;
    CHECK_EQ(aclrtGetDevice(&dev), ACL_ERROR_RT_CONTEXT_NULL);
    aclrtStream s = NULL;
    CHECK_EQ(aclrtCreateStream(&s), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclmockGetStat(6, ACLMOCK_STAT_CONTEXTS), 0);
}

static void test_sys_params(void)
{
    int64_t v = -1;
    CHECK_EQ(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_EQ(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_ERROR_RT_CONTEXT_NULL);
    aclrtContext a = NULL, b = NULL;
    CHECK_OK(aclrtCreateContext(&a, 0));
    CHECK_EQ(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_ERROR_RT_SYSPARAMOPT_NOT_SET);
    CHECK_OK(aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1));
    CHECK_OK(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v));
    CHECK_EQ(v, 1);
    CHECK_EQ(aclrtCtxSetSysParamOpt((aclSysParamOpt)9, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCtxSetSysParamOpt(ACL_OPT_ENABLE_DEBUG_KERNEL, 2), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, NULL), ACL_ERROR_INVALID_PARAM);
    /* per context */
    CHECK_OK(aclrtCreateContext(&b, 0));
    CHECK_EQ(aclrtCtxGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v), ACL_ERROR_RT_SYSPARAMOPT_NOT_SET);
    CHECK_OK(aclrtDestroyContext(b));
    CHECK_OK(aclrtDestroyContext(a));

    /* process-wide: an option never set reads as 0 (off), successfully */
    for (int opt = ACL_OPT_DETERMINISTIC; opt <= ACL_OPT_ENABLE_KERNEL_EARLY_START; opt++) {
        v = -1;
        CHECK_OK(aclrtGetSysParamOpt((aclSysParamOpt)opt, &v));
        CHECK_EQ(v, 0);
    }
    CHECK_OK(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1));
    CHECK_OK(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, &v));
    CHECK_EQ(v, 1);
    CHECK_OK(aclrtSetSysParamOpt(ACL_OPT_DETERMINISTIC, 0));
    CHECK_OK(aclrtSetSysParamOpt(ACL_OPT_ENABLE_KERNEL_EARLY_START, 0));
    CHECK_OK(aclrtGetSysParamOpt(ACL_OPT_ENABLE_KERNEL_EARLY_START, &v));
    CHECK_EQ(v, 0);
    CHECK_EQ(aclrtSetSysParamOpt((aclSysParamOpt)-1, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetSysParamOpt(ACL_OPT_DETERMINISTIC, NULL), ACL_ERROR_INVALID_PARAM);
}

int main(void)
{
    RUN_TEST(test_create_destroy);
    RUN_TEST(test_garbage_handles);
    RUN_TEST(test_primary_context);
    RUN_TEST(test_other_threads);
    RUN_TEST(test_sys_params);
    CHECK_EQ(aclmockGetStat(ACLMOCK_ALL_DEVICES, ACLMOCK_STAT_CONTEXTS), 0);
    return TEST_REPORT();
}
