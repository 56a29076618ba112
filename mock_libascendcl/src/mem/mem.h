/*
 * mem/mem.h - what the memory subsystem (src/mem/: memory, copy, vmm, managed,
 * peer, allocator) offers to the other subsystems: looking up the allocation
 * behind a pointer, the isolation bracket around host-side touches of device
 * memory. Its hooks (aclFinalize, stream teardown) are registered in
 * mem/hooks.c. Every function declared here starts with mem_. Helpers used only inside src/mem/ are in mem/mem_private.h.
 */
#ifndef MOCK_MEM_H
#define MOCK_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"


typedef enum mock_mem_kind {
    MOCK_MEM_UNKNOWN = 0,   /* not ours: plain host memory (malloc, stack, numpy) */
    MOCK_MEM_DEVICE = 1,    /* aclrtMalloc* on device `device` */
    MOCK_MEM_HOST_PINNED = 2 /* aclrtMallocHost* */
} mock_mem_kind;

typedef struct mock_mem_info {
    mock_mem_kind kind;
    int32_t device;   /* for MOCK_MEM_DEVICE */
    uintptr_t base;   /* start of the allocation containing the pointer */
    size_t size;      /* usable bytes of that allocation (after rounding) */
} mock_mem_info;

/* Finds the live allocation containing `ptr`; false (kind UNKNOWN) if none. */
MOCK_HIDDEN bool mem_lookup(const void *ptr, mock_mem_info *out);
/* mem_lookup, and in *left the bytes from ptr to the end of the sub-allocation region
 * containing it (aclmockMemRegionRegister), else to the end of the allocation. */
MOCK_HIDDEN bool mem_lookup_region(const void *ptr, mock_mem_info *out, size_t *left);
/* Isolation mode: device pages are PROT_NONE outside runtime operations.
 * Bracket every host-side touch of device memory with these (refcounted, so
 * nested and concurrent use is fine). No-ops when isolation is off. */
MOCK_HIDDEN void mem_access_begin(const void *ptr, size_t len);
MOCK_HIDDEN void mem_access_end(const void *ptr, size_t len);

/* (m18, additive) Device memory for the higher subsystems (shared buffers, the overflow
 * status area): aclrtMalloc (HUGE_FIRST) / aclrtFree of device memory on the current
 * context's device, with errors, fault injection and the snapshot gate under `fn`. */
MOCK_HIDDEN aclError mem_malloc(const char *fn, void **devPtr, size_t size);
MOCK_HIDDEN aclError mem_free(const char *fn, void *devPtr);
/* Host-side read / write of n bytes at a device (or any runtime-known) address, inside
 * the isolation bracket; false when [p, p+n) is not within one live allocation. */
MOCK_HIDDEN bool mem_read(const void *p, void *out, size_t n);
MOCK_HIDDEN bool mem_write(void *p, const void *in, size_t n);
/* Process snapshot (snapshot.c): save the content of every device allocation (and VMM
 * mapping) into a new image, write an image back into the allocations still live with
 * the same base and size, free an image. */
typedef struct mem_image mem_image;
MOCK_HIDDEN mem_image *mem_image_save(void);
MOCK_HIDDEN void mem_image_restore(const mem_image *img);
MOCK_HIDDEN void mem_image_free(mem_image *img);
/* (kernel, additive; hold.c) The buffers a kernel may touch while its twin runs.
 * mem_hold_open finds the live allocation containing `ptr`, checks that a kernel on
 * `device` may reach it (device, VMM-mapped and managed memory of that device or of a
 * peer with access enabled, registered host memory) and holds it open until
 * mem_hold_close: a reference (an aclrtFree meanwhile cannot unmap the pages) and the
 * isolation access (the pages are accessible under ASCEND_MOCK_ISOLATION=1; read-only
 * mappings stay read-only). No lock is held in between. NULL when refused: *why (if not
 * NULL) then says why, e.g. "is not device memory". `writable` asks for write access. */
typedef struct mem_hold mem_hold;
MOCK_HIDDEN mem_hold *mem_hold_open(const void *ptr, int32_t device, bool writable, const char **why);
MOCK_HIDDEN void mem_hold_close(mem_hold *h);
/* Base and usable size of a held allocation. */
MOCK_HIDDEN void mem_hold_range(const mem_hold *h, uintptr_t *base, size_t *size);
/* After a kernel wrote device memory: wakes value waits, like the end of a copy. */
MOCK_HIDDEN void mem_device_written(void);
/* Device memory the runtime itself keeps (a loaded binary's device copy, the placeholder
 * data of a launch): allocated like aclrtMalloc on `device` (charged to its capacity,
 * zero-filled) but not counted in the program's allocation statistics or leak report.
 * Errors are recorded under fn. Free with mem_runtime_free (ignores NULL). */
