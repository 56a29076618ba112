/*
 * twins.c - host twins used by the kernel tests and example programs, built into
 * twins.so (CMakeLists.txt builds every C file of tests/kernels into <name>.so). Written the
 * way a CI user writes the twins of their Ascend C kernels, with
 * acl/acl_mock_kernel.h only (plus the launch-info call, which needs libascendcl).
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "acl/acl_mock_kernel.h"

/* A global the tests reach through aclrtBinaryGetGlobal (the object's host variable). */
float twins_scale_factor = 2.0f;

/* z = x + y over n floats, the blocks splitting the range (independent blocks). */
ACLMOCK_KERNEL_WITH_COST(vector_add, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT | ACLMOCK_KERNEL_VECTOR, 1000u,
                         ACLMOCK_PTR_IN, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint32_t))
{
    (void)userData;
    const struct {
        const float *x, *y;
        float *z;
        uint64_t n; /* appended as uint32_t: its slot is 8 bytes, the padding zero */
    } *a = args;
    uint64_t per = (a->n + blockDim - 1) / blockDim;
    uint64_t end = (blockIdx + 1) * per < a->n ? (blockIdx + 1) * per : a->n;
    for (uint64_t i = blockIdx * per; i < end; i++) {
        a->z[i] = a->x[i] + a->y[i];
    }
    return 0;
}

/* x[i] *= factor * twins_scale_factor, in order (blocks are not independent). */
ACLMOCK_KERNEL(scale, ACLMOCK_KERNEL_AICORE, ACLMOCK_PTR_INOUT, ACLMOCK_VALUE(float), ACLMOCK_VALUE(uint64_t))
{
    (void)userData;
    float *x = ACLMOCK_ARG_AT(args, float *, 0);
    float factor = ACLMOCK_ARG_AT(args, float, 8);
    uint64_t n = ACLMOCK_ARG_AT(args, uint64_t, 16);
    for (uint64_t i = blockIdx; i < n; i += blockDim) {
        x[i] *= factor * twins_scale_factor;
    }
    return 0;
}

/* order[k] = blockIdx for the k-th block run (sequential blocks keep the order). */
ACLMOCK_KERNEL(record_order, ACLMOCK_KERNEL_AICORE, ACLMOCK_PTR_INOUT)
{
    (void)userData;
    (void)blockDim;
    uint32_t *order = ACLMOCK_ARG_AT(args, uint32_t *, 0);
    uint32_t k = order[0]++;
    order[1 + k] = blockIdx;
    return 0;
}

/* Reads a placeholder: args = {int32_t *out, const struct {int32_t a, b;} *ph, uint32_t k}. */
ACLMOCK_KERNEL(placeholder_sum, 0, ACLMOCK_PTR_OUT, ACLMOCK_PTR_IN, ACLMOCK_VALUE(uint32_t))
{
    (void)userData;
    (void)blockIdx;
    (void)blockDim;
    int32_t *out = ACLMOCK_ARG_AT(args, int32_t *, 0);
    const int32_t *ph = ACLMOCK_ARG_AT(args, const int32_t *, 8);
    uint32_t k = ACLMOCK_ARG_AT(args, uint32_t, 16);
    out[0] = ph[0] + ph[1] + (int32_t)k;
    return 0;
}

/* Writes far past the end of its buffer: a fault the mock must catch. */
ACLMOCK_KERNEL(wild_write, ACLMOCK_KERNEL_VECTOR, ACLMOCK_PTR_OUT)
{
    (void)userData;
    (void)blockDim;
    volatile uint8_t *p = ACLMOCK_ARG_AT(args, uint8_t *, 0);
    p[(size_t)(blockIdx + 1) << 36] = 1; /* 64 GiB on: unmapped device address space */
    return 0;
}

/* Returns what its argument says (0 = success). */
ACLMOCK_KERNEL(returns, ACLMOCK_KERNEL_CUBE, ACLMOCK_VALUE(int32_t))
{
    (void)userData;
    (void)blockDim;
    int32_t rc = ACLMOCK_ARG_AT(args, int32_t, 0);
    return blockIdx == 0 ? rc : 0;
}

/* Sleeps 3 ms per block (for the launch timeout attribute). */
ACLMOCK_KERNEL(sleepy, ACLMOCK_KERNEL_AICORE)
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    struct timespec ts = {0, 3000000};
    nanosleep(&ts, NULL);
    return 0;
}

/* out[blockIdx] = the launch information the twin sees (grid, block, dynamic UB). */
ACLMOCK_KERNEL(launch_info, ACLMOCK_KERNEL_SIMT | ACLMOCK_KERNEL_VECTOR, ACLMOCK_PTR_OUT)
{
    (void)userData;
    (void)blockDim;
    uint32_t *out = ACLMOCK_ARG_AT(args, uint32_t *, 0);
    aclmockKernelLaunchInfo info;
    if (aclmockKernelGetLaunchInfo(&info) != 0 || info.blockIdx != blockIdx) {
        return 1;
    }
    uint32_t *row = out + 8 * blockIdx;
    row[0] = info.gridDim[0];
    row[1] = info.gridDim[1];
    row[2] = info.gridDim[2];
    row[3] = info.blockDim[0] * info.blockDim[1] * info.blockDim[2];
    row[4] = (uint32_t)info.dynUbufSize;
    row[5] = info.numBlocks;
    row[6] = (uint32_t)info.device;
    row[7] = strcmp(info.name, "launch_info") == 0;
    return 0;
}

/* Any number of arguments (a hand-written descriptor without a parameter list):
 * argument i must hold the value i; the first holds the count. */
static int32_t many_args_fn(void *args, uint32_t blockIdx, uint32_t blockDim, void *userData)
{
    (void)userData;
    (void)blockIdx;
    (void)blockDim;
    const uint64_t *v = args;
    for (uint64_t i = 1; i < v[0]; i++) {
        if (v[i] != i) {
            return 3;
        }
    }
    return 0;
}
static const aclmockKernelDesc many_args_desc = {
    ACLMOCK_KERNEL_DESC_VERSION, 0u, "many_args", many_args_fn, NULL, ACLMOCK_PARAMS_UNKNOWN, 0u, NULL, 0u, NULL,
    {NULL, NULL, NULL, NULL}};
ACLMOCK_KERNEL_EXPORT(many_args_desc);

/* A kernel without arguments. */
ACLMOCK_KERNEL(nothing, ACLMOCK_KERNEL_MIX | ACLMOCK_KERNEL_SCHED_BATCH)
{
    (void)args;
    (void)blockIdx;
    (void)blockDim;
    (void)userData;
    return 0;
}
