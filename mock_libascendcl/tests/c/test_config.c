/* test_config.c - ASCEND_MOCK_* variables and ASCEND_RT_VISIBLE_DEVICES (mock-core).
 *
 * The configuration is read once per process, so every scenario runs in a fresh
 * process: the test re-executes itself (/proc/self/exe <scenario>) with the scenario's
 * environment, captures the child's stderr and checks its exit status and warnings. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* ----------------------------------------------------------- scenarios (child) */

static void sc_defaults(void)
{
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 8);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_MEM_PER_DEVICE), 64ll << 30);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_ISOLATION), 0);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_LEAK_REPORT), 0);
    CHECK_STR_EQ(aclrtGetSocName(), "Ascend910B1");
    CHECK_STR_EQ(aclmockGetCannVersion(), "8.5.0");
}

static void sc_count3(void)
{
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 3);
    CHECK_EQ(aclrtSetDevice(3), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtSetDevice(2));
    CHECK_OK(aclrtResetDevice(2));
}

/* 64 devices (the maximum): device 63 is a device of its own for managed-memory
 * ACCESSED_BY advice, not confused with the host. */
static void sc_count64(void)
{
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 64);
    CHECK_OK(aclrtSetDevice(0));
    void *m = NULL;
    CHECK_OK(aclrtMemAllocManaged(&m, 4096, ACL_RT_MEM_ATTACH_GLOBAL));
    aclrtMemManagedLocation d63 = {ACL_MEM_LOCATIONTYPE_DEVICE, 63};
    aclrtMemManagedLocation host = {ACL_MEM_LOCATIONTYPE_HOST, 0};
    CHECK_OK(aclrtMemManagedAdvise(m, 100, ACL_MEM_ADVISE_SET_ACCESSED_BY, d63));
    int32_t acc[3] = {0, 0, 0};
    CHECK_OK(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, 100, acc, sizeof(acc)));
    CHECK_EQ(acc[0], 63);
    CHECK_EQ(acc[1], -2); /* not the host (-1) */
    CHECK_OK(aclrtMemManagedAdvise(m, 100, ACL_MEM_ADVISE_SET_ACCESSED_BY, host));
    CHECK_OK(aclrtMemManagedAdvise(m, 100, ACL_MEM_ADVISE_UNSET_ACCESSED_BY, d63));
    CHECK_OK(aclrtMemManagedGetAttr(ACL_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, m, 100, acc, sizeof(acc)));
    CHECK_EQ(acc[0], -1);
    CHECK_EQ(acc[1], -2);
    CHECK_OK(aclrtFree(m));
    CHECK_OK(aclrtResetDevice(0));
}

static void sc_count_bad(void)
{
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 8); /* fallback */
}

static void sc_count0(void)
{
    uint32_t n = 77;
    CHECK_EQ(aclrtGetDeviceCount(&n), ACL_ERROR_RT_NO_DEVICE);
    CHECK_EQ(n, 77);
    CHECK_EQ(aclrtSetDevice(0), ACL_ERROR_RT_NO_DEVICE);
    CHECK(aclrtGetSocName() == NULL);
    aclrtContext c;
    CHECK_EQ(aclrtCreateContext(&c, 0), ACL_ERROR_RT_NO_DEVICE);
}

static void sc_visible(void)
{
    uint32_t n = 0;
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_EQ(n, 3);
    int32_t out = -1;
    CHECK_OK(aclrtGetPhyDevIdByUserDevId(1, &out));
    CHECK_EQ(out, 5);
    CHECK_OK(aclrtGetLogicDevIdByUserDevId(2, &out));
    CHECK_EQ(out, 7);
    CHECK_OK(aclrtGetUserDevIdByPhyDevId(7, &out));
    CHECK_EQ(out, 2);
    CHECK_OK(aclrtGetUserDevIdByLogicDevId(2, &out));
    CHECK_EQ(out, 0);
    CHECK_EQ(aclrtGetUserDevIdByPhyDevId(3, &out), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "not visible");
    CHECK_EQ(aclmockGetPhysicalDevice(0), 2);
    CHECK_EQ(aclrtSetDevice(3), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtSetDevice(2));
    int32_t dev = -1;
    CHECK_OK(aclrtGetDevice(&dev));
    CHECK_EQ(dev, 2); /* user ids, not physical ones */
    int64_t chip = -1;
    CHECK_OK(aclrtGetDeviceInfo(2, ACL_DEV_ATTR_PHY_CHIP_ID, &chip));
    CHECK_EQ(chip, 7);
    CHECK_EQ(aclmockGetStat(2, ACLMOCK_STAT_CONTEXTS), 1);
    CHECK_OK(aclrtResetDevice(2));
}

