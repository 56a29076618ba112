/*
 * test_kernel_soc.c - the per-product rules of the kernel API (acl_next_semantics.md
 * §1.3, §1.5): SIMT launches and the dynamic UB size on Ascend 950, the ENGINE_TYPE and
 * BLOCKDIM_OFFSET launch attributes on Atlas inference (310P) parts, the functions
 * 310B lacks. The SoC is read once per process, so the program runs itself once per
 * SoC (KERNEL_SOC_CASE selects the case in the child).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "acl/acl.h"
#include "acl/acl_mock.h"
#include "acl/acl_mock_kernel.h"
#include "mock_test.h"

#define TWINS MOCK_TEST_KERNEL_DIR "/twins.so"

static aclrtStream g_s;
static aclrtBinHandle g_bin;

static aclrtFuncHandle func(const char *name)
{
    aclrtFuncHandle f = NULL;
    CHECK_OK(aclrtBinaryGetFunction(g_bin, name, &f));
    return f;
}

static uint32_t *dev_rows(size_t rows)
{
    void *p = NULL;
    CHECK_OK(aclrtMalloc(&p, rows * 8 * sizeof(uint32_t), ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK_OK(aclrtMemset(p, rows * 8 * sizeof(uint32_t), 0, rows * 8 * sizeof(uint32_t)));
    return p;
}

/* ------------------------------------------------------------------ 950 */

