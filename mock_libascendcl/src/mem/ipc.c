/*
 * ipc.c - device memory shared between processes (the memory side of
 * aclrtIpcMemGetExportKey / aclrtIpcMemImportByKey / aclrtIpcMemClose; the keys, the
 * pid whitelist and the transport are src/ipc/).
 *
 * Every device heap is a sparse memfd mapped MAP_SHARED (memory.c), so an exported
 * range is simply (the heap's memfd, offset, length). The exporter pins the allocation
 * (a reference on its record) for as long as the export or any importer needs it: an
 * aclrtFree meanwhile ends the allocation for this process (no call reaches it any
 * more, its capacity is returned) but its pages are neither freed nor reused until the
 * last pin goes, so another process never sees freed or foreign memory. The importer
 * maps the same file range MAP_SHARED | MAP_FIXED over an extent of its own device
 * region: a real device pointer there (registry record MEM_REC_IPC), so copies,
 * memsets, bounds checks, isolation and pointer attributes work on it; closing puts
 * the region's own pages back and tells the exporter (callback of src/ipc/).
 */
#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MIB ((size_t)1024 * 1024)

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* -------------------------------------------------------------- exporter */

aclError mem_ipc_export_range(const char *fn, void *devPtr, size_t size, mem_ipc_range *out)
{
    mem_rec *r = mem_acquire(devPtr);
    if (r == NULL || r->kind != MEM_REC_DEVICE) {
        const char *what = r == NULL                     ? "is not device memory of this process"
                           : r->kind == MEM_REC_VMM_MAP ? "is VMM memory (share it with aclrtMemExportToShareableHandle)"
                           : r->kind == MEM_REC_IPC      ? "was imported from another process (only its owner exports it)"
                                                         : "is not device memory from aclrtMalloc";
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'devPtr' (%p) %s", devPtr, what);
    }
    size_t off = (uintptr_t)devPtr - r->base;
    /* FAQ-IPC: the exported memory must start on a page of the allocation; a block that
     * is a slice of a larger one (not on a page boundary) is refused. */
    if (off % r->page_size != 0) {
        uint32_t ps = r->page_size;
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_ADDR_UNALIGNED,
                          "argument 'devPtr' (%p) is %zu bytes into its allocation, not on a %u-byte page boundary "
                          "(a slice of a larger block cannot be exported)",
                          devPtr, off, ps);
    }
    if (size > r->size - off) {
        size_t rs = r->size;
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "%zu bytes at %p overrun the %zu-byte allocation (%zu bytes from its start)", size, devPtr,
                          rs, off);
    }
    uintptr_t base = 0;
    int fd = mem_region_fd(r->device, &base);
    if (fd < 0) {
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "device memory cannot be shared on this system (memfd_create failed)");
    }
    out->pin = r; /* the reference of mem_acquire */
    out->fd = fd;
    out->offset = (uint64_t)((uintptr_t)devPtr - base);
    out->length = size;
    out->page_size = r->page_size;
    out->device = r->device;
    return ACL_SUCCESS;
}

void *mem_ipc_pin_again(void *pin)
{
    mem_rec *r = pin;
    atomic_fetch_add(&r->refs, 1);
    return r;
}

bool mem_ipc_pin_freed(void *pin)
{
    return atomic_load(&((mem_rec *)pin)->freed);
}

void mem_ipc_unpin(void *pin, bool keep_pages)
{
    mem_rec *r = pin;
    if (keep_pages) {
        atomic_store(&r->ipc_keep_pages, true);
    }
    mem_release(r);
}

/* -------------------------------------------------------------- importer */

typedef struct ipc_import {
    void (*release)(void *arg);
    void *arg;
} ipc_import;

/* The last reference to an imported range went: put the region's own pages back, then
 * tell src/ipc/ (which tells the exporter that this process no longer maps it). */
static void import_dtor(mem_rec *r)
{
    ipc_import *im = r->owner;
    mem_region_give(r->device, r->base, r->span);
    if (im->release != NULL) {
        im->release(im->arg);
    }
    free(im);
}

aclError mem_ipc_import_map(const char *fn, int32_t device, int fd, uint64_t offset, uint64_t length,
                            uint32_t page_size, void (*release)(void *arg), void *arg, void **out)
{
    size_t page = mem_page_size();
    if (length == 0 || length > SIZE_MAX - page || offset % page != 0) {
        return core_error(fn, ACL_ERROR_RT_IPC_ERROR, "the exporter described an invalid range");
    }
    size_t span = round_up((size_t)length, page);
    size_t align = span >= 2 * MIB && page_size >= 2 * MIB ? 2 * MIB : page;
    uintptr_t addr = 0;
    if (!mem_region_take(device, span, align, &addr)) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION,
                          "device %d: no free device address range of %zu bytes to map the imported memory", device,
                          span);
    }
    ipc_import *im = calloc(1, sizeof(*im));
    mem_rec *r = mem_rec_new(MEM_REC_IPC, addr, (size_t)length, device);
    if (im == NULL || r == NULL) {
        free(im);
        free(r);
        mem_region_give(device, addr, span);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    r->protect = mem_isolation();
    int prot = r->protect ? PROT_NONE : PROT_READ | PROT_WRITE;
    if (mmap((void *)addr, span, prot, MAP_SHARED | MAP_FIXED, fd, (off_t)offset) == MAP_FAILED) {
        int e = errno;
        free(im);
        free(r);
        mem_region_give(device, addr, span);
        return core_error(fn, ACL_ERROR_RT_IPC_ERROR, "cannot map the exported memory: %s", strerror(e));
    }
    r->span = span;
    r->page_size = page_size;
    r->owner = im;
    r->dtor = import_dtor;
    if (!mem_registry_insert(r)) {
        mem_release(r); /* undoes the mapping (release not set yet) */
        return core_error(fn, ACL_ERROR_RT_INTERNAL_ERROR, "registry insertion failed");
    }
    im->release = release; /* from here on the record owns the import */
    im->arg = arg;
    *out = (void *)addr;
    return ACL_SUCCESS;
}

bool mem_ipc_import_unmap(void *ptr)
{
    int found;
    bool interior;
    mem_rec *r = mem_registry_remove(ptr, 1u << MEM_REC_IPC, &found, &interior);
    if (r == NULL) {
        return false;
    }
    mem_release(r); /* the registry's reference; an in-flight copy may still hold one */
    return true;
}
