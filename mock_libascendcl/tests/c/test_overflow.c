/* test_overflow.c - saturation mode, stream overflow switch, overflow status buffers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "mock_test.h"

static void test_sat_mode(void)
{
    aclrtFloatOverflowMode m = ACL_RT_OVERFLOW_MODE_UNDEF;
    CHECK_EQ(aclrtGetDeviceSatMode(NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetDeviceSatMode(&m), ACL_ERROR_RT_CONTEXT_NULL); /* no device on this thread */
    CHECK_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtGetDeviceSatMode(&m));
    CHECK_EQ(m, ACL_RT_OVERFLOW_MODE_INFNAN); /* Ascend910B1 default */
    CHECK_EQ(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_UNDEF), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_EQ(aclrtSetDeviceSatMode((aclrtFloatOverflowMode)-1), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION));
    CHECK_OK(aclrtGetDeviceSatMode(&m));
    CHECK_EQ(m, ACL_RT_OVERFLOW_MODE_SATURATION);
    /* per device */
    CHECK_OK(aclrtSetDevice(1));
    CHECK_OK(aclrtGetDeviceSatMode(&m));
    CHECK_EQ(m, ACL_RT_OVERFLOW_MODE_INFNAN);
    CHECK_OK(aclrtResetDevice(1));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclrtGetDeviceSatMode(&m));
    CHECK_EQ(m, ACL_RT_OVERFLOW_MODE_SATURATION);
    CHECK_OK(aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclrtResetDevice(0));
}

/* Run in a child with ASCEND_MOCK_SOC_NAME=Ascend910A: saturation only. */
static int old_soc_child(void)
{
    int bad = 0;
    aclrtFloatOverflowMode m = ACL_RT_OVERFLOW_MODE_UNDEF;
    bad += aclrtSetDevice(0) != ACL_SUCCESS;
    bad += aclrtGetDeviceSatMode(&m) != ACL_SUCCESS || m != ACL_RT_OVERFLOW_MODE_SATURATION;
    bad += aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_INFNAN) != ACL_ERROR_RT_FEATURE_NOT_SUPPORT;
    bad += aclrtSetDeviceSatMode(ACL_RT_OVERFLOW_MODE_SATURATION) != ACL_SUCCESS;
    bad += aclrtResetDevice(0) != ACL_SUCCESS;
    return bad;
}

static void test_sat_mode_old_soc(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("ASCEND_MOCK_SOC_NAME", "Ascend910A", 1);
        setenv("MISC_OVERFLOW_CHILD", "1", 1);
        execl("/proc/self/exe", "test_overflow", (char *)NULL);
        _exit(127);
    }
    CHECK_GT(pid, 0);
    int status = 0;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
}

static void test_stream_switch(void)
{
    uint32_t flag = 7;
    CHECK_EQ(aclrtGetStreamOverflowSwitch(NULL, &flag), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK_OK(aclrtSetDevice(2));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    CHECK_EQ(aclrtGetStreamOverflowSwitch(s, NULL), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtGetStreamOverflowSwitch(s, &flag));
    CHECK_EQ(flag, 0);
    CHECK_EQ(aclrtSetStreamOverflowSwitch(s, 2), ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtSetStreamOverflowSwitch(s, 1));
    CHECK_OK(aclrtGetStreamOverflowSwitch(s, &flag));
    CHECK_EQ(flag, 1);
    /* the same switch as the stream attribute */
    aclrtStreamAttrValue v;
    memset(&v, 0, sizeof v);
    CHECK_OK(aclrtGetStreamAttribute(s, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &v));
    CHECK_EQ(v.overflowSwitch, 1);
    v.overflowSwitch = 0;
    CHECK_OK(aclrtSetStreamAttribute(s, ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK, &v));
    CHECK_OK(aclrtGetStreamOverflowSwitch(s, &flag));
    CHECK_EQ(flag, 0);
    /* default stream */
    CHECK_OK(aclrtSetStreamOverflowSwitch(NULL, 1));
    CHECK_OK(aclrtGetStreamOverflowSwitch(NULL, &flag));
    CHECK_EQ(flag, 1);
    uint64_t junk[16] = {0};
    CHECK_NE(aclrtSetStreamOverflowSwitch((aclrtStream)junk, 1), ACL_SUCCESS);
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(2));
}