static void sc_visible_invalid(void)
{
    uint32_t n = 55;
    CHECK_EQ(aclrtGetDeviceCount(&n), ACL_ERROR_RT_NO_DEVICE);
    CHECK_EQ(n, 55);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "ASCEND_RT_VISIBLE_DEVICES");
    CHECK_EQ(aclrtSetDevice(0), ACL_ERROR_RT_NO_DEVICE);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_VISIBLE_INVALID), 1);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_VISIBLE_DEVICE_COUNT), 0);
}

/* A bad entry in ASCEND_RT_VISIBLE_DEVICES ends the list: the ids before it stay visible. */
static void check_visible_prefix(const int32_t *phys, uint32_t n)
{
    uint32_t count = 0;
    CHECK_OK(aclrtGetDeviceCount(&count));
    CHECK_EQ(count, n);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_VISIBLE_INVALID), 0);
    for (uint32_t i = 0; i < n; i++) {
        CHECK_EQ(aclmockGetPhysicalDevice((int32_t)i), phys[i]);
    }
    CHECK_EQ(aclrtSetDevice((int32_t)n), ACL_ERROR_RT_INVALID_DEVICEID);
    CHECK_OK(aclrtSetDevice((int32_t)n - 1));
    CHECK_OK(aclrtResetDevice((int32_t)n - 1));
}

static void sc_visible_prefix_0(void)
{
    static const int32_t phys[] = {0};
    check_visible_prefix(phys, 1);
}

static void sc_visible_prefix_1(void)
{
    static const int32_t phys[] = {1};
    check_visible_prefix(phys, 1);
}

static void sc_visible_prefix_1_3(void)
{
    static const int32_t phys[] = {1, 3};
    check_visible_prefix(phys, 2);
}

static void check_mem(int64_t expected)
{
    int64_t v = 0;
    CHECK_OK(aclrtGetDeviceInfo(0, ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE, &v));
    CHECK_EQ(v, expected);
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_MEM_PER_DEVICE), expected);
}

static void sc_mem_gib(void) { check_mem(2ll << 30); }
static void sc_mem_m(void) { check_mem(512ll << 20); }
static void sc_mem_bytes(void) { check_mem(1048576); }
static void sc_mem_bad(void) { check_mem(64ll << 30); }

static void sc_soc(void)
{
    CHECK_STR_EQ(aclrtGetSocName(), "Ascend910B4");
    int64_t v = 0;
    CHECK_OK(aclGetDeviceCapability(0, ACL_DEVICE_INFO_AI_CORE_NUM, &v));
    CHECK_EQ(v, 20);
}

static void sc_soc_bad(void)
{
    CHECK_STR_EQ(aclrtGetSocName(), "Ascend910B1");
}

/* ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US: what aclrtGetOpTimeOutInterval reports. */
static void sc_op_interval(void)
{
    uint64_t interval = 0;
    CHECK_OK(aclrtGetOpTimeOutInterval(&interval));
    CHECK_EQ(interval, 50000);
}

static void sc_op_interval_bad(void)
{
    uint64_t interval = 0;
    CHECK_OK(aclrtGetOpTimeOutInterval(&interval));
    CHECK_EQ(interval, 4294967);
}

static void sc_cann_bad(void)
{
    CHECK_STR_EQ(aclmockGetCannVersion(), "8.5.0"); /* the default */
}

