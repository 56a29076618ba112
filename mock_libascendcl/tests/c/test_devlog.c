/* test_devlog.c - the device log (mock README "Device log"): errors attributed to the
 * device of the calling thread (or the host log), device resets, task failures with
 * their task and stream, timeouts, injected faults, the bound of 1024 entries per log,
 * and the files in CANN's layout (acl_next_semantics.md §8: ASCEND_PROCESS_LOG_PATH >
 * ASCEND_WORK_PATH, ASCEND_GLOBAL_LOG_LEVEL, ASCEND_LOG_PRINT_TO_STDOUT). */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static char g_dir[256];
static char g_log[1 << 18];

static const char *log_of(int32_t device)
{
    CHECK_GE(aclmockGetDeviceLog(device, g_log, sizeof g_log), 0);
    return g_log;
}

static aclError failing_twin(void *p)
{
    (void)p;
    return ACL_ERROR_RT_AICORE_EXCEPTION;
}

static void sleep_200ms(void *p)
{
    (void)p;
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
}

static void test_entries(void)
{
    aclmockClearDeviceLog();
    /* no device yet: the host log (plog) */
    void *p = NULL;
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, NULL, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(log_of(ACLMOCK_LOG_HOST), "aclrtGetMemInfo: argument 'free' is NULL (error 100000)");
    CHECK_EQ(aclmockGetDeviceLogCount(2), 0);

    /* an error of a thread working on device 2 */
    CHECK_OK(aclrtSetDevice(2));
    CHECK_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    const char *l = log_of(2);
    CHECK_STR_CONTAINS(l, "[ERROR] RUNTIME(");
    CHECK_STR_CONTAINS(l, "[device 2]");
    CHECK_STR_CONTAINS(l, "aclrtMalloc: ");
    CHECK_EQ(aclmockGetDeviceLogCount(2), 1);

    /* an injected fault */
    CHECK_OK(aclmockInjectFault("aclrtMalloc", 1, ACL_ERROR_RT_MEMORY_ALLOCATION));
    CHECK_EQ(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_RT_MEMORY_ALLOCATION);
    CHECK_STR_CONTAINS(log_of(2), "injected fault");
    aclmockClearFaults();

    /* a task that fails on its stream: the exception with its task and stream */
    aclrtStream s;
    CHECK_OK(aclrtCreateStream(&s));
    int32_t sid = -1;
    CHECK_OK(aclrtStreamGetId(s, &sid));
    aclmockOpDesc op = {"faulty", 0, NULL, 0, failing_twin, NULL};
    CHECK_OK(aclmockLaunchOp(&op, s));
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    char want[128];
    snprintf(want, sizeof want, "on stream %d of device 2 failed (error 507015)", sid);
    CHECK_STR_CONTAINS(log_of(2), want);

    /* a timeout */
    CHECK_OK(aclrtLaunchHostFunc(s, sleep_200ms, NULL));
    CHECK_EQ(aclrtSynchronizeStreamWithTimeout(s, 10), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
    CHECK_STR_CONTAINS(log_of(2), "(error 507046)");
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtDestroyStream(s));

    /* the reset that releases the device */
    CHECK_OK(aclrtResetDevice(2));
    CHECK_STR_CONTAINS(log_of(2), "[INFO] RUNTIME(");
    CHECK_STR_CONTAINS(log_of(2), "device 2 reset");

    /* everything, in order: the host entry first */
    const char *all = log_of(ACLMOCK_LOG_ALL);
    const char *host = strstr(all, "aclrtGetMemInfo");
    const char *reset = strstr(all, "device 2 reset");
    CHECK(host != NULL && reset != NULL && host < reset);
    CHECK_EQ(aclmockGetDeviceLogCount(ACLMOCK_LOG_ALL), aclmockGetDeviceLogCount(2) + aclmockGetDeviceLogCount(-2));

    /* snprintf-style: the length needed, a truncated NUL-terminated copy */
    char small[16];
    int need = aclmockGetDeviceLog(2, small, sizeof small);
    CHECK_GT(need, 15);
    CHECK_EQ(strlen(small), 15);
    CHECK_EQ(aclmockGetDeviceLog(2, NULL, 0), need);
    CHECK_EQ(aclmockGetDeviceLog(64, g_log, sizeof g_log), -1);
    CHECK_EQ(aclmockGetDeviceLog(-3, g_log, sizeof g_log), -1);
}

