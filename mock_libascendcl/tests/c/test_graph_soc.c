/* test_graph_soc.c - the support rules of the aclmdlRI and stream-switch families by
 * simulated SoC (acl_next_semantics.md §2.1, §4): each SoC runs in a child process,
 * since ASCEND_MOCK_SOC_NAME is read once per process. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

#define UNSUPPORTED ACL_ERROR_RT_FEATURE_NOT_SUPPORT

/* The checks of one SoC, in the child. `capture`: capture family supported (950, A3,
 * A2, 310P); `edit`: introspection / conditional family (950, A3, A2); `sw`: stream
 * switch family (not A3). */
static void child_checks(bool capture, bool edit, bool sw)
{
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    aclError rc = aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);
    CHECK_EQ(rc, capture ? ACL_SUCCESS : UNSUPPORTED);
    aclmdlRI ri = NULL;
    if (rc == ACL_SUCCESS) {
        CHECK_OK(aclmdlRICaptureEnd(s, &ri));
        uint32_t n = 0;
        CHECK_EQ(aclmdlRIGetStreams(ri, NULL, &n), edit ? ACL_SUCCESS : UNSUPPORTED);
        CHECK_OK(aclmdlRIDestroy(ri));
    }
    /* built models: every SoC */
    aclmdlRI m = NULL;
    CHECK_OK(aclmdlRIBuildBegin(&m, 0));
    aclrtStream p1 = NULL, p2 = NULL;
    CHECK_OK(aclrtCreateStreamWithConfig(&p1, 0, ACL_STREAM_PERSISTENT));
    CHECK_OK(aclrtCreateStreamWithConfig(&p2, 0, ACL_STREAM_PERSISTENT));
    CHECK_OK(aclmdlRIBindStream(m, p1, 0));
    CHECK_OK(aclmdlRIBindStream(m, p2, 0x7FFFFFFF));
    CHECK_EQ(aclrtActiveStream(p2, p1), sw ? ACL_SUCCESS : UNSUPPORTED);
    CHECK_OK(aclmdlRIBuildEnd(m, NULL));
    CHECK_OK(aclmdlRIExecute(m, -1));
    CHECK_EQ(aclmdlRIExecuteAsync(m, s), capture ? ACL_SUCCESS : UNSUPPORTED);
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclmdlRIDestroy(m));
    CHECK_OK(aclrtDestroyStream(p1));
    CHECK_OK(aclrtDestroyStream(p2));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
}

static int run_child(const char *soc)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TEST_GRAPH_SOC_CHILD", soc, 1);
        setenv("ASCEND_MOCK_SOC_NAME", soc, 1);
        execl("/proc/self/exe", "test_graph_soc", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_support_by_soc(void)
{
    CHECK_EQ(run_child("Ascend910B1"), 0);    /* A2 */
    CHECK_EQ(run_child("Ascend910_9391"), 0); /* A3 */
    CHECK_EQ(run_child("Ascend310P3"), 0);
    CHECK_EQ(run_child("Ascend310B1"), 0);
    CHECK_EQ(run_child("Ascend910A"), 0); /* Atlas training series */
}

int main(void)
{
    const char *soc = getenv("TEST_GRAPH_SOC_CHILD");
    if (soc != NULL) {
        bool a2a3 = strncmp(soc, "Ascend910B", 10) == 0 || strncmp(soc, "Ascend910_93", 12) == 0;
        bool a3 = strncmp(soc, "Ascend910_93", 12) == 0;
        bool p310 = strncmp(soc, "Ascend310P", 10) == 0;
        child_checks(a2a3 || p310, a2a3, !a3);
        return TEST_FAILED_COUNT() == 0 ? 0 : 1;
    }
    RUN_TEST(test_support_by_soc);
    return TEST_REPORT();
}
