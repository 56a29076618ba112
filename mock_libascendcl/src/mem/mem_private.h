/*
 * mem/mem_private.h - private interface between the memory files of the mock
 * (memory.c: regions, registry, allocation APIs; copy.c: copies, memset,
 * value ops; vmm.c: virtual memory management; peer.c: peer access).
 * No file outside src/mem/ includes it (other subsystems use mem/mem.h).
 * Every function declared here starts with mem_.
 */
#ifndef MOCK_MEM_PRIVATE_H
#define MOCK_MEM_PRIVATE_H

#include "core/core.h"
#include "mem/mem.h"

#include <stdatomic.h>

/* What a registry record describes. */
typedef enum mem_rec_kind {
    MEM_REC_DEVICE = 1,      /* aclrtMalloc* in a device region */
    MEM_REC_HOST_PINNED = 2, /* aclrtMallocHost* */
    MEM_REC_MANAGED = 3,     /* aclrtMemAllocManaged: host and device accessible */
    MEM_REC_HOST_REG = 4,    /* aclrtHostRegister*: user host memory, device mapped */
    MEM_REC_VMM_MAP = 5,     /* aclrtMapMem: physical handle mapped into a reserved VA */
    MEM_REC_IPC = 6          /* aclrtIpcMemImportByKey: another process's device memory (mem/ipc.c) */
} mem_rec_kind;

typedef struct mem_rec mem_rec;
typedef void (*mem_rec_dtor)(mem_rec *rec);

/* One live range of memory the runtime knows about. Records are reference
 * counted: the registry holds one reference while the range is live, and
 * every runtime operation touching it (a synchronous copy, or an async task
 * from enqueue to completion) holds another, so that aclrtFree during an
 * in-flight copy never unmaps pages under the copy (the pages are released
 * when the last reference goes). */
struct mem_rec {
    uintptr_t base;
    size_t size;            /* usable bytes (after aclrtMalloc rounding) */
    size_t span;            /* bytes of address space held (page multiple) */
    uint64_t charged;       /* device capacity it costs (DEVICE: size in whole policy pages) */
    mem_rec_kind kind;
    int32_t device;         /* device of DEVICE / VMM_MAP / MANAGED (home) records, else -1 */
    uint32_t page_size;     /* reported by aclrtPointerGetAttributes */
    uint32_t policy;        /* malloc policy, or host-register flags */
    bool protect;           /* isolation mode applies (PROT_NONE when not accessed) */
    _Atomic bool readonly;  /* device view is read-only (host register READONLY, VMM READ access) */
    _Atomic bool no_access; /* VMM mapping without access for its device */
    bool cap_returned;      /* device capacity already given back (at aclrtFree) */
    atomic_bool ipc_keep_pages; /* exported and still mapped by another process at aclFinalize: do not punch */
    atomic_long refs;
    atomic_bool freed;      /* removed from the registry */
    int access;             /* isolation access count, under the isolation lock */
    mem_rec_dtor dtor;      /* releases the backing memory when refs drops to 0 */
    void *owner;            /* dtor data (e.g. the VMM mapping) */
    /* managed memory attributes (aclrtMemManagedAdvise / PrefetchAsync) */
    int32_t m_read_mostly;
    int32_t m_pref_type, m_pref_id;
    int32_t m_last_type, m_last_id;
    uint64_t m_accessed_by;  /* bit per device (MOCK_MAX_DEVICES = 64 uses all 64 bits) */
    bool m_accessed_by_host; /* ACCESSED_BY advised for the host */
    /* sub-allocation regions (aclmockMemRegionRegister), sorted, disjoint [lo, hi)
     * pairs; under the registry lock (written with it held exclusively) */
    uintptr_t *regions;
    size_t nregions, capregions;
};

/* --- registry (memory.c) --- */
MOCK_HIDDEN mem_rec *mem_rec_new(mem_rec_kind kind, uintptr_t base, size_t size, int32_t device);
/* Inserts into the registry (which takes the initial reference). false when
 * the range overlaps a live record. */
MOCK_HIDDEN bool mem_registry_insert(mem_rec *rec);
/* Removes a live record whose base is exactly `ptr` and whose kind is in
 * `kinds_mask` (bit 1<<kind); returns it with the registry's reference
 * transferred to the caller, or NULL. `*found_kind` gets the kind of a record
 * containing ptr when no exact match exists (0 = none). */
MOCK_HIDDEN mem_rec *mem_registry_remove(const void *ptr, unsigned kinds_mask, int *found_kind,
                                         bool *interior);
/* Registers a new allocation record (the registry takes the caller's
 * reference) and counts it in the live stats: of `device`, or the host-pinned
 * stats when device < 0. On failure the record is released and the error
 * recorded under `fn`. Shared by every allocator (device, host, managed). */
MOCK_HIDDEN aclError mem_register_allocation(const char *fn, mem_rec *rec, int32_t device, uint64_t bytes);
/* Validates the "batch groups" index array of the batch calls
 * (aclrtMemcpyBatch* attrsIndexes, aclrtMemManagedPrefetchBatchAsync
 * prefetchLocIdxs): n in 1..count, idx[0] == 0, strictly increasing, each
 * below count. `idx_name`/`n_name`/`count_name` name the arguments in the
 * messages (ACL_ERROR_INVALID_PARAM). */
MOCK_HIDDEN aclError mem_check_batch_indexes(const char *fn, const size_t *idx, size_t n, size_t count,
                                             const char *idx_name, const char *n_name, const char *count_name);
