/*
 * test_kernel_isolation.c - kernels under ASCEND_MOCK_ISOLATION=1 (mock README
 * "Kernels and host twins", Faults): a twin can touch the buffers it was given (its
 * declared pointer arguments; for a twin without a parameter description, the device
 * pointers among its argument slots) and nothing else of the device; a touch outside
 * them is caught and fails the stream, never the process.
 */
#include <stdint.h>
#include <string.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_mock_kernel.h"
#include "mock_test.h"

/* Writes 1 into the declared buffer, then (if given) into a pointer passed as a value. */
ACLMOCK_KERNEL(write_declared_then_hidden, 0, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint64_t))
{
    (void)userData;
    (void)blockIdx;
    (void)blockDim;
    int32_t *out = ACLMOCK_ARG_AT(args, int32_t *, 0);
    int32_t *hidden = (int32_t *)(uintptr_t)ACLMOCK_ARG_AT(args, uint64_t, 8);
    out[0] = 1;
    if (hidden != NULL) {
        hidden[0] = 1; /* not a buffer of the launch */
    }
    return 0;
}

/* The same kernel registered without a parameter description: every device pointer
 * among its slots is opened. */
static int32_t undescribed(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    int32_t *a = ACLMOCK_ARG_AT(args, int32_t *, 0);
    int32_t *b = ACLMOCK_ARG_AT(args, int32_t *, 8);
    a[0] = 2;
    b[0] = 2;
    return 0;
}

static void test_given_buffers_only(void)
{
    CHECK_EQ(aclmockGetConfig(ACLMOCK_CONFIG_ISOLATION), 1);
    aclrtStream s = NULL;
    CHECK_OK(aclrtCreateStream(&s));
    int32_t *out = NULL, *other = NULL;
    CHECK_OK(aclrtMalloc((void **)&out, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMalloc((void **)&other, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)write_declared_then_hidden, &f));

    struct { int32_t *out; uint64_t hidden; } a = {out, 0};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, s, NULL, &a, sizeof a, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(s));
    int32_t v = 0;
    CHECK_OK(aclrtMemcpy(&v, 4, out, 4, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(v, 1);

    a.hidden = (uint64_t)(uintptr_t)other; /* another allocation, not given as a pointer */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(f, 1, s, NULL, &a, sizeof a, NULL, 0));
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    const char *m = aclGetRecentErrMsg();
    CHECK_STR_CONTAINS(m, "SIGSEGV");
    CHECK_OK(aclrtMemcpy(&v, 4, other, 4, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(v, 0); /* untouched */

    CHECK_OK(aclmockRegisterKernel("undescribed", undescribed, NULL, 0));
    aclrtFuncHandle g = NULL;
    CHECK_OK(aclrtGetFuncBySymbol((const void *)undescribed, &g));
    struct { int32_t *a, *b; } two = {out, other};
    CHECK_OK(aclrtLaunchKernelWithHostArgs(g, 1, s, NULL, &two, sizeof two, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(s));
    CHECK_OK(aclrtMemcpy(&v, 4, other, 4, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK_EQ(v, 2);
    CHECK_OK(aclmockUnregisterKernel("undescribed"));

    CHECK_OK(aclrtFree(out));
    CHECK_OK(aclrtFree(other));
    CHECK_OK(aclrtDestroyStream(s));
}

int main(void)
{
    mt_mock_env("ASCEND_MOCK_ISOLATION", "1", (const char *)NULL);
    CHECK_OK(aclInit(NULL));
    CHECK_OK(aclrtSetDevice(0));
    RUN_TEST(test_given_buffers_only);
    CHECK_OK(aclrtResetDevice(0));
    CHECK_OK(aclFinalize());
    return TEST_REPORT();
}
