/* test_other.c - aclAppLog, aclrtReduceAsync, aclrtCacheLastTask*, aclrtProfTrace. */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

/* ------------------------------------------------------------- aclAppLog */

static char g_captured[8192];

/* Runs aclAppLog calls with stderr redirected to a file and returns the text. */
#define CAPTURE(stmts)                                                      \
    do {                                                                    \
        char tmpl[] = "/tmp/mock_applog_XXXXXX";                            \
        int fd = mkstemp(tmpl);                                             \
        fflush(stderr);                                                     \
        int saved = dup(2);                                                 \
        dup2(fd, 2);                                                        \
        stmts;                                                              \
        fflush(stderr);                                                     \
        dup2(saved, 2);                                                     \
        close(saved);                                                       \
        lseek(fd, 0, SEEK_SET);                                             \
        ssize_t n = read(fd, g_captured, sizeof g_captured - 1);            \
        g_captured[n > 0 ? n : 0] = '\0';                                   \
        close(fd);                                                          \
        unlink(tmpl);                                                       \
    } while (0)

static void test_app_log(void)
{
    unsetenv("ASCEND_SLOG_PRINT_TO_STDOUT");
    unsetenv("ASCEND_GLOBAL_LOG_LEVEL");
    CAPTURE(aclAppLog(ACL_ERROR, "fn", "dir/file.c", 12, "dropped %d", 1));
    CHECK_STR_EQ(g_captured, ""); /* no console logging requested */

    setenv("ASCEND_SLOG_PRINT_TO_STDOUT", "1", 1);
    CAPTURE(aclAppLog(ACL_ERROR, "myfunc", "/src/dir/file.c", 42, "value=%d name=%s", 7, "x"));
    CHECK_STR_CONTAINS(g_captured, "[ERROR]");
    CHECK_STR_CONTAINS(g_captured, "[file.c:42]");
    CHECK_STR_CONTAINS(g_captured, "myfunc: value=7 name=x");
    CAPTURE(aclAppLog(ACL_INFO, "f", "f.c", 1, "info is below the default level"));
    CHECK_STR_EQ(g_captured, "");

    setenv("ASCEND_GLOBAL_LOG_LEVEL", "0", 1);
    CAPTURE(aclAppLog(ACL_DEBUG, "f", "f.c", 1, "debug shown"));
    CHECK_STR_CONTAINS(g_captured, "[DEBUG]");
    CHECK_STR_CONTAINS(g_captured, "debug shown");
    CAPTURE(aclAppLog(ACL_WARNING, NULL, NULL, 0, "no func"));
    CHECK_STR_CONTAINS(g_captured, "[WARNING]");
    CHECK_STR_CONTAINS(g_captured, "[?:0]");
    CHECK_STR_CONTAINS(g_captured, "?: no func");
    /* never crashes */
    CAPTURE(aclAppLog(ACL_ERROR, "f", "f.c", 1, NULL));
    CHECK_STR_EQ(g_captured, "");
    CAPTURE(aclAppLog((aclLogLevel)17, "f", "f.c", 1, "bad level"));
    CHECK_STR_EQ(g_captured, "");
    char longmsg[5000];
    memset(longmsg, 'a', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    CAPTURE(aclAppLog(ACL_ERROR, "f", "f.c", 1, "%s", longmsg));
    CHECK_STR_CONTAINS(g_captured, "aaaa");

    setenv("ASCEND_GLOBAL_LOG_LEVEL", "4", 1); /* null: nothing */
    CAPTURE(aclAppLog(ACL_ERROR, "f", "f.c", 1, "silent"));
    CHECK_STR_EQ(g_captured, "");
    setenv("ASCEND_GLOBAL_LOG_LEVEL", "junk", 1); /* falls back to error */
    CAPTURE(aclAppLog(ACL_ERROR, "f", "f.c", 1, "shown"));
    CHECK_STR_CONTAINS(g_captured, "shown");
    unsetenv("ASCEND_SLOG_PRINT_TO_STDOUT");
    unsetenv("ASCEND_GLOBAL_LOG_LEVEL");
}

/* ------------------------------------------------------ aclrtReduceAsync */

static aclFloat16 h(float f) { return aclFloatToFloat16(f); }

static void test_reduce_values(void)
{
    CHECK_OK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *d = NULL, *x = NULL;
    CHECK_OK(aclrtMalloc(&d, 256, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&x, 256, ACL_MEM_MALLOC_HUGE_FIRST));

    /* float SUM / MAX / MIN */
    float a[4] = {1.0f, -2.0f, 3.5f, 0.0f}, b[4] = {0.5f, 5.0f, -3.5f, -1.0f}, r[4];
    CHECK_OK(aclrtMemcpy(d, 256, a, sizeof a, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(x, 256, b, sizeof b, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof a, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s, NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(r, sizeof r, d, sizeof r, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(r[0] == 1.5f && r[1] == 3.0f && r[2] == 0.0f && r[3] == -1.0f);
    CHECK_OK(aclrtMemcpy(d, 256, a, sizeof a, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof a, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_FLOAT, s, NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(r, sizeof r, d, sizeof r, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(r[0] == 1.0f && r[1] == 5.0f && r[2] == 3.5f && r[3] == 0.0f);
    CHECK_OK(aclrtReduceAsync(d, x, sizeof a, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN, ACL_FLOAT, s, NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(r, sizeof r, d, sizeof r, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(r[0] == 0.5f && r[1] == 5.0f && r[2] == -3.5f && r[3] == -1.0f);

    /* fp16: stream-ordered after an async H2D, overflow -> inf in INF/NaN mode */
    aclFloat16 ha[3] = {h(1.5f), h(60000.0f), h(-0.25f)}, hb[3] = {h(2.25f), h(60000.0f), h(0.25f)}, hr[3];
    CHECK_OK(aclrtMemcpyAsync(d, 256, ha, sizeof ha, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtMemcpyAsync(x, 256, hb, sizeof hb, ACL_MEMCPY_HOST_TO_DEVICE, s));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof ha, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16, s, NULL));
    CHECK_OK(aclrtMemcpyAsync(hr, sizeof hr, d, sizeof hr, ACL_MEMCPY_DEVICE_TO_HOST, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK(aclFloat16ToFloat(hr[0]) == 3.75f);
    CHECK_EQ(hr[1], 0x7c00); /* +inf */
    CHECK(aclFloat16ToFloat(hr[2]) == 0.0f);

    /* saturation mode clamps instead (streams created after the switch) */
    CHECK_OK(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION));
    CHECK_OK(aclrtMemcpy(d, 256, ha, sizeof ha, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof ha, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT16, s, NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(hr, sizeof hr, d, sizeof hr, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(hr[1], 0x7bff); /* 65504 */
    CHECK_OK(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN));

    /* bf16 */
    uint16_t ba[2] = {0x3fc0 /* 1.5 */, 0xc000 /* -2 */}, bb[2] = {0x3f80 /* 1 */, 0x4040 /* 3 */}, br[2];
    CHECK_OK(aclrtMemcpy(d, 256, ba, sizeof ba, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(x, 256, bb, sizeof bb, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof ba, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_BF16, s, NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(br, sizeof br, d, sizeof br, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(br[0], 0x4020); /* 2.5 */
    CHECK_EQ(br[1], 0x3f80); /* 1 */

    /* integers: int8 wraps, int16 max, int32 min */
    int8_t ia[2] = {100, -5}, ib[2] = {100, 3}, ir[2];
    CHECK_OK(aclrtMemcpy(d, 256, ia, sizeof ia, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(x, 256, ib, sizeof ib, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof ia, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_INT8, s, NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(ir, sizeof ir, d, sizeof ir, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(ir[0], -56);
    CHECK_EQ(ir[1], -2);
    int16_t sa[2] = {-7, 9}, sb[2] = {3, -9}, sr[2];
    CHECK_OK(aclrtMemcpy(d, 256, sa, sizeof sa, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(x, 256, sb, sizeof sb, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof sa, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX, ACL_INT16, s, NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(sr, sizeof sr, d, sizeof sr, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(sr[0], 3);
    CHECK_EQ(sr[1], 9);
    int32_t wa[2] = {-70000, 5}, wb[2] = {1, 6}, wr[2];
    CHECK_OK(aclrtMemcpy(d, 256, wa, sizeof wa, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtMemcpy(x, 256, wb, sizeof wb, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK_OK(aclrtReduceAsync(d, x, sizeof wa, ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN, ACL_INT32, NULL, NULL));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtMemcpy(wr, sizeof wr, d, sizeof wr, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(wr[0], -70000);
    CHECK_EQ(wr[1], 5);

    /* EXE#aclrtReduceAsync: dst, src and the stream are on the same device */
    CHECK_OK(aclrtSetDevice(1));
    void *peer = NULL;
    CHECK_OK(aclrtMalloc(&peer, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_EQ(aclrtReduceAsync(d, peer, sizeof a, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s, NULL),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "device 1");
    CHECK_EQ(aclrtReduceAsync(peer, d, sizeof a, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, s, NULL),
             ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(peer));
    CHECK_OK(aclrtResetDevice(1));

    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclrtResetDevice(0));
}

static void test_reduce_errors(void)
{
    float host[16] = {0};
    CHECK_EQ(aclrtReduceAsync(host, host, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL),
             ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtSetDevice(0));
    void *d = NULL, *x = NULL;
    CHECK_OK(aclrtMalloc(&d, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc(&x, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclrtReduceAsync(NULL, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL),
             ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "'dst'");
    CHECK_EQ(aclrtReduceAsync(d, NULL, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL),
             ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, host),
             ACL_ERROR_INVALID_PARAM); /* reserve */
    CHECK_EQ(aclrtReduceAsync(d, x, 16, (aclrtReduceKind)0, ACL_FLOAT, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtReduceAsync(d, x, 16, (aclrtReduceKind)14, ACL_FLOAT, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_DOUBLE, NULL, NULL),
             ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtReduceAsync(d, x, 6, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL),
             ACL_ERROR_INVALID_PARAM); /* not a multiple of 4 */
    CHECK_EQ(aclrtReduceAsync(host, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL),
             ACL_ERROR_RT_PARAM_INVALID); /* host dst */
    CHECK_EQ(aclrtReduceAsync(d, host, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL),
             ACL_ERROR_RT_PARAM_INVALID); /* host src */
    CHECK_EQ(aclrtReduceAsync(d, x, 4096, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL),
             ACL_ERROR_RT_PARAM_INVALID); /* beyond the allocation */
    CHECK_OK(aclrtReduceAsync(d, x, 0, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, NULL, NULL));
    uint64_t junk[16] = {0};
    CHECK_NE(aclrtReduceAsync(d, x, 16, ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM, ACL_FLOAT, (aclrtStream)junk, NULL),
             ACL_SUCCESS);
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtFree(d));
    CHECK_OK(aclrtFree(x));
    CHECK_OK(aclrtResetDevice(0));
}

/* -------------------------------------------------- cache / prof trace */

static void *cache_thread(void *arg)
{
    (void)arg;
    char info[32] = "thread op info";
    uintptr_t bad = 0;
    bad += aclrtCacheLastTaskOpInfo(info, sizeof info) != ACL_SUCCESS;
    bad += aclrtCacheLastTaskExtendInfo(info, 5) != ACL_SUCCESS;
    return (void *)bad;
}

static void test_cache_last_task(void)
{
    char info[64] = "op info";
    CHECK_EQ(aclrtCacheLastTaskOpInfo(NULL, 8), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCacheLastTaskOpInfo(info, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCacheLastTaskExtendInfo(NULL, 8), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCacheLastTaskExtendInfo(info, 0), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtCacheLastTaskOpInfo(info, (size_t)1 << 40), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtCacheLastTaskOpInfo(info, sizeof info));
    CHECK_OK(aclrtCacheLastTaskOpInfo(info, 4)); /* replaces */
    CHECK_OK(aclrtCacheLastTaskExtendInfo(info, sizeof info));
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK_EQ(pthread_create(&t[i], NULL, cache_thread, NULL), 0);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        CHECK(r == NULL);
    }
}

static void test_prof_trace(void)
{
    char data[16] = "trace";
    CHECK_EQ(aclrtProfTrace(data, 5, NULL), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtSetDevice(0));
    CHECK_EQ(aclrtProfTrace(NULL, 5, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtProfTrace(data, 0, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtProfTrace(data, -1, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtProfTrace(data, 5, NULL));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_OK(aclrtProfTrace(data, 5, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
}

/* aclmdlRICaptureGetInfo: nothing is ever captured, so any valid stream reports NONE. */
static void test_capture_info(void)
{
    aclmdlRICaptureStatus st = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    aclmdlRI ri = (aclmdlRI)&st;
    CHECK_EQ(aclmdlRICaptureGetInfo(NULL, &st, &ri), ACL_ERROR_RT_CONTEXT_NULL); /* no context */
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclmdlRICaptureGetInfo(NULL, &st, &ri)); /* the default stream */
    CHECK_EQ(st, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    CHECK(ri == NULL);
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    st = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
    CHECK_OK(aclmdlRICaptureGetInfo(s, &st, &ri));
    CHECK_EQ(st, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
    CHECK_EQ(aclmdlRICaptureGetInfo(s, NULL, &ri), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclmdlRICaptureGetInfo(s, &st, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_EQ(aclmdlRICaptureGetInfo(s, &st, &ri), ACL_ERROR_RT_PARAM_INVALID); /* destroyed */
    CHECK_OK(aclrtResetDevice(0));
}

int main(void)
{
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_app_log);
    RUN_TEST(test_capture_info);
    RUN_TEST(test_reduce_values);
    RUN_TEST(test_reduce_errors);
    RUN_TEST(test_cache_last_task);
    RUN_TEST(test_prof_trace);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
