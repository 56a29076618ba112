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
/* Isolation mode: device pages are PROT_NONE outside runtime operations.
 * Bracket every host-side touch of device memory with these (refcounted, so
 * nested and concurrent use is fine). No-ops when isolation is off. */
MOCK_HIDDEN void mem_access_begin(const void *ptr, size_t len);
MOCK_HIDDEN void mem_access_end(const void *ptr, size_t len);

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


#endif /* MOCK_MEM_H */