static void case_950_simt(void)
{
    aclrtFuncHandle info = func("launch_info"); /* a SIMT twin */
    uint32_t *d = dev_rows(4);
    void *arr[1] = {&d};
    dim3 grid = {4, 1, 1}, block = {32, 2, 1};
    /* KRN#aclrtLaunchSIMTKernelWithArgsArray: grid, block and the dynamic UB size */
    CHECK_OK(aclrtLaunchSIMTKernelWithArgsArray(info, grid, block, 1024, g_s, NULL, arr));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    uint32_t h[4 * 8];
    CHECK_OK(aclrtMemcpy(h, sizeof h, d, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int b = 0; b < 4; b++) {
        const uint32_t *r = h + 8 * b;
        CHECK(r[0] == 4 && r[1] == 1 && r[2] == 1); /* grid */
        CHECK_EQ(r[3], 64);                         /* threads per block */
        CHECK_EQ(r[4], 1024);                       /* dynamic UB */
        CHECK_EQ(r[5], 4);                          /* blocks */
        CHECK_EQ(r[6], 0);                          /* device */
        CHECK_EQ(r[7], 1);                          /* name */
    }
    struct { uint32_t *out; } host = {d};
    dim3 g2 = {2, 2, 1};
    CHECK_OK(aclrtLaunchSIMTKernelWithHostArgs(info, g2, block, 0, g_s, NULL, &host, sizeof host, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    CHECK_OK(aclrtMemcpy(h, sizeof h, d, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(h[0] == 2 && h[1] == 2 && h[5] == 4 && h[4] == 0);

    /* the rules */
    size_t ub = 0;
    CHECK_OK(aclrtFunctionGetAvailDynUbufPerBlock(info, 0, &ub));
    CHECK_GT(ub, 0);
    CHECK_EQ(aclrtLaunchSIMTKernelWithArgsArray(info, grid, block, ub + 1, g_s, NULL, arr), ACL_ERROR_INVALID_PARAM);
    dim3 zero = {4, 0, 1}, big = {64, 64, 1};
    CHECK_EQ(aclrtLaunchSIMTKernelWithArgsArray(info, zero, block, 0, g_s, NULL, arr), ACL_ERROR_INVALID_PARAM);
    CHECK_EQ(aclrtLaunchSIMTKernelWithArgsArray(info, grid, big, 0, g_s, NULL, arr), ACL_ERROR_INVALID_PARAM);
    float *x = NULL;
    uint32_t n = 0;
    void *va[4] = {&x, &x, &x, &n};
    CHECK_EQ(aclrtLaunchSIMTKernelWithArgsArray(func("vector_add"), grid, block, 0, g_s, NULL, va),
             ACL_ERROR_RT_PARAM_INVALID); /* not a SIMT kernel */

    /* DYN_UBUF_SIZE: 0 for a pure SIMD kernel (ST#aclrtLaunchKernelAttrValue) */
    aclrtLaunchKernelAttr at;
    memset(&at, 0, sizeof at);
    at.id = ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE;
    at.value.dynUBufSize = 512;
    aclrtLaunchKernelCfg cfg = {&at, 1};
    struct { float *x, *y, *z; uint64_t n; } vh = {NULL, NULL, NULL, 0};
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(func("vector_add"), 1, g_s, &cfg, &vh, sizeof vh, NULL, 0),
             ACL_ERROR_INVALID_PARAM);
    CHECK_OK(aclrtLaunchKernelWithHostArgs(info, 2, g_s, &cfg, &host, sizeof host, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    CHECK_OK(aclrtMemcpy(h, sizeof h, d, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(h[4] == 512 && h[0] == 2 && h[3] == 1); /* a plain launch: grid {numBlocks,1,1}, one thread */

    /* the core ratio exists on A3, A2 and 310P only */
    int64_t v = 0;
    CHECK_EQ(aclrtGetFunctionAttribute(info, ACL_FUNC_ATTR_KERNEL_RATIO, &v), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtFree(d));
}

/* ----------------------------------------------------------------- 310P */

static void case_310p_attributes(void)
{
    aclrtFuncHandle info = func("launch_info");
    uint32_t *d = dev_rows(16);
    struct { uint32_t *out; } host = {d};
    aclrtLaunchKernelAttr at[2];
    memset(at, 0, sizeof at);
    at[0].id = ACL_RT_LAUNCH_KERNEL_ATTR_ENGINE_TYPE;
    at[0].value.engineType = ACL_RT_ENGINE_TYPE_AIV;
    at[1].id = ACL_RT_LAUNCH_KERNEL_ATTR_BLOCKDIM_OFFSET;
    at[1].value.blockDimOffset = 10;
    aclrtLaunchKernelCfg cfg = {at, 2};
    /* ENUM#aclrtLaunchKernelAttrId BLOCKDIM_OFFSET: the AIV part of a split launch sees
     * the block indices after the AI Core part (mock: offset + i of offset + numBlocks) */
    CHECK_OK(aclrtLaunchKernelWithHostArgs(info, 3, g_s, &cfg, &host, sizeof host, NULL, 0));
    CHECK_OK(aclrtSynchronizeStream(g_s));
    uint32_t h[16 * 8];
    CHECK_OK(aclrtMemcpy(h, sizeof h, d, sizeof h, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int b = 10; b < 13; b++) {
        CHECK_EQ(h[8 * b + 5], 13); /* numBlocks seen: offset + blocks */
        CHECK_EQ(h[8 * b + 7], 1);
    }
    CHECK_EQ(h[8 * 9 + 7], 0); /* no block below the offset */
    at[0].value.engineType = (aclrtEngineType)5;
    CHECK_EQ(aclrtLaunchKernelWithHostArgs(info, 3, g_s, &cfg, &host, sizeof host, NULL, 0),
             ACL_ERROR_INVALID_PARAM);
    /* SIMT and the dynamic UB are for 950 */
    dim3 one = {1, 1, 1};
    void *arr[1] = {&d};
    CHECK_EQ(aclrtLaunchSIMTKernelWithArgsArray(info, one, one, 0, g_s, NULL, arr), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    int64_t v = 0;
    CHECK_OK(aclrtGetFunctionAttribute(info, ACL_FUNC_ATTR_KERNEL_RATIO, &v));
    CHECK_EQ(v, 1); /* a vector kernel: [0] = 1 */
    CHECK_OK(aclrtFree(d));
}

/* ----------------------------------------------------------------- 310B */

static void case_310b_missing(void)
{
    aclrtFuncHandle f = func("vector_add"), g = NULL;
    size_t a = 0, b = 0;
    int64_t v = 0;
    /* KRN#aclrtGetFunctionSize / aclrtGetFuncBySymbol: 950, A3, A2, 310P */
    CHECK_EQ(aclrtGetFunctionSize(f, &a, &b), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtGetFuncBySymbol((const void *)case_310b_missing, &g), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_EQ(aclrtGetFunctionAttribute(f, ACL_FUNC_ATTR_KERNEL_RATIO, &v), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    CHECK_OK(aclrtGetFunctionAttribute(f, ACL_FUNC_ATTR_KERNEL_TYPE, &v));
}

/* ---------------------------------------------------------------- driver */

static const struct { const char *name, *soc; void (*fn)(void); } k_cases[] = {
    {"950", "Ascend950PR_9599", case_950_simt},
    {"310P", "Ascend310P3", case_310p_attributes},
    {"310B", "Ascend310B1", case_310b_missing},
};

static int run_case(const char *which)
{
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        if (strcmp(which, k_cases[i].name) != 0) {
            continue;
        }
        mt_mock_env("ASCEND_MOCK_SOC_NAME", k_cases[i].soc, (const char *)NULL);
        CHECK_OK(aclInit(NULL));
        CHECK_OK(aclrtSetDevice(0));
        CHECK_OK(aclrtCreateStream(&g_s));
        CHECK_OK(aclrtBinaryLoadFromFile(TWINS, NULL, &g_bin));
        printf("--- SoC %s\n", k_cases[i].soc);
        RUN_TEST(k_cases[i].fn);
        CHECK_OK(aclrtBinaryUnLoad(g_bin));
        CHECK_OK(aclrtDestroyStream(g_s));
        CHECK_OK(aclrtResetDevice(0));
        CHECK_OK(aclFinalize());
        return TEST_REPORT();
    }
    fprintf(stderr, "unknown KERNEL_SOC_CASE '%s'\n", which);
    return 1;
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *which = getenv("KERNEL_SOC_CASE");
    if (which != NULL) {
        return run_case(which);
    }
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("KERNEL_SOC_CASE", k_cases[i].name, 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return TEST_REPORT();
}