MOCK_HIDDEN aclError mem_runtime_alloc(const char *fn, int32_t device, size_t size, void **out);
MOCK_HIDDEN void mem_runtime_free(void *ptr);

/* (ipc, additive) Device memory shared between processes, for src/ipc/ (mem/ipc.c,
 * acl_next_semantics.md §3.1). An exported range of this process's device heap. */
typedef struct mem_ipc_range {
    void *pin;          /* reference on the allocation: mem_ipc_pin_again / mem_ipc_unpin */
    int fd;             /* the device heap's memfd (owned by mem, open until aclFinalize) */
    uint64_t offset;    /* of the range in that file (page aligned) */
    uint64_t length;    /* bytes exported */
    uint32_t page_size; /* of the allocation (reported by the importer's pointer attributes) */
    int32_t device;     /* user id of the allocation's device */
} mem_ipc_range;
/* Validates and pins [devPtr, devPtr+size) for export: device memory from aclrtMalloc*
 * of this process (107000), starting on a page of its allocation (107008), inside it
 * (107000), on a shareable heap (207000). Records the error under `fn`. */
MOCK_HIDDEN aclError mem_ipc_export_range(const char *fn, void *devPtr, size_t size, mem_ipc_range *out);
/* Another reference on a pinned allocation (one per importer); the same pointer. */
MOCK_HIDDEN void *mem_ipc_pin_again(void *pin);
/* True once the pinned allocation was freed by this process (aclrtFree). */
MOCK_HIDDEN bool mem_ipc_pin_freed(void *pin);
/* Drops a pin; the pages are freed with the last one, unless `keep_pages` (aclFinalize
 * while another process still maps them: its mapping keeps them). */
MOCK_HIDDEN void mem_ipc_unpin(void *pin, bool keep_pages);
/* Maps `length` bytes at `offset` of another process's heap memfd `fd` into a free
 * range of `device`'s region (zero-copy) as device memory of `device` (the caller
 * closes fd afterwards). release(arg) runs once the mapping is gone (after
 * mem_ipc_import_unmap and any in-flight copy). Records errors under `fn`. */
MOCK_HIDDEN aclError mem_ipc_import_map(const char *fn, int32_t device, int fd, uint64_t offset, uint64_t length,
                                        uint32_t page_size, void (*release)(void *arg), void *arg, void **out);
/* Ends an imported range (false: `ptr` is not one). */
MOCK_HIDDEN bool mem_ipc_import_unmap(void *ptr);
/* (ipc, additive) VMM shareable handles (vmm.c, acl_next_semantics.md §3.2). */
typedef struct mem_vmm_share_info {
    uint64_t size;              /* bytes of the physical allocation */
    aclrtPhysicalMemProp prop;  /* its properties in the exporter */
    int32_t device;             /* its device (user id in the exporter) */
    uint32_t gen;               /* names the handle in acquire */
} mem_vmm_share_info;
/* Marks a live aclrtMallocPhysical handle of this process as exported (1:1: a second
 * export, or an imported handle, is 107000; a dead handle 107017). */
MOCK_HIDDEN aclError mem_vmm_share_export(const char *fn, aclrtDrvMemHandle handle, mem_vmm_share_info *out);
/* Broker side: the exported handle `handle` of generation `gen` is still held by this
 * process: takes a reference for an importer (*obj, mem_vmm_share_put) and gives its
 * memfd. ACL_SUCCESS or ACL_ERROR_RT_IPC_ERROR; records no error. */
MOCK_HIDDEN aclError mem_vmm_share_acquire(void *handle, uint32_t gen, void **obj, int *fd, mem_vmm_share_info *out);
MOCK_HIDDEN void mem_vmm_share_put(void *obj);
/* Importer: a new handle of this process on the memfd `fd` (owned from here on) of
 * another process's physical memory, on `device`; not counted against this process's
 * device capacity. release(arg) runs (no lock held) when aclrtFreePhysical and every
 * mapping let it go. */
MOCK_HIDDEN aclError mem_vmm_share_import(const char *fn, int fd, const mem_vmm_share_info *info, int32_t device,
                                          void (*release)(void *arg), void *arg, aclrtDrvMemHandle *out);
/* Enables access from `dev` to `peer` (ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS). */
MOCK_HIDDEN void mem_peer_enable(int32_t dev, int32_t peer);

#endif /* MOCK_MEM_H */
