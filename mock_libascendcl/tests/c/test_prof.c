/* test_prof.c - libmsprofiler.so: profiling state machine, configs, step info, msproftx. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_prof.h"
#include "mock_test.h"

static char g_dir[256];

static void test_init_finalize(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/out/nested", g_dir);
    CHECK_EQ(aclprofFinalize(), ACL_ERROR_PROF_NOT_RUN);
    CHECK_EQ(aclprofInit(NULL, 4), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofInit(path, 0), ACL_ERROR_INVALID_PARAM);
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclprofInit(path, 4097), ACL_ERROR_INVALID_PARAM); /* bad path length */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclprofInit");
    CHECK_EQ(aclprofInit("", 1), ACL_ERROR_INVALID_PARAM);
    /* a path that cannot be a directory */
    char file[512];
    snprintf(file, sizeof file, "%s/plain", g_dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK_EQ(aclprofInit(file, strlen(file)), ACL_ERROR_INVALID_PARAM);

    CHECK_OK(aclprofInit(path, strlen(path)));
    struct stat st;
    CHECK_EQ(stat(path, &st), 0); /* created like the real profiler does */
    CHECK(S_ISDIR(st.st_mode));
    CHECK_EQ(aclprofInit(path, strlen(path)), ACL_ERROR_REPEAT_INITIALIZE);
    CHECK_OK(aclprofFinalize());
    CHECK_EQ(aclprofFinalize(), ACL_ERROR_PROF_NOT_RUN);
}