static void sc_cann(void)
{
    aclCANNPackageVersion v;
    CHECK_OK(aclsysGetCANNVersion(ACL_PKG_NAME_CANN, &v));
    CHECK_STR_EQ(v.version, "9.1.0-beta.3");
    CHECK_STR_EQ(v.majorVersion, "9");
    CHECK_STR_EQ(v.minorVersion, "1");
    CHECK_STR_EQ(v.releaseVersion, "0-beta");
    CHECK_STR_EQ(v.patchVersion, "3");
}

static void sc_faults(void)
{
    CHECK_OK(aclrtSetDevice(0));
    CHECK_EQ(aclrtSetDevice(0), 507033);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "injected fault");
    CHECK_OK(aclrtSetDevice(0));
    uint32_t n;
    CHECK_EQ(aclrtGetDeviceCount(&n), 100000); /* "...:0:..." = every call */
    CHECK_EQ(aclrtGetDeviceCount(&n), 100000);
    CHECK_EQ(aclmockGetFaultHits("aclrtSetDevice"), 1);
    aclmockClearFaults();
    CHECK_OK(aclrtGetDeviceCount(&n));
    CHECK_OK(aclrtResetDeviceForce(0));
}

static void sc_lost(void)
{
    CHECK_EQ(aclrtSetDevice(1), 507053);
    CHECK_EQ(aclrtSetDevice(2), ACL_ERROR_RT_LOST_HEARTBEAT); /* default code */
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_EQ(aclmockGetDeviceLost(1), 507053);
}

static void sc_leak_report(void)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    aclrtContext c;
    CHECK_OK(aclrtCreateContext(&c, 1));
    CHECK_OK(aclFinalize()); /* prints the report on stderr */
}

static void sc_bools(void)
{
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_ISOLATION), 0);   /* "maybe" -> fallback */
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_LEAK_REPORT), 1); /* "yes" */
}

static void sc_err_msg_mode(void);

typedef struct scenario {
    const char *name;
    void (*fn)(void);
    const char *env[4];       /* "NAME=value" */
    const char *stderr_has;   /* substring expected in the child's stderr, or NULL */
    int quiet;                /* stderr must not mention mock_libascendcl */
} scenario;