static void test_status_buffers(void)
{
    CHECK_OK(aclrtSetDevice(0));
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    void *dev = NULL;
    CHECK_OK(aclrtMalloc(&dev, 128, ACL_MEM_MALLOC_HUGE_FIRST));
    unsigned char host[128];

    CHECK_OK(aclrtMemset(dev, 128, 0xab, 128));
    CHECK_OK(aclrtGetOverflowStatus(dev, 64, s));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(host, sizeof host, dev, 128, ACL_MEMCPY_DEVICE_TO_HOST));
    int nonzero = 0, untouched = 0;
    for (int i = 0; i < 64; i++) nonzero += host[i] != 0;
    for (int i = 64; i < 128; i++) untouched += host[i] == 0xab;
    CHECK_EQ(nonzero, 0);   /* "no overflow" */
    CHECK_EQ(untouched, 64); /* nothing beyond outputSize */
    CHECK_OK(aclrtResetOverflowStatus(s));

    CHECK_OK(aclrtMemset(dev, 128, 0xcd, 128));
    CHECK_OK(aclrtGetFloatOverflowStatus(dev, 8, NULL)); /* default stream */
    CHECK_OK(aclrtNpuGetFloatOverFlowStatus((char *)dev + 64, 64, 0, s));
    CHECK_OK(aclrtSynchronizeStream(NULL));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(host, sizeof host, dev, 128, ACL_MEMCPY_DEVICE_TO_HOST));
    nonzero = 0;
    for (int i = 0; i < 8; i++) nonzero += host[i] != 0;
    for (int i = 64; i < 128; i++) nonzero += host[i] != 0;
    CHECK_EQ(nonzero, 0);
    CHECK_EQ(host[8], 0xcd);
    CHECK_OK(aclrtResetFloatOverflowStatus(s));
    CHECK_OK(aclrtNpuClearFloatOverFlowStatus(0, s));
    CHECK_OK(aclrtSynchronizeStream(s));

    /* errors */
    (void)aclGetRecentErrMsg();
    CHECK_EQ(aclrtGetOverflowStatus(NULL, 64, s), ACL_ERROR_INVALID_PARAM);
    CHECK_STR_CONTAINS(aclGetRecentErrMsg(), "outputAddr");
    CHECK_EQ(aclrtGetOverflowStatus(dev, 0, s), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtGetOverflowStatus(host, 64, s), ACL_ERROR_RT_PARAM_INVALID); /* host memory */
    CHECK_EQ(aclrtGetFloatOverflowStatus(dev, 4096, s), ACL_ERROR_RT_PARAM_INVALID); /* beyond the allocation */
    CHECK_EQ(aclrtNpuGetFloatOverFlowStatus((char *)dev + 100, 64, 0, s), ACL_ERROR_RT_PARAM_INVALID);
    /* memory of another device */
    CHECK_OK(aclrtSetDevice(3));
    void *dev3 = NULL;
    CHECK_OK(aclrtMalloc(&dev3, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtSetDevice(0));
    CHECK_EQ(aclrtGetOverflowStatus(dev3, 64, s), ACL_ERROR_RT_PARAM_INVALID);
    CHECK_OK(aclrtFree(dev3));
    CHECK_OK(aclrtResetDevice(3));

    CHECK_OK(aclrtFree(dev));
    CHECK_OK(aclrtDestroyStream(s));
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclrtResetDevice(0)); /* aclrtSetDevice(0) was called twice */
    CHECK_EQ(aclrtResetOverflowStatus(NULL), ACL_ERROR_RT_CONTEXT_NULL);
}

static void test_fault_injection(void)
{
    CHECK_OK(aclrtSetDevice(0));
    CHECK_OK(aclmockInjectFault("aclrtGetDeviceSatMode", 1, ACL_ERROR_RT_INTERNAL_ERROR));
    aclrtFloatOverflowMode m;
    CHECK_EQ(aclrtGetDeviceSatMode(&m), ACL_ERROR_RT_INTERNAL_ERROR);
    CHECK_OK(aclrtGetDeviceSatMode(&m));
    aclmockClearFaults();
    CHECK_OK(aclrtResetDevice(0));
}

int main(void)
{
    if (getenv("MISC_OVERFLOW_CHILD") != NULL) {
        return old_soc_child() == 0 ? 0 : 1;
    }
    CHECK_OK(aclInit(NULL));
    RUN_TEST(test_sat_mode);
    RUN_TEST(test_sat_mode_old_soc);
    RUN_TEST(test_stream_switch);
    RUN_TEST(test_status_buffers);
    RUN_TEST(test_fault_injection);
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
