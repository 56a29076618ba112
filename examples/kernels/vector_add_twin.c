/*
 * vector_add_twin.c - the host twin of a vector_add kernel, for the mock runtime.
 *
 * On an Ascend card the application loads its Ascend C binary (vector_add.o); on the mock
 * it loads this file built into a host shared object, which stands in for that binary:
 *
 *     cc -shared -fPIC $(python -m pyacl_rt.mock --cflags) vector_add_twin.c -o vector_add.so
 *
 * z[i] = x[i] + y[i] over n floats; the blocks split the range and are independent.
 */
#include "acl/acl_mock_kernel.h"

ACLMOCK_KERNEL(vector_add, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT | ACLMOCK_KERNEL_VECTOR,
               ACLMOCK_PTR_IN, ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint32_t))
{
    (void)userData;
    const struct {
        const float *x, *y;
        float *z;
        uint32_t n;
    } *a = args;
    uint64_t per = ((uint64_t)a->n + blockDim - 1) / blockDim;
    uint64_t end = (uint64_t)(blockIdx + 1) * per;
    for (uint64_t i = (uint64_t)blockIdx * per; i < a->n && i < end; i++) {
        a->z[i] = a->x[i] + a->y[i];
    }
    return 0;
}