static const scenario k_scenarios[] = {
    {"defaults", sc_defaults, {NULL}, NULL, 1},
    {"count3", sc_count3, {"ASCEND_MOCK_DEVICE_COUNT=3"}, NULL, 1},
    {"count64", sc_count64, {"ASCEND_MOCK_DEVICE_COUNT=64"}, NULL, 1},
    {"count_bad", sc_count_bad, {"ASCEND_MOCK_DEVICE_COUNT=abc"}, "ASCEND_MOCK_DEVICE_COUNT='abc'", 0},
    {"count_big", sc_count_bad, {"ASCEND_MOCK_DEVICE_COUNT=65"}, "using 8", 0},
    {"count0", sc_count0, {"ASCEND_MOCK_DEVICE_COUNT=0"}, NULL, 1},
    {"visible", sc_visible, {"ASCEND_RT_VISIBLE_DEVICES=2,5,7"}, NULL, 1},
    {"visible_empty", sc_defaults, {"ASCEND_RT_VISIBLE_DEVICES="}, NULL, 1},
    {"visible_dup", sc_visible_invalid, {"ASCEND_RT_VISIBLE_DEVICES=1,1"}, "listed twice", 0},
    {"visible_desc", sc_visible_invalid, {"ASCEND_RT_VISIBLE_DEVICES=3,1"}, "ascending", 0},
    {"visible_junk", sc_visible_invalid, {"ASCEND_RT_VISIBLE_DEVICES=a,b"}, "not a device id", 0},
    {"visible_leading_space", sc_visible_invalid, {"ASCEND_RT_VISIBLE_DEVICES= 1,2"}, "not a device id", 0},
    {"visible_range", sc_visible_prefix_0, {"ASCEND_RT_VISIBLE_DEVICES=0,9"}, "does not exist", 0},
    {"visible_trailing", sc_visible_prefix_0, {"ASCEND_RT_VISIBLE_DEVICES=0,"}, "empty", 0},
    {"visible_space", sc_visible_prefix_0, {"ASCEND_RT_VISIBLE_DEVICES=0, 2,3"}, "' 2' is not a device id", 0},
    {"visible_space_after", sc_visible_prefix_1, {"ASCEND_RT_VISIBLE_DEVICES=1,3 ,5"}, "'3 '", 0},
    {"visible_bad_middle", sc_visible_prefix_1_3, {"ASCEND_RT_VISIBLE_DEVICES=1,3,x,5"}, "'x'", 0},
    {"visible_range_middle", sc_visible_prefix_1_3, {"ASCEND_RT_VISIBLE_DEVICES=1,3,8,5"}, "does not exist", 0},
    {"visible_vs_count", sc_visible_invalid,
     {"ASCEND_MOCK_DEVICE_COUNT=2", "ASCEND_RT_VISIBLE_DEVICES=2"}, "does not exist", 0},
    {"mem_gib", sc_mem_gib, {"ASCEND_MOCK_MEM_PER_DEVICE=2GiB"}, NULL, 1},
    {"mem_m", sc_mem_m, {"ASCEND_MOCK_MEM_PER_DEVICE=512M"}, NULL, 1},
    {"mem_bytes", sc_mem_bytes, {"ASCEND_MOCK_MEM_PER_DEVICE=1048576"}, NULL, 1},
    {"mem_bad", sc_mem_bad, {"ASCEND_MOCK_MEM_PER_DEVICE=12X"}, "ASCEND_MOCK_MEM_PER_DEVICE='12X'", 0},
    {"mem_zero", sc_mem_bad, {"ASCEND_MOCK_MEM_PER_DEVICE=0"}, "using 64GiB", 0},
    {"mem_overflow", sc_mem_bad, {"ASCEND_MOCK_MEM_PER_DEVICE=99999999999999T"}, "using 64GiB", 0},
    {"soc", sc_soc, {"ASCEND_MOCK_SOC_NAME=Ascend910B4"}, NULL, 1},
    {"soc_bad", sc_soc_bad, {"ASCEND_MOCK_SOC_NAME=bad name"}, "ASCEND_MOCK_SOC_NAME", 0},
    /* the warning names the rule that was broken */
    {"soc_space", sc_soc_bad, {"ASCEND_MOCK_SOC_NAME=Ascend 910"},
     "ASCEND_MOCK_SOC_NAME='Ascend 910' contains a space (character 7): it must be one word "
     "of visible ASCII characters, without spaces; using Ascend910B1", 0},
    {"soc_long", sc_soc_bad,
     {"ASCEND_MOCK_SOC_NAME=Ascend910B1Ascend910B1Ascend910B1Ascend910B1Ascend910B1Ascend910"},
     "is 64 characters long (at most 63); using Ascend910B1", 0},
    {"soc_control", sc_soc_bad, {"ASCEND_MOCK_SOC_NAME=Ascend\x7f" "910"},
     "contains byte 0x7f (character 7): only visible ASCII characters are allowed", 0},
    {"cann_space", sc_cann_bad, {"ASCEND_MOCK_CANN_VERSION=8.5 RC1"},
     "ASCEND_MOCK_CANN_VERSION='8.5 RC1' contains a space (character 4)", 0},
    {"op_interval", sc_op_interval, {"ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US=50000"}, NULL, 1},
    {"op_interval_zero", sc_op_interval_bad, {"ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US=0"}, "using 4294967", 0},
    {"op_interval_big", sc_op_interval_bad, {"ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US=72624976668147842"},
     "ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US='72624976668147842'", 0},
    {"cann", sc_cann, {"ASCEND_MOCK_CANN_VERSION=9.1.0-beta.3"}, NULL, 1},
    {"faults", sc_faults,
     {"ASCEND_MOCK_FAULTS=aclrtSetDevice:2:507033,bogus,aclrtGetDeviceCount:0:100000"},
     "ASCEND_MOCK_FAULTS='bogus'", 0},
    {"lost", sc_lost, {"ASCEND_MOCK_DEVICE_LOST=1:507053,2,99:1"}, "ASCEND_MOCK_DEVICE_LOST='99:1'", 0},
    {"leak_report", sc_leak_report, {"ASCEND_MOCK_LEAK_REPORT=1"},
     "leak report: device 0: only the runtime's own: 1 default context, 1 default stream\n"
     "mock_libascendcl leak report: device 1: 1 context (plus the runtime's own: 1 default "
     "stream)\n", 0},
    {"bools", sc_bools, {"ASCEND_MOCK_ISOLATION=maybe", "ASCEND_MOCK_LEAK_REPORT=yes"},
     "ASCEND_MOCK_ISOLATION='maybe'", 0},
    {"err_msg_mode", sc_err_msg_mode, {NULL}, NULL, 1},
};