static void test_bounded(void)
{
    aclmockClearDeviceLog();
    CHECK_OK(aclrtSetDevice(3));
    void *p = NULL;
    for (int i = 0; i < 1500; i++) {
        CHECK_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
    }
    CHECK_EQ(aclmockGetDeviceLogCount(3), 1024);
    aclmockClearDeviceLog();
    CHECK_EQ(aclmockGetDeviceLogCount(3), 0);
    CHECK_OK(aclrtResetDevice(3));
}

/* The files: <dir>/debug/plog/plog-<pid>_<time>.log and
 * <dir>/debug/device-<id>/device-<pid>_<time>.log. */
static size_t read_glob(const char *pattern, char *buf, size_t len)
{
    glob_t g;
    buf[0] = '\0';
    if (glob(pattern, 0, NULL, &g) != 0) {
        return 0;
    }
    size_t n = 0;
    if (g.gl_pathc == 1) {
        FILE *f = fopen(g.gl_pathv[0], "r");
        if (f != NULL) {
            n = fread(buf, 1, len - 1, f);
            buf[n] = '\0';
            fclose(f);
        }
    }
    size_t count = g.gl_pathc;
    globfree(&g);
    return count == 1 ? n : 0;
}

static void make_errors(void)
{
    void *p = NULL;
    CHECK_OK(aclInit(NULL));
    CHECK_EQ(aclrtGetMemInfo(ACL_HBM_MEM, NULL, NULL), ACL_ERROR_INVALID_PARAM); /* host */
    CHECK_OK(aclrtSetDevice(1));
    CHECK_EQ(aclrtMalloc(&p, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM); /* device 1 */
    CHECK_OK(aclrtResetDevice(1)); /* INFO */
    CHECK_OK(aclFinalize());
}

static void child_files(void)
{
    char dir[300], pattern[400], buf[8192];
    snprintf(dir, sizeof dir, "%s/plogs", g_dir);
    mt_mock_env("ASCEND_PROCESS_LOG_PATH", dir, "ASCEND_WORK_PATH", "/nonexistent", (const char *)NULL);
    make_errors();
    snprintf(pattern, sizeof pattern, "%s/debug/plog/plog-%ld_*.log", dir, (long)getpid());
    CHECK_GT(read_glob(pattern, buf, sizeof buf), 0);
    CHECK_STR_CONTAINS(buf, "aclrtGetMemInfo");
    snprintf(pattern, sizeof pattern, "%s/debug/device-1/device-%ld_*.log", dir, (long)getpid());
    CHECK_GT(read_glob(pattern, buf, sizeof buf), 0);
    CHECK_STR_CONTAINS(buf, "[ERROR] RUNTIME(");
    CHECK_STR_CONTAINS(buf, "aclrtMalloc");
    CHECK(strstr(buf, "[INFO]") == NULL); /* below the default level (error) */
}

static void child_work_path_and_level(void)
{
    char dir[300], pattern[400], buf[8192];
    snprintf(dir, sizeof dir, "%s/work", g_dir);
    mt_mock_env("ASCEND_WORK_PATH", dir, "ASCEND_GLOBAL_LOG_LEVEL", "1", (const char *)NULL);
    make_errors();
    snprintf(pattern, sizeof pattern, "%s/log/debug/device-1/device-%ld_*.log", dir, (long)getpid());
    CHECK_GT(read_glob(pattern, buf, sizeof buf), 0);
    CHECK_STR_CONTAINS(buf, "[INFO] RUNTIME(");
    CHECK_STR_CONTAINS(buf, "device 1 reset");
}

static void child_console(void)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/console", g_dir);
    mt_mock_env("ASCEND_PROCESS_LOG_PATH", dir, "ASCEND_LOG_PRINT_TO_STDOUT", "1", (const char *)NULL);
    make_errors(); /* printed (on stderr), no files */
    CHECK(access(dir, F_OK) != 0);
}

static void test_files(void)
{
    CHECK_EQ(mt_run_child_fn(child_files), 0);
    CHECK_EQ(mt_run_child_fn(child_work_path_and_level), 0);
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    int saved = dup(2);
    dup2(fds[1], 2);
    int rc = mt_run_child_fn(child_console);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    char buf[8192];
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    CHECK_EQ(rc, 0);
    CHECK_STR_CONTAINS(buf, "[ERROR] RUNTIME(");
    CHECK_STR_CONTAINS(buf, "[device 1]");
}

int main(void)
{
    if (mt_make_tmpdir(g_dir, sizeof g_dir, "devlog") != 0) {
        return 1;
    }
    RUN_TEST(test_files); /* children first: the switches are read once per process */
    mt_mock_env((const char *)NULL);
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_entries);
    RUN_TEST(test_bounded);
    CHECK_OK(aclFinalize());
    mt_remove_tree(g_dir);
    return TEST_REPORT();
}