/* (m18) Every live record whose kind is in kinds_mask, each with a new reference
 * (mem_release each), in a malloc'd array (free it); NULL with *n = 0 when none. */
MOCK_HIDDEN mem_rec **mem_registry_collect(unsigned kinds_mask, size_t *n);
/* Record containing ptr with a new reference, or NULL. */
MOCK_HIDDEN mem_rec *mem_acquire(const void *ptr);
MOCK_HIDDEN void mem_release(mem_rec *rec);
/* True when [ptr, ptr+len) touches runtime-owned address space that is not
 * inside a live record (freed device memory, an unmapped VMM reservation):
 * such an access would fault, so it is refused. */
MOCK_HIDDEN bool mem_in_dead_space(const void *ptr, size_t len);
/* True when [ptr, ptr+len) is mapped in this process (plain host memory). */
MOCK_HIDDEN bool mem_host_mapped(const void *ptr, size_t len);
/* Isolation bracket on a known record (no-op when isolation is off). */
MOCK_HIDDEN void mem_rec_access_begin(mem_rec *rec);
MOCK_HIDDEN void mem_rec_access_end(mem_rec *rec);
MOCK_HIDDEN bool mem_isolation(void);
MOCK_HIDDEN size_t mem_page_size(void);

/* (kernel, additive) Allocates device memory on `device` like aclrtMalloc (policy
 * NORMAL_ONLY), registers and counts it; memory.c. */
MOCK_HIDDEN aclError mem_device_alloc(const char *fn, int32_t device, size_t size, void **out);
/* Removes the record of the allocation at exactly `ptr` (kinds mask as for
 * mem_registry_remove), gives its capacity back and drops the registry's reference,
 * without touching the statistics; false when it is not a live allocation. */
MOCK_HIDDEN bool mem_device_free_quiet(void *ptr);

/* Device capacity accounting (memory.c): true when `bytes` fit. */
MOCK_HIDDEN bool mem_capacity_take(int32_t device, uint64_t bytes);
MOCK_HIDDEN void mem_capacity_give(int32_t device, uint64_t bytes);

static inline bool mem_rec_is_device(const mem_rec *r)
{
    return r != NULL && (r->kind == MEM_REC_DEVICE || r->kind == MEM_REC_VMM_MAP ||
                         r->kind == MEM_REC_MANAGED || r->kind == MEM_REC_HOST_REG || r->kind == MEM_REC_IPC);
}
static inline bool mem_rec_is_host(const mem_rec *r)
{
    return r == NULL || r->kind == MEM_REC_HOST_PINNED || r->kind == MEM_REC_MANAGED ||
           r->kind == MEM_REC_HOST_REG;
}

/* --- hooks (registered in mem/hooks.c, run by core) --- */
/* release hook of aclFinalize, after the contexts are gone (memory.c): frees
 * every allocation, VMM reservation and peer-access state still alive. */
MOCK_HIDDEN void mem_finalize(void);
/* stream_destroyed hook (allocator.c): forgets the allocator registered
 * (aclrtAllocatorRegister) on a stream that is being destroyed. */
MOCK_HIDDEN void mem_allocator_stream_destroyed(mock_stream *s);

/* --- the device heap, for mem/ipc.c (memory.c) --- */
/* The memfd backing `device`'s region (-1: not reserved yet, or not shareable) and the
 * region's base address (offset in the file = address - base). */
MOCK_HIDDEN int mem_region_fd(int32_t device, uintptr_t *base);
/* Address space of `device`'s region without capacity (imported memory): `len` bytes
 * aligned to `align` (a power of two >= the page size). false when none is free. */
MOCK_HIDDEN bool mem_region_take(int32_t device, size_t len, size_t align, uintptr_t *addr);
/* Gives a range from mem_region_take back, with the heap's own PROT_NONE pages under it. */
MOCK_HIDDEN void mem_region_give(int32_t device, uintptr_t addr, size_t len);

/* --- VMM (vmm.c) --- */
/* True when ptr lies in a reserved VMM range (mapped or not). */
MOCK_HIDDEN bool mem_vmm_in_reservation(const void *ptr, size_t len);
/* (m18) True when h is a live physical memory handle (aclrtMallocPhysical). */
MOCK_HIDDEN bool mem_vmm_handle_live(const void *h);
MOCK_HIDDEN void mem_vmm_finalize(void);

/* --- peer access (peer.c) --- */
MOCK_HIDDEN bool mem_peer_enabled(int32_t dev, int32_t peer);
MOCK_HIDDEN void mem_peer_finalize(void);

/* --- copy.c --- */
/* Writers of device memory bracket the write with these so that a ValueWait
 * reading the watched word never races with them; the end call wakes the
 * waiters. */
MOCK_HIDDEN void mem_write_begin(void);
MOCK_HIDDEN void mem_write_end(void);
MOCK_HIDDEN void mem_copy_finalize(void);
/* (m18) aclrtMemcpyAsync under the name `fn` (memory descriptors, offsets: memdesc.c). */
MOCK_HIDDEN aclError mem_memcpy_async(const char *fn, void *dst, size_t destMax, const void *src, size_t count,
                                      aclrtMemcpyKind kind, aclrtStream stream);
/* A descriptor argument (memory descriptors, CMO descriptors): `size` bytes of device
 * memory inside one allocation at `desc`. Else records 100000 (NULL) or 107000 under
 * `fn`, naming the argument `arg` and `size_fn`, the call that gives the size. */
MOCK_HIDDEN aclError mem_check_desc(const char *fn, const char *arg, const void *desc, size_t size,
                                    const char *size_fn);

#endif /* MOCK_MEM_PRIVATE_H */