/* err_msg_mode "1" in the aclInit JSON: one process-wide recent message. */
static void *fail_in_thread(void *arg)
{
    (void)arg;
    (void)aclrtGetRunMode(NULL);
    return NULL;
}

static void sc_err_msg_mode(void)
{
    char path[] = "/tmp/mock_err_msg_mode_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    const char text[] = "{\"err_msg_mode\": \"1\"}";
    CHECK_EQ(write(fd, text, sizeof text - 1), (long long)(sizeof text - 1));
    close(fd);
    CHECK_OK(aclInit(path));
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, fail_in_thread, NULL));
    pthread_join(t, NULL);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "aclrtGetRunMode"); /* visible here */
    CHECK(aclGetRecentErrMsg() == NULL);
    CHECK_OK(aclFinalize());
    /* back to thread level */
    CHECK_OK(pthread_create(&t, NULL, fail_in_thread, NULL));
    pthread_join(t, NULL);
    CHECK(aclGetRecentErrMsg() == NULL);
    unlink(path);
}

/* ----------------------------------------------------------- driver (parent) */

static const char *const k_vars[] = {
    "ASCEND_MOCK_DEVICE_COUNT", "ASCEND_MOCK_MEM_PER_DEVICE", "ASCEND_MOCK_SOC_NAME",
    "ASCEND_MOCK_CANN_VERSION", "ASCEND_MOCK_ISOLATION", "ASCEND_MOCK_LEAK_REPORT",
    "ASCEND_MOCK_FAULTS", "ASCEND_MOCK_DEVICE_LOST", "ASCEND_RT_VISIBLE_DEVICES",
    "ASCEND_HOME_PATH", "ASCEND_MOCK_OP_TIMEOUT_INTERVAL_US",
};

static void run_scenario(const char *self, const scenario *sc)
{
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK(!"pipe");
        return;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        close(fds[1]);
        for (size_t i = 0; i < sizeof k_vars / sizeof k_vars[0]; i++) {
            unsetenv(k_vars[i]);
        }
        for (int i = 0; i < 4 && sc->env[i] != NULL; i++) {
            putenv((char *)sc->env[i]);
        }
        execl(self, self, "--scenario", sc->name, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char err[16384];
    size_t used = 0;
    ssize_t r;
    while ((r = read(fds[0], err + used, sizeof err - 1 - used)) > 0) {
        used += (size_t)r;
        if (used == sizeof err - 1) {
            break;
        }
    }
    err[used] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        fprintf(stderr, "scenario %s failed (status %d); its stderr:\n%s\n", sc->name, status, err);
    }
    CHECK(ok);
    if (sc->stderr_has != NULL) {
        CHECK_STR_CONTAINS(err, sc->stderr_has);
    }
    if (sc->quiet) {
        CHECK(strstr(err, "mock_libascendcl") == NULL);
    }
    printf("[%s] scenario %s\n", ok ? " OK " : "FAIL", sc->name);
}

int main(int argc, char **argv)
{
    const size_t count = sizeof k_scenarios / sizeof k_scenarios[0];
    if (argc == 3 && strcmp(argv[1], "--scenario") == 0) {
        for (size_t i = 0; i < count; i++) {
            if (strcmp(k_scenarios[i].name, argv[2]) == 0) {
                k_scenarios[i].fn();
                return TEST_FAILED_COUNT() == 0 ? 0 : 1;
            }
        }
        fprintf(stderr, "unknown scenario %s\n", argv[2]);
        return 2;
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "cannot find /proc/self/exe\n");
        return 1;
    }
    self[n] = '\0';
    for (size_t i = 0; i < count; i++) {
        run_scenario(self, &k_scenarios[i]);
    }
    return TEST_REPORT();
}
