/*
 * vector_add.c - the issue 15 "Done when" program: loads a host-twin binary built from C
 * with acl/acl_mock_kernel.h (tests/kernels/twins.c -> twins.so), launches vector_add
 * over 1 MiB of floats per operand on a stream and checks the result.
 *
 * Written against the public AscendCL headers the way a CANN user writes it with
 * separate compilation (KRN#Kernel加载与执行接口调用流程): load the binary, get the
 * kernel by name, build its argument list, launch, unload. On a card the same code
 * loads the Ascend C .o; on the mock it loads the twin object (its path is the only
 * difference, given by the build as MOCK_TEST_KERNEL_DIR here).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "acl/acl.h"

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        aclError check_rc_ = (expr);                                                         \
        if (check_rc_ != ACL_SUCCESS) {                                                      \
            const char *check_msg_ = aclGetRecentErrMsg();                                   \
            fprintf(stderr, "%s:%d: %s failed with %d: %s\n", __FILE__, __LINE__, #expr,     \
                    (int)check_rc_, check_msg_ != NULL ? check_msg_ : "(no message)");        \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

#define BYTES (1u << 20)                /* 1 MiB per vector */
#define COUNT (BYTES / sizeof(float))   /* 262144 floats */
#define BLOCKS 48u                      /* the vector cores of an Atlas A2 */

int main(void)
{
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    aclrtStream stream = NULL;
    CHECK(aclrtCreateStream(&stream));

    aclrtBinHandle bin = NULL;
    CHECK(aclrtBinaryLoadFromFile(MOCK_TEST_KERNEL_DIR "/twins.so", NULL, &bin));
    aclrtFuncHandle vector_add = NULL;
    CHECK(aclrtBinaryGetFunction(bin, "vector_add", &vector_add));

    float *hx = NULL, *hy = NULL, *hz = NULL;
    void *dx = NULL, *dy = NULL, *dz = NULL;
    CHECK(aclrtMallocHost((void **)&hx, BYTES));
    CHECK(aclrtMallocHost((void **)&hy, BYTES));
    CHECK(aclrtMallocHost((void **)&hz, BYTES));
    CHECK(aclrtMalloc(&dx, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dy, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dz, BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    for (uint32_t i = 0; i < COUNT; i++) {
        hx[i] = (float)i;
        hy[i] = 0.5f * (float)(COUNT - i);
    }
    CHECK(aclrtMemcpyAsync(dx, BYTES, hx, BYTES, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtMemcpyAsync(dy, BYTES, hy, BYTES, ACL_MEMCPY_HOST_TO_DEVICE, stream));

    /* z = x + y: three device pointers and the element count */
    aclrtArgsHandle args = NULL;
    aclrtParamHandle p = NULL;
    uint32_t n = COUNT;
    CHECK(aclrtKernelArgsInit(vector_add, &args));
    CHECK(aclrtKernelArgsAppend(args, &dx, sizeof dx, &p));
    CHECK(aclrtKernelArgsAppend(args, &dy, sizeof dy, &p));
    CHECK(aclrtKernelArgsAppend(args, &dz, sizeof dz, &p));
    CHECK(aclrtKernelArgsAppend(args, &n, sizeof n, &p));
    CHECK(aclrtKernelArgsFinalize(args));
    CHECK(aclrtLaunchKernelWithConfig(vector_add, BLOCKS, stream, NULL, args, NULL));

    CHECK(aclrtMemcpyAsync(hz, BYTES, dz, BYTES, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));

    uint32_t bad = 0;
    for (uint32_t i = 0; i < COUNT; i++) {
        if (hz[i] != hx[i] + hy[i]) {
            if (bad++ < 5) {
                fprintf(stderr, "z[%u] = %g, expected %g\n", i, (double)hz[i], (double)(hx[i] + hy[i]));
            }
        }
    }

    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtFree(dx));
    CHECK(aclrtFree(dy));
    CHECK(aclrtFree(dz));
    CHECK(aclrtFreeHost(hx));
    CHECK(aclrtFreeHost(hy));
    CHECK(aclrtFreeHost(hz));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    if (bad != 0) {
        fprintf(stderr, "vector_add: %u of %u results wrong\n", bad, (unsigned)COUNT);
        return 1;
    }
    printf("vector_add: %u floats (%u bytes per vector) in %u blocks: ok\n", (unsigned)COUNT, BYTES, BLOCKS);
    return 0;
}
