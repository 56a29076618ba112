/*
 * multi_card.c - a typical multi-card CANN program: on every visible device,
 * allocate a buffer and fill it from the host; then pass the buffers around
 * the ring of devices with peer-to-peer device-to-device copies; copy back and
 * verify; free everything.
 *
 * Written against the public AscendCL headers only (no mock API), the way a
 * user of CANN writes it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"

#define CHECK(expr)                                                                          \
    do {                                                                                     \
        aclError check_rc_ = (expr);                                                         \
        if (check_rc_ != ACL_SUCCESS) {                                                      \
            const char *check_msg_ = aclGetRecentErrMsg();                                   \
            fprintf(stderr, "%s:%d: %s failed with %d: %s\n", __FILE__, __LINE__, #expr,     \
                    (int)check_rc_, check_msg_ != NULL ? check_msg_ : "(no message)");        \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

#define MAX_DEVICES 64
#define ELEMS (256 * 1024) /* 1 MiB of uint32_t per device */

static uint32_t pattern(uint32_t dev, size_t i)
{
    return ((dev + 1u) * 2654435761u) ^ (uint32_t)i;
}

int main(void)
{
    CHECK(aclInit(NULL));
    uint32_t count = 0;
    CHECK(aclrtGetDeviceCount(&count));
    if (count == 0 || count > MAX_DEVICES) {
        fprintf(stderr, "unexpected device count %u\n", count);
        return 1;
    }
    const size_t bytes = ELEMS * sizeof(uint32_t);
    void *dev_buf[MAX_DEVICES] = {0};
    void *scratch[MAX_DEVICES] = {0};
    uint32_t *host = (uint32_t *)malloc(bytes);
    if (host == NULL) {
        return 1;
    }

    /* 1. allocate on every card and upload a per-card pattern */
    for (uint32_t d = 0; d < count; d++) {
        CHECK(aclrtSetDevice((int32_t)d));
        size_t free_before = 0, total = 0;
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_before, &total));
        CHECK(aclrtMalloc(&dev_buf[d], bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&scratch[d], bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        size_t free_after = 0;
        CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_after, &total));
        if (free_after >= free_before) {
            fprintf(stderr, "device %u: free memory did not shrink (%zu -> %zu)\n", d, free_before, free_after);
            return 1;
        }
        for (size_t i = 0; i < ELEMS; i++) {
            host[i] = pattern(d, i);
        }
        CHECK(aclrtMemcpy(dev_buf[d], bytes, host, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    }

    /* 2. ring exchange: card d receives card (d+1)'s data over peer access */
    for (uint32_t d = 0; d < count; d++) {
        uint32_t src = (d + 1) % count;
        CHECK(aclrtSetDevice((int32_t)d));
        if (src != d) {
            int32_t can = 0;
            CHECK(aclrtDeviceCanAccessPeer(&can, (int32_t)d, (int32_t)src));
            if (!can) {
                fprintf(stderr, "device %u cannot access device %u\n", d, src);
                return 1;
            }
            CHECK(aclrtDeviceEnablePeerAccess((int32_t)src, 0));
        }
        CHECK(aclrtMemcpy(scratch[d], bytes, dev_buf[src], bytes, ACL_MEMCPY_DEVICE_TO_DEVICE));
    }

    /* 3. download and verify */
    size_t errors = 0;
    for (uint32_t d = 0; d < count; d++) {
        uint32_t src = (d + 1) % count;
        CHECK(aclrtSetDevice((int32_t)d));
        memset(host, 0, bytes);
        CHECK(aclrtMemcpy(host, bytes, scratch[d], bytes, ACL_MEMCPY_DEVICE_TO_HOST));
        for (size_t i = 0; i < ELEMS; i++) {
            if (host[i] != pattern(src, i)) {
                if (errors++ < 5) {
                    fprintf(stderr, "device %u element %zu: got %08x want %08x\n", d, i, host[i], pattern(src, i));
                }
            }
        }
    }

    /* 4. release: free, then one aclrtResetDevice per aclrtSetDevice */
    for (uint32_t d = 0; d < count; d++) {
        CHECK(aclrtSetDevice((int32_t)d));
        CHECK(aclrtFree(dev_buf[d]));
        CHECK(aclrtFree(scratch[d]));
    }
    for (uint32_t d = 0; d < count; d++) {
        CHECK(aclrtResetDevice((int32_t)d)); /* step 1 */
        CHECK(aclrtResetDevice((int32_t)d)); /* step 2 */
        CHECK(aclrtResetDevice((int32_t)d)); /* step 3 */
        CHECK(aclrtResetDevice((int32_t)d)); /* step 4 */
    }
    free(host);
    CHECK(aclFinalize());
    if (errors != 0) {
        fprintf(stderr, "%zu mismatches\n", errors);
        return 1;
    }
    printf("multi_card: %u devices, %zu bytes each, ring exchange verified\n", count, bytes);
    return 0;
}
