/* test_error.c - per-thread last error and recent message, aclmockSetError, fault
 * injection through the aclmock API (mock-core). */
#include <pthread.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static void test_recent_message(void)
{
    /* nothing recorded yet -> NULL */
    CHECK(aclGetRecentErrMsg() == NULL);
    CHECK_EQ(aclrtGetDeviceCount(NULL), ACL_ERROR_INVALID_PARAM);
    const char *m = aclGetRecentErrMsg();
    CHECK_STR_CONTAINS(m, "aclrtGetDeviceCount");
    CHECK_STR_CONTAINS(m, "'count'");
    /* read clears */
    CHECK(aclGetRecentErrMsg() == NULL);
    /* the latest failure wins */
    CHECK_EQ(aclrtSetDevice(-5), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtGetRunMode");
    /* a success does not record anything */
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK(aclGetRecentErrMsg() == NULL);
}

static void test_last_error(void)
{
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    CHECK_EQ(aclrtSetDevice(1000), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    /* success keeps the last error */
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), ACL_SUCCESS);
    /* unknown level */
    CHECK_EQ(aclrtGetLastError((aclrtLastErrLevel)7), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtPeekAtLastError((aclrtLastErrLevel)-1), ACL_ERROR_INVALID_PARAM);
    (void)aclGetRecentErrMsg();
}

typedef struct thread_result {
    aclError peek_before;
    int msg_before_null;
    aclError own_error;
    int own_msg_ok;
} thread_result;

static void *errors_thread(void *arg)
{
    thread_result *r = arg;
    r->peek_before = aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL);
    r->msg_before_null = aclGetRecentErrMsg() == NULL;
    r->own_error = aclrtGetRunMode(NULL);
    const char *m = aclGetRecentErrMsg();
    r->own_msg_ok = m != NULL && strstr(m, "aclrtGetRunMode") != NULL;
    return NULL;
}

static void test_errors_are_per_thread(void)
{
    CHECK_EQ(aclrtSetDevice(-1), ACL_ERROR_RT_INVALID_DEVICEID);
    thread_result r;
    memset(&r, 0, sizeof r);
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, errors_thread, &r));
    pthread_join(t, NULL);
    CHECK_EQ(r.peek_before, ACL_SUCCESS);
    CHECK(r.msg_before_null);
    CHECK_EQ(r.own_error, ACL_ERROR_INVALID_PARAM);
    CHECK(r.own_msg_ok);
    /* the main thread still has its own error, not the thread's */
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtSetDevice");
}

static void test_set_error(void)
{
    CHECK_EQ(aclmockSetError("myFunc", 507899, "custom %d", 42), 507899);
    CHECK_EQ(aclrtPeekAtLastError(ACL_RT_THREAD_LEVEL), 507899);
    CHECK_STR_EQ(aclGetRecentErrMsg(), "myFunc: custom 42");
    CHECK_EQ(aclmockSetError("bare", 1, NULL), 1);
    CHECK_STR_EQ(aclGetRecentErrMsg(), "bare");
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    /* a very long message is truncated, not overflowed */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    CHECK_EQ(aclmockSetError("long", 2, "%s", big), 2);
    const char *m = aclGetRecentErrMsg();
    CHECK(m != NULL && strlen(m) < 2048);
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
}

static void test_fault_injection_api(void)
{
    uint32_t n = 0;
    CHECK_EQ(aclmockInjectFault(NULL, 1, 507899), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockInjectFault("", 1, 507899), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmockInjectFault("aclrtGetDeviceCount", 1, 0), ACL_ERROR_INVALID_PARAM);
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_EQ(aclmockInjectFault(longname, 1, 5), ACL_ERROR_INVALID_PARAM);

    /* the 2nd call fails, once */
    CHECK_OK(aclmockInjectFault("aclrtGetDeviceCount", 2, 507899));
    CHECK_OK(aclrtGetDeviceCount(&n));
    n = 12345;
    CHECK_EQ(aclrtGetDeviceCount(&n), 507899);
    CHECK_EQ(n, 12345); /* no side effect */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "injected fault");
    CHECK_EQ(aclrtGetLastError(ACL_RT_THREAD_LEVEL), 507899);
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(aclmockGetFaultHits("aclrtGetDeviceCount"), 1);
    CHECK_EQ(aclmockGetFaultHits("aclrtSetDevice"), 0);
    CHECK_EQ(aclmockGetFaultHits(NULL), 0);

    /* nth = 0: every call until cleared; other functions unaffected */
    CHECK_OK(aclmockInjectFault("aclrtGetRunMode", 0, 100000));
    aclrtRunMode mode;
    CHECK_EQ(aclrtGetRunMode(&mode), 100000);
    CHECK_EQ(aclrtGetRunMode(&mode), 100000);
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(aclmockGetFaultHits("aclrtGetRunMode"), 2);
    /* re-arming replaces */
    CHECK_OK(aclmockInjectFault("aclrtGetRunMode", 1, 207000));
    CHECK_EQ(aclrtGetRunMode(&mode), 207000);
    CHECK_OK(aclrtGetRunMode(&mode));
    aclmockClearFaults();
    CHECK_OK(aclrtGetRunMode(&mode));
    CHECK_EQ(mode, ACL_HOST);
    CHECK_EQ(aclmockGetFaultHits("aclrtGetRunMode"), 0);

    /* pointer-returning functions return NULL when a fault fires */
    CHECK_OK(aclmockInjectFault("aclrtGetSocName", 1, 507899));
    CHECK(aclrtGetSocName() == NULL);
    CHECK(aclrtGetSocName() != NULL);

    /* the table holds 64 faults */
    char name[32];
    aclError last = ACL_SUCCESS;
    for (int i = 0; i < 70; i++) {
        snprintf(name, sizeof name, "fakeFunc%d", i);
        last = aclmockInjectFault(name, 1, 1);
        if (last != ACL_SUCCESS) {
            break;
        }
    }
    CHECK_EQ(last, ACL_ERROR_INVALID_PARAM);
    aclmockClearFaults();
    (void)aclrtGetLastError(ACL_RT_THREAD_LEVEL);
    (void)aclGetRecentErrMsg();
}

#define FAULT_THREADS 8
#define FAULT_CALLS 200
static int g_fault_failures;

static void *fault_thread(void *arg)
{
    (void)arg;
    uint32_t n;
    for (int i = 0; i < FAULT_CALLS; i++) {
        if (aclrtGetDeviceCount(&n) == 507012) {
            __atomic_fetch_add(&g_fault_failures, 1, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

static void test_fault_injection_threads(void)
{
    /* exactly one of all concurrent calls is the 777th */
    CHECK_OK(aclmockInjectFault("aclrtGetDeviceCount", 777, 507012));
    pthread_t t[FAULT_THREADS];
    for (int i = 0; i < FAULT_THREADS; i++) {
        CHECK_OK(pthread_create(&t[i], NULL, fault_thread, NULL));
    }
    for (int i = 0; i < FAULT_THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    CHECK_EQ(g_fault_failures, 1);
    CHECK_EQ(aclmockGetFaultHits("aclrtGetDeviceCount"), 1);
    aclmockClearFaults();
}

int main(void)
{
    RUN_TEST(test_recent_message);
    RUN_TEST(test_last_error);
    RUN_TEST(test_errors_are_per_thread);
    RUN_TEST(test_set_error);
    RUN_TEST(test_fault_injection_api);
    RUN_TEST(test_fault_injection_threads);
    return TEST_REPORT();
}
