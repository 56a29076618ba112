/* test_prof.c - libmsprofiler.so: profiling state machine, configs, step info, msproftx,
 * the profile a Start..Stop period writes, op-info subscriptions
 * (acl_next_semantics.md §7.1-7.4). */
#include <fcntl.h>
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

    /* §7.3: UINT64_MAX means failure (the mock returned 0 before: failed before the fix) */
    CHECK(aclprofStr2Id(NULL) == UINT64_MAX);
    uint64_t a = aclprofStr2Id("conv2d"), b = aclprofStr2Id("conv2d"), c = aclprofStr2Id("matmul");
    CHECK(a != UINT64_MAX);
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
        bad += aclprofStr2Id("step") == UINT64_MAX;
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

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, needle) != NULL;
}

/* §7.2: a Start..Stop period is collected and written when the last config stops. */
static void test_profile_written(void)
{
    char path[512], folder[4300], file[4400];
    snprintf(path, sizeof path, "%s/collect", g_dir);
    uint32_t dev0[1] = {0};
    aclprofConfig *c = aclprofCreateConfig(dev0, 1, ACL_AICORE_NONE, NULL, ACL_PROF_TASK_TIME | ACL_PROF_MSPROFTX);
    CHECK(c != NULL);
    CHECK_OK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *d = NULL, *h = NULL;
    CHECK_OK(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMallocHost(&h, 4096));

    CHECK_OK(aclprofInit(path, strlen(path)));
    CHECK_OK(aclprofStart(c));
    CHECK_EQ(aclmockProfIsActive(), 1);
    void *st = aclprofCreateStamp();
    CHECK_OK(aclprofSetStampTraceMessage(st, "forward", 7));
    CHECK_OK(aclprofPush(st));
    CHECK_OK(aclrtMemcpyAsync(d, 4096, h, 4096, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclprofMarkEx("after-h2d", 9, s));
    CHECK_OK(aclrtMemcpyAsync(h, 4096, d, 4096, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclprofPop());
    aclprofDestroyStamp(st);
    CHECK_OK(aclprofStop(c)); /* the last running config: the profile is written */
    CHECK_EQ(aclmockProfIsActive(), 0);
    CHECK_GT(aclmockProfLastOutput(folder, sizeof folder), 0);
    CHECK_STR_CONTAINS(folder, path);
    snprintf(file, sizeof file, "%s/trace.json", folder);
    CHECK(file_contains(file, "\"name\":\"aclrtMemcpyAsync\",\"cat\":\"copy_h2d\""));
    CHECK(file_contains(file, "\"cat\":\"copy_d2h\""));
    CHECK(file_contains(file, "\"name\":\"after-h2d\",\"cat\":\"marker\""));
    CHECK(file_contains(file, "\"name\":\"forward\",\"cat\":\"range\""));
    CHECK(file_contains(file, "\"args\":{\"name\":\"NPU 0"));
    snprintf(file, sizeof file, "%s/kind_summary.csv", folder);
    CHECK(file_contains(file, "copy_h2d,1,"));
    snprintf(file, sizeof file, "%s/summary.json", folder);
    CHECK(file_contains(file, "\"kind\": \"copy_d2h\", \"count\": 1"));
    CHECK_OK(aclprofFinalize());

    /* another collection (the environment switch, a Python profiler) running: §7.1 100042 */
    CHECK_OK(aclmockProfStart(path, ACLMOCK_PROF_ALL_DEVICES, 0));
    CHECK_EQ(aclprofInit(path, strlen(path)), ACL_ERROR_PROF_ALREADY_RUN);
    CHECK_EQ(aclmockProfStart(path, 1, 0), ACL_ERROR_PROF_ALREADY_RUN);
    CHECK_OK(aclmockProfStop(folder, sizeof folder));
    CHECK_EQ(aclmockProfStop(NULL, 0), ACL_ERROR_PROF_NOT_RUN);

    CHECK_OK(aclprofDestroyConfig(c));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFreeHost(h));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
}

static aclError noop_twin(void *p)
{
    (void)p;
    return ACL_SUCCESS;
}

/* §7.4: subscriptions - config, the two styles exclude each other, the records parsed. */
static void test_subscription(void)
{
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    int bad = -1;
    CHECK(aclprofCreateSubscribeConfig(1, ACL_AICORE_NONE, NULL) == NULL);
    CHECK(aclprofCreateSubscribeConfig(2, ACL_AICORE_NONE, &fds[1]) == NULL);
    CHECK(aclprofCreateSubscribeConfig(1, ACL_AICORE_NONE, &bad) == NULL);
    aclprofSubscribeConfig *cfg = aclprofCreateSubscribeConfig(1, ACL_AICORE_NONE, &fds[1]);
    CHECK(cfg != NULL);
    CHECK_EQ(aclprofModelSubscribe(7, NULL), ACL_ERROR_INVALID_PARAM);

    char path[512];
    snprintf(path, sizeof path, "%s/sub", g_dir);
    CHECK_OK(aclprofInit(path, strlen(path)));
    CHECK_EQ(aclprofModelSubscribe(7, cfg), ACL_ERROR_PROF_API_CONFLICT); /* inside Init..Finalize */
    CHECK_OK(aclprofFinalize());

    CHECK_OK(aclprofModelSubscribe(7, cfg));
    CHECK_EQ(aclprofModelSubscribe(7, cfg), ACL_ERROR_PROF_REPEAT_SUBSCRIBE);
    CHECK_EQ(aclprofInit(path, strlen(path)), ACL_ERROR_PROF_API_CONFLICT);

    CHECK_OK(aclrtSetDevice(0));
    void *a = NULL, *b = NULL;
    CHECK_OK(aclrtMalloc(&a, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&b, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    aclmockOpArg args[2] = {{a, 256, ACLMOCK_ACCESS_READ, ACL_FLOAT, 0, {0}}, {b, 256, ACLMOCK_ACCESS_WRITE, ACL_FLOAT, 0, {0}}};
    aclmockOpDesc op = {"MatMul", 1000, args, 2, noop_twin, NULL};
    CHECK_OK(aclmockLaunchOp(&op, NULL));
    op.name = "Add";
    CHECK_OK(aclmockLaunchOp(&op, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclprofModelUnSubscribe(7)); /* flushes and closes the write end */
    CHECK_EQ(aclprofModelUnSubscribe(7), ACL_ERROR_INVALID_MODEL_ID);

    size_t rec = 0;
    CHECK_OK(aclprofGetOpDescSize(&rec));
    CHECK_EQ(rec, sizeof(aclmockOpRecord));
    unsigned char buf[4096];
    size_t got = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + got, sizeof buf - got)) > 0) {
        got += (size_t)r; /* EOF once the runtime closed the write end */
    }
    close(fds[0]);
    CHECK_EQ(got, 2 * rec);
    uint32_t n = 0;
    CHECK_OK(aclprofGetOpNum(buf, got, &n));
    CHECK_EQ(n, 2);
    CHECK_EQ(aclprofGetOpNum(buf, got - 1, &n), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclprofGetOpNum(NULL, got, &n), ACL_ERROR_INVALID_PARAM);
    size_t len = 0;
    CHECK_OK(aclprofGetOpTypeLen(buf, got, 0, &len));
    CHECK_EQ(len, strlen("MatMul") + 1);
    char name[128];
    CHECK_OK(aclprofGetOpType(buf, got, 0, name, sizeof name));
    CHECK_STR_EQ(name, "MatMul");
    CHECK_OK(aclprofGetOpType(buf, got, 1, name, 3)); /* a smaller buffer truncates */
    CHECK_STR_EQ(name, "Ad");
    CHECK_OK(aclprofGetOpName(buf, got, 1, name, sizeof name));
    CHECK_STR_CONTAINS(name, "Add_");
    CHECK_OK(aclprofGetOpNameLen(buf, got, 1, &len));
    CHECK_EQ(len, strlen(name) + 1);
    CHECK_EQ(aclprofGetOpType(buf, got, 2, name, sizeof name), ACL_ERROR_INVALID_PARAM); /* idx in [0, n-1] */
    CHECK_EQ(aclprofGetModelId(buf, got, 1), 7);
    CHECK_EQ(aclprofGetOpFlag(buf, got, 0), ACL_SUBSCRIBE_OP);
    CHECK_EQ(aclprofGetOpFlag(buf, got, 9), ACL_SUBSCRIBE_NONE);
    CHECK_GE(aclprofGetOpEnd(buf, got, 0), aclprofGetOpStart(buf, got, 0));
    CHECK_EQ(aclprofGetOpDuration(buf, got, 0), aclprofGetOpEnd(buf, got, 0) - aclprofGetOpStart(buf, got, 0));
    const char *tid = aclprofGetOpAttriValue(buf, got, 0, ACL_SUBSCRIBE_ATTRI_THREADID);
    CHECK(tid != NULL && tid[0] != '\0');
    CHECK(aclprofGetOpAttriValue(buf, got, 0, ACL_SUBSCRIBE_ATTRI_NONE) == NULL);

    CHECK_OK(aclprofDestroySubscribeConfig(cfg));
    CHECK_EQ(aclprofDestroySubscribeConfig(cfg), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclprofInit(path, strlen(path))); /* no subscription left */
    CHECK_OK(aclprofFinalize());
    CHECK_OK(aclrtFree(a));
    CHECK_OK(aclrtFree(b));
    CHECK_OK(aclrtResetDevice(0));
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
    RUN_TEST(test_profile_written);
    RUN_TEST(test_subscription);
    CHECK_OK(aclFinalize());
    mt_remove_tree(g_dir);
    return TEST_REPORT();
}
