/*
 * affine_u8_twin.c - the host twin of the service's model kernel, for the mock runtime.
 *
 * The model (examples/service/app.py) maps every byte of a request through an affine
 * function modulo 256:  y[i] = (scale * x[i] + bias) mod 256, over n bytes. On an Ascend
 * card the service loads the Ascend C binary of this kernel (--kernel PATH); on the mock
 * it builds this file into a host shared object, which stands in for that binary:
 *
 *     cc -shared -fPIC $(python -m pyacl_rt.mock --cflags) affine_u8_twin.c -o affine_u8.so
 *
 * The blocks split the range and are independent. Runs on the stream's worker thread in
 * C (no Python, no GIL), so a request's kernel never holds up the service's event loop.
 */
#include "acl/acl_mock_kernel.h"

ACLMOCK_KERNEL(affine_u8, ACLMOCK_KERNEL_BLOCKS_INDEPENDENT | ACLMOCK_KERNEL_VECTOR,
               ACLMOCK_PTR_IN, ACLMOCK_PTR_OUT, ACLMOCK_VALUE(uint32_t), ACLMOCK_VALUE(uint32_t),
               ACLMOCK_VALUE(uint32_t))
{
    (void)userData;
    /* every argument in its own 8-byte slot (see acl_mock_kernel.h) */
    const struct {
        const uint8_t *x;
        uint8_t *y;
        uint32_t n, pad0;
        uint32_t scale, pad1;
        uint32_t bias, pad2;
    } *a = args;
    uint64_t per = ((uint64_t)a->n + blockDim - 1) / blockDim;
    uint64_t end = (uint64_t)(blockIdx + 1) * per;
    for (uint64_t i = (uint64_t)blockIdx * per; i < a->n && i < end; i++) {
        a->y[i] = (uint8_t)(a->scale * a->x[i] + a->bias);
    }
    return 0;
}
