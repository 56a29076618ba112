/*
 * hold.c - what the kernel subsystem needs of memory (mem/mem.h "kernel, additive"):
 * holding the buffers of a running kernel open (reference + isolation access), and the
 * runtime's own device memory (binary images, placeholder data), which is charged to
 * the device but is not the program's allocation.
 */
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

/* A hold is the record itself, with the reference and the isolation access taken. */
struct mem_hold {
    mem_rec rec;
};

mem_hold *mem_hold_open(const void *ptr, int32_t device, bool writable, const char **why)
{
    const char *dummy;
    if (why == NULL) {
        why = &dummy;
    }
    mem_rec *r = mem_acquire(ptr);
    if (r == NULL) {
        *why = mem_in_dead_space(ptr, 1) ? "is device address space that is not a live allocation (freed or unmapped)"
                                         : "is not device memory";
        return NULL;
    }
    const char *bad = NULL;
    switch (r->kind) {
    case MEM_REC_DEVICE:
    case MEM_REC_VMM_MAP:
        if (r->device != device && !mem_peer_enabled(device, r->device)) {
            bad = "is memory of another device (no peer access)";
        }
        break;
    case MEM_REC_MANAGED:
    case MEM_REC_HOST_REG:
        break;
    default:
        bad = "is host memory the device cannot reach (aclrtMallocHost memory: register it with aclrtHostRegister)";
        break;
    }
    if (bad == NULL && r->device >= 0 && r->kind != MEM_REC_HOST_REG && core_device_lost_code(r->device) != 0) {
        bad = "is memory of a lost device";
    }
    if (bad == NULL && atomic_load(&r->no_access)) {
        bad = "is mapped without access (aclrtMemSetAccess)";
    }
    if (bad == NULL && writable && atomic_load(&r->readonly)) {
        bad = "is read-only memory but the kernel writes it";
    }
    if (bad != NULL) {
        mem_release(r);
        *why = bad;
        return NULL;
    }
    mem_rec_access_begin(r);
    return (mem_hold *)r;
}

void mem_hold_close(mem_hold *h)
{
    if (h == NULL) {
        return;
    }
    mem_rec *r = &h->rec;
    mem_rec_access_end(r);
    mem_release(r);
}

void mem_hold_range(const mem_hold *h, uintptr_t *base, size_t *size)
{
    *base = h->rec.base;
    *size = h->rec.size;
}

void mem_device_written(void)
{
    mem_write_begin();
    mem_write_end();
}

aclError mem_runtime_alloc(const char *fn, int32_t device, size_t size, void **out)
{
    aclError rc = mem_device_alloc(fn, device, size, out);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* the runtime's own memory: not the program's allocation (mem_register_allocation
     * counted it) */
    mock_mem_info mi;
    if (mem_lookup(*out, &mi)) {
        core_stat_add(device, MOCK_STAT_ALLOCATIONS, -1);
        core_stat_add(device, MOCK_STAT_BYTES, -(int64_t)mi.size);
    }
    return ACL_SUCCESS;
}

void mem_runtime_free(void *ptr)
{
    if (ptr != NULL) {
        (void)mem_device_free_quiet(ptr);
    }
}