static void test_configs_and_start_stop(void)
{
    uint32_t devs[2] = {0, 1};
    uint32_t other[1] = {2};
    uint32_t dup[2] = {1, 1};
    uint32_t bad[1] = {64};
    uint64_t types = ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_MSPROFTX;

    CHECK(aclprofCreateConfig(NULL, 2, ACL_AICORE_NONE, NULL, types) == NULL);
    CHECK(aclprofCreateConfig(dup, 2, ACL_AICORE_NONE, NULL, types) == NULL);
    (void)aclGetRecentErrMsg();
    CHECK(aclprofCreateConfig(bad, 1, ACL_AICORE_NONE, NULL, types) == NULL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "deviceIdList[0]");
    CHECK(aclprofCreateConfig(devs, 2, (aclprofAicoreMetrics)9, NULL, types) == NULL);
    CHECK(aclprofCreateConfig(devs, 2, ACL_AICORE_NONE, (const aclprofAicoreEvents *)devs, types) == NULL);
    CHECK(aclprofCreateConfig(devs, 2, ACL_AICORE_NONE, NULL, 1ull << 50) == NULL);

    aclprofConfig *c1 = aclprofCreateConfig(devs, 2, ACL_AICORE_PIPE_UTILIZATION, NULL, types);
    aclprofConfig *c2 = aclprofCreateConfig(other, 1, ACL_AICORE_NONE, NULL, ACL_PROF_TASK_TIME);
    aclprofConfig *c3 = aclprofCreateConfig(devs + 1, 1, ACL_AICORE_NONE, NULL, ACL_PROF_TASK_TIME);
    aclprofConfig *host = aclprofCreateConfig(NULL, 0, ACL_AICORE_NONE, NULL, ACL_PROF_ACL_API);
    CHECK(c1 != NULL && c2 != NULL && c3 != NULL && host != NULL);

    CHECK_EQ(aclprofStart(c1), ACL_ERROR_PROF_NOT_RUN); /* before init */
    CHECK_EQ(aclprofStop(c1), ACL_ERROR_PROF_NOT_RUN);
    char path[512];
    snprintf(path, sizeof path, "%s/prof", g_dir);
    CHECK_OK(aclprofInit(path, strlen(path)));
    CHECK_EQ(aclprofStart(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofStart(c1));
    CHECK_EQ(aclprofStart(c1), ACL_ERROR_PROF_ALREADY_RUN);
    CHECK_EQ(aclprofStart(c3), ACL_ERROR_PROF_ALREADY_RUN); /* device 1 is busy */
    CHECK_OK(aclprofStart(c2));
    CHECK_OK(aclprofStart(host));
    CHECK_EQ(aclprofStop(c3), ACL_ERROR_PROF_NOT_RUN);
    CHECK_OK(aclprofStop(c1));
    CHECK_EQ(aclprofStop(c1), ACL_ERROR_PROF_NOT_RUN);
    CHECK_OK(aclprofStart(c3));
    CHECK_OK(aclprofStop(c3));
    CHECK_OK(aclprofStop(host));
    /* finalize stops c2 */
    CHECK_OK(aclprofFinalize());
    CHECK_OK(aclprofInit(path, strlen(path)));
    CHECK_OK(aclprofStart(c2));
    CHECK_OK(aclprofStop(c2));
    CHECK_OK(aclprofFinalize());

    CHECK_OK(aclprofDestroyConfig(c1));
    CHECK_EQ(aclprofDestroyConfig(c1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofDestroyConfig(NULL), ACL_ERROR_INVALID_PARAM);
    uint64_t junk[8] = {0};
    CHECK_EQ(aclprofDestroyConfig((const aclprofConfig *)junk), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofStart((const aclprofConfig *)junk), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofDestroyConfig(c2));
    CHECK_OK(aclprofDestroyConfig(c3));
    CHECK_OK(aclprofDestroyConfig(host));
}

static void test_set_config(void)
{
    CHECK_EQ(aclprofSetConfig(ACL_PROF_ARGS_MIN, "1", 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofSetConfig(ACL_PROF_ARGS_MAX, "1", 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofSetConfig((aclprofConfigType)2, "1", 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofSetConfig(ACL_PROF_STORAGE_LIMIT, NULL, 1), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofSetConfig(ACL_PROF_STORAGE_LIMIT, "200MB", 0), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofSetConfig(ACL_PROF_STORAGE_LIMIT, "200MB", 5));
    CHECK_OK(aclprofSetConfig(ACL_PROF_SYS_HARDWARE_MEM_FREQ, "50", 2));
}

static void test_step_info(void)
{
    aclprofStepInfo *si = aclprofCreateStepInfo();
    CHECK(si != NULL);
    CHECK_EQ(aclprofGetStepTimestamp(si, ACL_STEP_START, NULL), ACL_ERROR_RT_CONTEXT_NULL); /* no context */
    CHECK_OK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclprofGetStepTimestamp(si, ACL_STEP_START, s));
    CHECK_OK(aclprofGetStepTimestamp(si, ACL_STEP_END, NULL));
    CHECK_EQ(aclprofGetStepTimestamp(si, (aclprofStepTag)2, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofGetStepTimestamp(NULL, ACL_STEP_START, s), ACL_ERROR_INVALID_PARAM);
    uint64_t junk[8] = {0};
    CHECK_NE(aclprofGetStepTimestamp(si, ACL_STEP_START, (aclrtStream)junk), ACL_SUCCESS);
    CHECK_EQ(aclprofGetStepTimestamp((aclprofStepInfo *)junk, ACL_STEP_START, s), ACL_ERROR_INVALID_PARAM);
    aclprofDestroyStepInfo(si);
    (void)aclGetRecentErrMsg();
    aclprofDestroyStepInfo(si); /* double destroy: recorded, no crash */
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclprofDestroyStepInfo");
    aclprofDestroyStepInfo(NULL);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
}

static void test_msproftx(void)
{
    void *st = aclprofCreateStamp();
    CHECK(st != NULL);
    CHECK_EQ(aclprofSetStampTraceMessage(st, NULL, 3), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofSetStampTraceMessage(st, "abc", 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofSetStampTraceMessage(st, "abc", 129), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofSetStampTraceMessage(NULL, "abc", 3), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofSetStampTraceMessage(st, "abc", 3));
    CHECK_OK(aclprofMark(st));
    CHECK_EQ(aclprofMark(NULL), ACL_ERROR_INVALID_PARAM);

    CHECK_EQ(aclprofPop(), ACL_ERROR_INVALID_PARAM); /* nothing pushed */
    CHECK_OK(aclprofPush(st));
    CHECK_OK(aclprofPush(st));
    CHECK_OK(aclprofPop());
    CHECK_OK(aclprofPop());
    CHECK_EQ(aclprofPop(), ACL_ERROR_INVALID_PARAM);

    uint32_t r1 = 0, r2 = 0;
    CHECK_EQ(aclprofRangeStart(st, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofRangeStart(st, &r1));
    CHECK_OK(aclprofRangeStart(st, &r2));
    CHECK_NE(r1, r2);
    CHECK_OK(aclprofRangeStop(r1));
    CHECK_EQ(aclprofRangeStop(r1), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofRangeStop(r2));

    aclprofTensorInfo ti;
    memset(&ti, 0, sizeof ti);
    aclprofEventAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.version = ACL_PROF_EVENT_ATTR_VERSION;
    attr.size = sizeof attr;
    attr.messageType = ACL_PROF_MESSAGE_TYPE_TENSOR_INFO;
    attr.message.tensorInfo = &ti;
    CHECK_EQ(aclprofRangePop(), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofRangePushEx(&attr));
    CHECK_OK(aclprofRangePop());
    CHECK_EQ(aclprofRangePushEx(NULL), ACL_ERROR_INVALID_PARAM);
    attr.version = 7;
    CHECK_EQ(aclprofRangePushEx(&attr), ACL_ERROR_INVALID_PARAM);
    attr.version = ACL_PROF_EVENT_ATTR_VERSION;
    attr.size = 3;
    CHECK_EQ(aclprofRangePushEx(&attr), ACL_ERROR_INVALID_PARAM);
    attr.size = sizeof attr;
    attr.message.tensorInfo = NULL;
    CHECK_EQ(aclprofRangePushEx(&attr), ACL_ERROR_INVALID_PARAM);

    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclprofMarkEx("hello", 5, NULL));
    CHECK_EQ(aclprofMarkEx(NULL, 5, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofMarkEx("hello", 0, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtResetDevice(0));

    aclprofDestroyStamp(st);
    CHECK_EQ(aclprofMark(st), ACL_ERROR_INVALID_PARAM); /* destroyed */
    aclprofDestroyStamp(st);
    aclprofDestroyStamp(NULL);

    CHECK_EQ(aclprofStr2Id(NULL), 0);
    uint64_t a = aclprofStr2Id("conv2d"), b = aclprofStr2Id("conv2d"), c = aclprofStr2Id("matmul");
    CHECK_NE(a, 0);
    CHECK_EQ(a, b);
    CHECK_NE(a, c);
}

/* msproftx from several threads at once (per-thread push/range stacks, shared range ids). */
static void *tx_worker(void *arg)
{
    (void)arg;
    uintptr_t bad = 0;
    for (int i = 0; i < 300; i++) {
        void *st = aclprofCreateStamp();
        uint32_t id = 0;
        bad += st == NULL;
        bad += aclprofSetStampTraceMessage(st, "step", 4) != ACL_SUCCESS;
        bad += aclprofPush(st) != ACL_SUCCESS;
        bad += aclprofRangeStart(st, &id) != ACL_SUCCESS;
        bad += aclprofMark(st) != ACL_SUCCESS;
        bad += aclprofRangeStop(id) != ACL_SUCCESS;
        bad += aclprofPop() != ACL_SUCCESS;
        bad += aclprofStr2Id("step") == 0;
        aclprofDestroyStamp(st);
    }
    bad += aclprofPop() != ACL_ERROR_INVALID_PARAM; /* this thread's stack is empty */
    return (void *)bad;
}

static void test_msproftx_threads(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK_EQ(pthread_create(&t[i], NULL, tx_worker, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
}

static void test_unsupported_exported(void)
{
    CHECK(aclprofCreateSubscribeConfig(1, ACL_AICORE_NONE, NULL) == NULL);
    CHECK_EQ(aclprofModelUnSubscribe(1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
}

int main(void)
{
    if (mt_make_tmpdir(g_dir, sizeof g_dir, "prof") != 0) {
        return 1;
    }
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_init_finalize);
    RUN_TEST(test_configs_and_start_stop);
    RUN_TEST(test_set_config);
    RUN_TEST(test_step_info);
    RUN_TEST(test_msproftx);
    RUN_TEST(test_msproftx_threads);
    RUN_TEST(test_unsupported_exported);
    CHECK_OK(aclFinalize());
    mt_remove_tree(g_dir);
    return TEST_REPORT();
}
