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


#endif /* MOCK_MEM_H */
