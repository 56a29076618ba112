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


#endif /* MOCK_MEM_H */
