/* test_exception.c - exception-info callbacks, accessors, aclrtGetThreadLastTaskId. */
/* aclrtSetExceptionInfoCallback is deprecated but still used (torch_npu): tested on purpose */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <pthread.h>
#include <stdint.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_calls_a, g_calls_b;
static uint32_t g_dev, g_stream_id, g_task, g_code, g_tid;

static void cb_a(aclrtExceptionInfo *info)
{
    pthread_mutex_lock(&g_mu);
    g_calls_a++;
    g_dev = aclrtGetDeviceIdFromExceptionInfo(info);
    g_stream_id = aclrtGetStreamIdFromExceptionInfo(info);
    g_task = aclrtGetTaskIdFromExceptionInfo(info);
    g_code = aclrtGetErrorCodeFromExceptionInfo(info);
    g_tid = aclrtGetThreadIdFromExceptionInfo(info);
    pthread_mutex_unlock(&g_mu);
}

static void cb_b(aclrtExceptionInfo *info)
{
    (void)info;
    pthread_mutex_lock(&g_mu);
    g_calls_b++;
    pthread_mutex_unlock(&g_mu);
}

static void test_accessors_null_and_garbage(void)
{
    CHECK_EQ(aclrtGetTaskIdFromExceptionInfo(NULL), 0xFFFFFFFFu);
    CHECK_EQ(aclrtGetStreamIdFromExceptionInfo(NULL), 0xFFFFFFFFu);
    CHECK_EQ(aclrtGetThreadIdFromExceptionInfo(NULL), 0xFFFFFFFFu);
    CHECK_EQ(aclrtGetDeviceIdFromExceptionInfo(NULL), 0xFFFFFFFFu);
    CHECK_EQ(aclrtGetErrorCodeFromExceptionInfo(NULL), 0xFFFFFFFFu);
    uint64_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const aclrtExceptionInfo *g = (const aclrtExceptionInfo *)(void *)junk;
    CHECK_EQ(aclrtGetTaskIdFromExceptionInfo(g), 0xFFFFFFFFu);
    CHECK_EQ(aclrtGetErrorCodeFromExceptionInfo(g), 0xFFFFFFFFu);
}

static void test_register_unregister(void)
{
    CHECK_EQ(aclrtExceptionInfoCallbackRegister(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtExceptionInfoCallbackUnregister(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtExceptionInfoCallbackUnregister(cb_a), ACL_ERROR_INVALID_PARAM); /* not registered */
    CHECK_OK(aclrtExceptionInfoCallbackRegister(cb_a));
    CHECK_EQ(aclrtExceptionInfoCallbackRegister(cb_a), ACL_ERROR_INVALID_PARAM);   /* twice */
    CHECK_OK(aclrtExceptionInfoCallbackUnregister(cb_a));
    CHECK_OK(aclrtSetExceptionInfoCallback(cb_b));
    CHECK_OK(aclrtSetExceptionInfoCallback(NULL)); /* NULL clears the deprecated slot */
}

/* A task that fails on its stream (aclrtValueWait on memory freed while the
 * stream waits) reaches every registered callback with the right info. */
static void test_callbacks_on_task_failure(void)
{
    CHECK_OK(aclrtSetDevice(1));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    int32_t sid = -1;
    CHECK_OK(aclrtStreamGetId(s, &sid));
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(p, 64, 0, 64));

    CHECK_OK(aclrtExceptionInfoCallbackRegister(cb_a));
    CHECK_OK(aclrtSetExceptionInfoCallback(cb_b));
    CHECK_OK(aclrtValueWait(p, 1, ACL_STREAM_WAIT_VALUE_EQ, s));
    uint32_t last = 0;
    CHECK_OK(aclrtGetThreadLastTaskId(&last));
    CHECK_OK(aclrtFree(p)); /* the waiting task fails */
    CHECK_NE(aclrtSynchronizeStream(s), ACL_SUCCESS);

    pthread_mutex_lock(&g_mu);
    CHECK_EQ(g_calls_a, 1);
    CHECK_EQ(g_calls_b, 1);
    CHECK_EQ(g_dev, 1);
    CHECK_EQ(g_stream_id, (uint32_t)sid);
    CHECK_EQ(g_task, last);
    CHECK_EQ(g_code, ACL_ERROR_RT_PARAM_INVALID);
    CHECK_NE(g_tid, 0xFFFFFFFFu);
    pthread_mutex_unlock(&g_mu);

    CHECK_OK(aclrtExceptionInfoCallbackUnregister(cb_a));
    CHECK_OK(aclrtSetExceptionInfoCallback(NULL));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(1));
}

static void *fresh_thread(void *arg)
{
    uint32_t *out = (uint32_t *)arg;
    *out = 12345;
    (void)aclrtGetThreadLastTaskId(out);
    return NULL;
}

static void test_last_task_id(void)
{
    CHECK_EQ(aclrtGetThreadLastTaskId(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    uint32_t a = 0, b = 0;
    CHECK_OK(aclrtMemsetAsync(p, 64, 1, 64, s));
    CHECK_OK(aclrtGetThreadLastTaskId(&a));
    CHECK_OK(aclrtMemsetAsync(p, 64, 2, 64, s));
    CHECK_OK(aclrtGetThreadLastTaskId(&b));
    CHECK_GT(b, a);
    CHECK_OK(aclrtSynchronizeStream(s));
    /* a thread that never submitted anything reports 0 */
    pthread_t t;
    uint32_t other = 99;
    CHECK_EQ(pthread_create(&t, NULL, fresh_thread, &other), 0);
    pthread_join(t, NULL);
    CHECK_EQ(other, 0);
    CHECK_OK(aclrtFree(p));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_accessors_null_and_garbage);
    RUN_TEST(test_register_unregister);
    RUN_TEST(test_callbacks_on_task_failure);
    RUN_TEST(test_last_task_id);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
