/*
 * memdesc.c - copies described in device memory: memory-copy descriptors
 * (aclrtGetMemcpyDescSize / aclrtSetMemcpyDesc / aclrtMemcpyAsyncWithDesc) and copies
 * whose addresses are read from pointer slots (aclrtMemcpyAsyncWithOffset).
 *
 * The reference documents neither family beyond its prototype; the mock's rules (README
 * "Memory copy descriptors", mock choices):
 *   - a descriptor is aclrtGetMemcpyDescSize() = 64 bytes of device memory the caller
 *     allocated, for any aclrtMemcpyKind the copy calls accept (H2H..DEFAULT; 100000
 *     otherwise); aclrtSetMemcpyDesc writes {kind, src, dst, count} into it (count > 0,
 *     src/dst not NULL, config reserved: NULL); aclrtMemcpyAsyncWithDesc reads it when
 *     called (a descriptor never set, or set for another kind, is 107000) and performs the
 *     copy exactly like aclrtMemcpyAsync(dst, count, src, count, kind, stream);
 *   - aclrtMemcpyAsyncWithOffset(dst, destMax, dstDataOffset, src, count, srcDataOffset,
 *     kind, stream): dst and src point at pointer slots (host or device memory) holding
 *     the base addresses; the call reads them when called and copies count bytes from
 *     *src + srcDataOffset to *dst + dstDataOffset like aclrtMemcpyAsync(..., destMax,
 *     ..., count, kind, stream).
 */
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

#define MEMCPY_DESC_SIZE 64u
#define MEMCPY_DESC_MAGIC 0x6d63707944657331ULL

typedef struct memcpy_desc {
    uint64_t magic;
    uint64_t kind;
    uint64_t src;
    uint64_t dst;
    uint64_t count;
    uint64_t reserved[3];
} memcpy_desc;
_Static_assert(sizeof(memcpy_desc) == MEMCPY_DESC_SIZE, "descriptor layout");

static aclError check_kind(const char *fn, aclrtMemcpyKind kind)
{
    if ((int)kind < (int)ACL_MEMCPY_HOST_TO_HOST || (int)kind > (int)ACL_MEMCPY_DEFAULT) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'kind' %d is not a supported aclrtMemcpyKind",
                          (int)kind);
    }
    return ACL_SUCCESS;
}

aclError mem_check_desc(const char *fn, const char *arg, const void *desc, size_t size, const char *size_fn)
{
    mock_mem_info info;
    if (desc == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", arg);
    }
    if (!mem_lookup(desc, &info) || info.kind != MOCK_MEM_DEVICE || size > info.size - ((uintptr_t)desc - info.base)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument '%s' (%p) is not %zu bytes of device memory (%s)",
                          arg, desc, size, size_fn);
    }
    return ACL_SUCCESS;
}

static aclError check_desc(const char *fn, const void *desc)
{
    return mem_check_desc(fn, "desc", desc, MEMCPY_DESC_SIZE, "aclrtGetMemcpyDescSize");
}

aclError aclrtGetMemcpyDescSize(aclrtMemcpyKind kind, size_t *descSize)
{
    const char *fn = "aclrtGetMemcpyDescSize";
    MOCK_REQUIRE_NONNULL(fn, descSize);
    aclError rc = check_kind(fn, kind);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    *descSize = MEMCPY_DESC_SIZE;
    return ACL_SUCCESS;
}

aclError aclrtSetMemcpyDesc(void *desc, aclrtMemcpyKind kind, void *srcAddr, void *dstAddr, size_t count,
                            void *config)
{
    const char *fn = "aclrtSetMemcpyDesc";
    MOCK_REQUIRE_NONNULL(fn, srcAddr);
    MOCK_REQUIRE_NONNULL(fn, dstAddr);
    aclError rc = check_kind(fn, kind);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (count == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'count' is 0");
    }
    if (config != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'config' is reserved and must be NULL");
    }
    MOCK_ENTER(fn);
    rc = check_desc(fn, desc);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    memcpy_desc d = {MEMCPY_DESC_MAGIC, (uint64_t)kind, (uint64_t)(uintptr_t)srcAddr, (uint64_t)(uintptr_t)dstAddr,
                     (uint64_t)count, {0}};
    if (!mem_write(desc, &d, sizeof d)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the descriptor memory at %p went away", desc);
    }
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsyncWithDesc(void *desc, aclrtMemcpyKind kind, aclrtStream stream)
{
    const char *fn = "aclrtMemcpyAsyncWithDesc";
    aclError rc = check_kind(fn, kind);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = check_desc(fn, desc);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    memcpy_desc d;
    if (!mem_read(desc, &d, sizeof d) || d.magic != MEMCPY_DESC_MAGIC) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the descriptor at %p was not filled by aclrtSetMemcpyDesc",
                          desc);
    }
    if (d.kind != (uint64_t)kind) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'kind' %d differs from the descriptor's kind %d",
                          (int)kind, (int)d.kind);
    }
    return mem_memcpy_async(fn, (void *)(uintptr_t)d.dst, (size_t)d.count, (const void *)(uintptr_t)d.src,
                            (size_t)d.count, kind, stream);
}

/* Reads the pointer stored at `slot` (host or device memory). */
static aclError read_slot(const char *fn, const char *what, const void *slot, uintptr_t *out)
{
    void *p = NULL;
    if (slot == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", what);
    }
    mock_mem_info info;
    if (mem_lookup(slot, &info)) {
        if (!mem_read(slot, &p, sizeof p)) {
            return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                              "argument '%s' (%p): the pointer slot overruns its allocation", what, slot);
        }
    } else if (mem_host_mapped(slot, sizeof p)) {
        memcpy(&p, slot, sizeof p); /* plain host memory of the caller */
    } else {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument '%s' (%p) is not mapped memory", what, slot);
    }
    *out = (uintptr_t)p;
    return ACL_SUCCESS;
}

aclError aclrtMemcpyAsyncWithOffset(void **dst, size_t destMax, size_t dstDataOffset, const void **src,
                                    size_t count, size_t srcDataOffset, aclrtMemcpyKind kind, aclrtStream stream)
{
    const char *fn = "aclrtMemcpyAsyncWithOffset";
    uintptr_t d = 0, s = 0;
    aclError rc = read_slot(fn, "dst", dst, &d);
    if (rc == ACL_SUCCESS) {
        rc = read_slot(fn, "src", src, &s);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (d == 0 || s == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "the %s pointer slot holds NULL", d == 0 ? "dst" : "src");
    }
    if (d + dstDataOffset < d || s + srcDataOffset < s) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "an offset overflows the address space");
    }
    return mem_memcpy_async(fn, (void *)(d + dstDataOffset), destMax, (const void *)(s + srcDataOffset), count,
                            kind, stream);
}
