/*
 * vmm.c - virtual memory management of the mock (acl_abi.md §1.9):
 * aclrtReserveMemAddress(+NoUCMemory) / aclrtReleaseMemAddress reserve and
 * release address space; aclrtMallocPhysical / aclrtFreePhysical create
 * "physical" device memory handles (a memfd each, counted against the device
 * capacity); aclrtMapMem / aclrtMemMapNoAccess map a handle into a reservation
 * with mmap(MAP_SHARED | MAP_FIXED), so two mappings of one handle really alias
 * the same bytes; aclrtUnmapMem undoes it; aclrtMemSetAccess / GetAccess keep
 * per-location access flags; granularity, properties and retain-handle
 * queries complete the set. Mapped ranges are registry records
 * (MEM_REC_VMM_MAP), so copies, bounds checks and isolation treat them like
 * any other device memory.
 *
 * Shareable handles (for src/ipc/, acl_next_semantics.md §3.2): a handle from
 * aclrtMallocPhysical can be exported once (1:1); another process that imports it
 * gets a handle of its own on the same memfd (zero-copy). The exporter's handle stays
 * alive (memory and capacity) while an importer holds it, whatever order the processes
 * free in; the importer's handle tells src/ipc/ when it is gone.
 */
#include "core/core.h"
#include "mem/mem_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define VMM_GRANULARITY ((size_t)2 * 1024 * 1024)
#define VMM_GRANULARITY_1G ((size_t)1024 * 1024 * 1024)
#define PHYS_MAGIC 0x50485953u /* "PHYS" */

typedef struct phys {
    uint32_t magic;
    int fd;
    size_t size;
    int32_t device;
    aclrtPhysicalMemProp prop;
    long refs;   /* user references (malloc + retains) + mappings + importers, under g_vmm_mu */
    long user;   /* user references only */
    uint32_t gen;      /* unique per handle of this process: what an import names */
    bool exported;     /* aclrtMemExportToShareableHandle(V2) made it shareable (1:1) */
    bool imported;     /* aclrtMemImportFromShareableHandle(V2): another process's memory */
    void (*release)(void *arg); /* imported: called (no lock held) when it is freed */
    void *release_arg;
} phys;

/* A release callback that must run after g_vmm_mu is dropped (it talks to another
 * process through src/ipc/). */
typedef struct phys_pending {
    void (*fn)(void *arg);
    void *arg;
} phys_pending;

static void pending_run(phys_pending *pend)
{
    if (pend->fn != NULL) {
        pend->fn(pend->arg);
        pend->fn = NULL;
    }
}

typedef struct resv {
    uintptr_t base;
    size_t size;
    void *map_base; /* what mmap returned (for munmap) */
    size_t map_size;
    size_t nmaps;   /* live mappings inside */
    int32_t map_device;   /* while nmaps > 0: the device of the handles mapped */
    bool map_imported;    /* while nmaps > 0: whether they are imported handles */
} resv;

typedef struct vmm_map {
    phys *ph;
    resv *rv;
    /* access flags per device (index 0..MOCK_MAX_DEVICES-1) and host (last) */
    uint8_t access[MOCK_MAX_DEVICES + 1];
} vmm_map;

static mock_rwlock g_vmm_rw = MOCK_RWLOCK_INIT(MOCK_LOCK_VMM_RESERVATIONS); /* reservations */
static mock_mutex g_vmm_mu = MOCK_MUTEX_INIT(MOCK_LOCK_VMM_HANDLES); /* handles, refs */
static resv **g_resv;
static size_t g_nresv, g_capresv;
static mock_registry g_phys = MOCK_REGISTRY_EMPTY; /* live physical handles */
static uint32_t g_phys_gen;                        /* under g_vmm_mu */

static bool grow(void ***arr, size_t *cap, size_t n)
{
    if (n < *cap) {
        return true;
    }
    size_t ncap = *cap ? *cap * 2 : 16;
    void **p = realloc(*arr, ncap * sizeof(void *));
    if (p == NULL) {
        return false;
    }
    *arr = p;
    *cap = ncap;
    return true;
}

/* ------------------------------------------------------------ reservations */

static resv *resv_find_locked(uintptr_t p, size_t len)
{
    for (size_t i = 0; i < g_nresv; i++) {
        resv *r = g_resv[i];
        if (p >= r->base && p - r->base < r->size && len <= r->size - (p - r->base)) {
            return r;
        }
    }
    return NULL;
}

MOCK_HIDDEN bool mem_vmm_in_reservation(const void *ptr, size_t len)
{
    uintptr_t p = (uintptr_t)ptr, e = p + (len ? len : 1);
    bool hit = false;
    core_rwlock_rdlock(&g_vmm_rw);
    for (size_t i = 0; i < g_nresv && !hit; i++) {
        if (p < g_resv[i]->base + g_resv[i]->size && e > g_resv[i]->base) {
            hit = true;
        }
    }
    core_rwlock_unlock(&g_vmm_rw);
    return hit;
}

static aclError reserve_common(const char *fn, void **virPtr, size_t size, size_t alignment, void *expectPtr,
                               uint64_t flags)
{
    (void)flags; /* page-type hints; every reservation behaves the same here */
    MOCK_REQUIRE_NONNULL(fn, virPtr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'alignment' %zu is not a power of two", alignment);
    }
    MOCK_ENTER(fn);
    size_t align = alignment > VMM_GRANULARITY ? alignment : VMM_GRANULARITY;
    size_t rsize = (size + VMM_GRANULARITY - 1) / VMM_GRANULARITY * VMM_GRANULARITY;
    if (rsize < size || rsize + align < rsize) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "size %zu is too large", size);
    }
    void *m = MAP_FAILED;
    size_t msize = rsize;
    uintptr_t base = 0;
    if (expectPtr != NULL && ((uintptr_t)expectPtr % align) == 0) {
        m = mmap(expectPtr, rsize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        if (m != MAP_FAILED && m != expectPtr) {
            munmap(m, rsize); /* old kernels ignore NOREPLACE: treat as a hint */
            m = MAP_FAILED;
        }
        base = (uintptr_t)m;
    }
    if (m == MAP_FAILED) {
        msize = rsize + align;
        m = mmap(NULL, msize, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot reserve %zu bytes of address space: %s",
                              rsize, strerror(errno));
        }
        base = ((uintptr_t)m + align - 1) / align * align;
    }
    resv *r = calloc(1, sizeof(*r));
    bool ok = false;
    core_rwlock_wrlock(&g_vmm_rw);
    if (r != NULL && grow((void ***)&g_resv, &g_capresv, g_nresv)) {
        r->base = base;
        r->size = rsize;
        r->map_base = m;
        r->map_size = msize;
        g_resv[g_nresv++] = r;
        ok = true;
    }
    core_rwlock_unlock(&g_vmm_rw);
    if (!ok) {
        free(r);
        munmap(m, msize);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    *virPtr = (void *)base;
    return ACL_SUCCESS;
}

aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr, uint64_t flags)
{
    return reserve_common("aclrtReserveMemAddress", virPtr, size, alignment, expectPtr, flags);
}

aclError aclrtReserveMemAddressNoUCMemory(void **virPtr, size_t size, size_t alignment, void *expectPtr,
                                          uint64_t flags)
{
    return reserve_common("aclrtReserveMemAddressNoUCMemory", virPtr, size, alignment, expectPtr, flags);
}

aclError aclrtReleaseMemAddress(void *virPtr)
{
    const char *fn = "aclrtReleaseMemAddress";
    MOCK_REQUIRE_NONNULL(fn, virPtr);
    MOCK_ENTER(fn);
    core_rwlock_wrlock(&g_vmm_rw);
    size_t i;
    for (i = 0; i < g_nresv; i++) {
        if (g_resv[i]->base == (uintptr_t)virPtr) {
            break;
        }
    }
    resv *r = NULL; /* removed from the list when it has no mapping */
    size_t nmaps = 0;
    if (i < g_nresv) {
        core_mutex_lock(&g_vmm_mu);
        nmaps = g_resv[i]->nmaps;
        core_mutex_unlock(&g_vmm_mu);
        if (nmaps == 0) {
            r = g_resv[i];
            g_resv[i] = g_resv[--g_nresv];
        }
    }
    core_rwlock_unlock(&g_vmm_rw);
    if (nmaps != 0) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the range at %p still has %zu mapping(s): call aclrtUnmapMem first", virPtr, nmaps);
    }
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "pointer %p is not the start of a reserved address range",
                          virPtr);
    }
    munmap(r->map_base, r->map_size);
    free(r);
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------- physical handles */

/* Validates a handle; with `ref` takes a reference. g_vmm_mu held. */
static phys *phys_find_locked(const void *h)
{
    return core_registry_find(&g_phys, h);
}

bool mem_vmm_handle_live(const void *h)
{
    core_mutex_lock(&g_vmm_mu);
    bool live = h != NULL && phys_find_locked(h) != NULL;
    core_mutex_unlock(&g_vmm_mu);
    return live;
}

/* Drops one reference; destroys at zero. g_vmm_mu held. An imported handle's release
 * callback is left in *pend, for the caller to run after unlocking (pending_run). */
static void phys_unref_locked(phys *p, phys_pending *pend)
{
    if (--p->refs > 0) {
        return;
    }
    core_registry_erase(&g_phys, p);
    close(p->fd);
    if (p->imported) {
        pend->fn = p->release; /* the exporter's device keeps the capacity and the stats */
        pend->arg = p->release_arg;
    } else {
        mem_capacity_give(p->device, p->size);
        core_stat_add(p->device, MOCK_STAT_ALLOCATIONS, -1);
        core_stat_add(p->device, MOCK_STAT_BYTES, -(int64_t)p->size);
    }
    p->magic = 0;
    free(p);
}

static bool attr_is_1g(int attr)
{
    return attr == ACL_HBM_MEM_HUGE1G || attr == ACL_HBM_MEM_P2P_HUGE1G || attr == ACL_MEM_HUGE1G ||
           attr == ACL_MEM_P2P_HUGE1G;
}

static aclError check_prop(const char *fn, const aclrtPhysicalMemProp *prop)
{
    if ((int)prop->handleType != ACL_MEM_HANDLE_TYPE_NONE && (int)prop->handleType != ACL_MEM_HANDLE_TYPE_POSIX) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "prop->handleType %d is not an aclrtMemHandleType",
                          (int)prop->handleType);
    }
    if ((int)prop->allocationType != ACL_MEM_ALLOCATION_TYPE_PINNED) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "prop->allocationType %d is not ACL_MEM_ALLOCATION_TYPE_PINNED",
                          (int)prop->allocationType);
    }
    if ((int)prop->memAttr < ACL_DDR_MEM || (int)prop->memAttr > ACL_MEM_P2P_HUGE1G) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "prop->memAttr %d is not an aclrtMemAttr", (int)prop->memAttr);
    }
    if ((int)prop->location.type != ACL_MEM_LOCATION_TYPE_DEVICE) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "prop->location.type must be ACL_MEM_LOCATION_TYPE_DEVICE");
    }
    return ACL_SUCCESS;
}

static size_t granularity_of(const aclrtPhysicalMemProp *prop)
{
    return attr_is_1g((int)prop->memAttr) ? VMM_GRANULARITY_1G : VMM_GRANULARITY;
}

aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const aclrtPhysicalMemProp *prop,
                             uint64_t flags)
{
    const char *fn = "aclrtMallocPhysical";
    (void)flags; /* reserved */
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_REQUIRE_NONNULL(fn, prop);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    aclError rc = check_prop(fn, prop);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    if (prop->location.id > (uint32_t)INT32_MAX) {
        return core_error(fn, ACL_ERROR_RT_INVALID_DEVICEID, "prop->location.id %u is invalid", prop->location.id);
    }
    int32_t dev = (int32_t)prop->location.id;
    rc = core_device_check(fn, dev);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    size_t gran = granularity_of(prop);
    if (size % gran != 0) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'size' %zu is not a multiple of the allocation granularity %zu", size, gran);
    }
    if (!mem_capacity_take(dev, size)) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of device memory on device %d: %zu bytes requested",
                          dev, size);
    }
    int fd = memfd_create("acl_mock_phys", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        mem_capacity_give(dev, size);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot create physical memory: %s", strerror(e));
    }
    phys *p = calloc(1, sizeof(*p));
    bool ok = false;
    core_mutex_lock(&g_vmm_mu);
    if (p != NULL && core_registry_insert(&g_phys, p)) {
        p->magic = PHYS_MAGIC;
        p->gen = ++g_phys_gen;
        p->fd = fd;
        p->size = size;
        p->device = dev;
        p->prop = *prop;
        p->refs = 1;
        p->user = 1;
        ok = true;
    }
    core_mutex_unlock(&g_vmm_mu);
    if (!ok) {
        free(p);
        close(fd);
        mem_capacity_give(dev, size);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    core_stat_add(dev, MOCK_STAT_ALLOCATIONS, 1);
    core_stat_add(dev, MOCK_STAT_BYTES, (int64_t)size);
    *handle = p;
    return ACL_SUCCESS;
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle)
{
    const char *fn = "aclrtFreePhysical";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    phys_pending pend = {NULL, NULL};
    core_mutex_lock(&g_vmm_mu);
    phys *p = phys_find_locked(handle);
    bool live = p != NULL && p->user > 0;
    if (live) {
        /* Memory still mapped (or imported by another process) stays alive until its
         * last aclrtUnmapMem (or that process's aclrtFreePhysical, §3.2). */
        p->user--;
        phys_unref_locked(p, &pend);
    }
    core_mutex_unlock(&g_vmm_mu);
    pending_run(&pend);
    if (!live) {
        return core_error(fn, ACL_ERROR_RT_INVALID_HANDLE, "argument 'handle' (%p) is not a live physical memory handle",
                          handle);
    }
    return ACL_SUCCESS;
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop, aclrtMemGranularityOptions option,
                                          size_t *granularity)
{
    const char *fn = "aclrtMemGetAllocationGranularity";
    MOCK_REQUIRE_NONNULL(fn, prop);
    MOCK_REQUIRE_NONNULL(fn, granularity);
    if ((int)option != ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM && (int)option != ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'option' %d is not MINIMUM or RECOMMENDED", (int)option);
    }
    aclError rc = check_prop(fn, prop);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    *granularity = granularity_of(prop);
    return ACL_SUCCESS;
}

aclError aclrtMemGetAllocationPropertiesFromHandle(aclrtDrvMemHandle handle, aclrtPhysicalMemProp *prop)
{
    const char *fn = "aclrtMemGetAllocationPropertiesFromHandle";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_REQUIRE_NONNULL(fn, prop);
    MOCK_ENTER(fn);
    core_mutex_lock(&g_vmm_mu);
    phys *p = phys_find_locked(handle);
    if (p != NULL) {
        *prop = p->prop;
    }
    core_mutex_unlock(&g_vmm_mu);
    if (p == NULL) {
        return core_error(fn, ACL_ERROR_RT_INVALID_HANDLE, "argument 'handle' (%p) is not a live physical memory handle",
                          handle);
    }
    return ACL_SUCCESS;
}

/* --------------------------------------------------------------- mapping */

static void apply_prot(mem_rec *r)
{
    vmm_map *m = r->owner;
    uint8_t a = m->access[r->device];
    r->readonly = a == ACL_RT_MEM_ACCESS_FLAGS_READ;
    r->no_access = a == ACL_RT_MEM_ACCESS_FLAGS_NONE;
    if (!r->protect) {
        int prot = a == ACL_RT_MEM_ACCESS_FLAGS_NONE ? PROT_NONE
                   : a == ACL_RT_MEM_ACCESS_FLAGS_READ ? PROT_READ
                                                       : PROT_READ | PROT_WRITE;
        mprotect((void *)r->base, r->size, prot);
    }
}

static void map_dtor(mem_rec *r)
{
    vmm_map *m = r->owner;
    /* Put the reservation's PROT_NONE placeholder back over the range. */
    mmap((void *)r->base, r->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    phys_pending pend = {NULL, NULL};
    core_mutex_lock(&g_vmm_mu);
    m->rv->nmaps--;
    phys_unref_locked(m->ph, &pend);
    core_mutex_unlock(&g_vmm_mu);
    pending_run(&pend);
    free(m);
}

/* Undoes what map_common took before it failed: the reservation's mapping count,
 * the handle reference, the bookkeeping. */
static void map_undo(vmm_map *m)
{
    phys_pending pend = {NULL, NULL};
    core_mutex_lock(&g_vmm_mu);
    m->rv->nmaps--;
    phys_unref_locked(m->ph, &pend);
    core_mutex_unlock(&g_vmm_mu);
    pending_run(&pend);
    free(m);
}

static aclError map_common(const char *fn, void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
                           uint64_t flags, bool no_access)
{
    (void)flags; /* reserved */
    MOCK_REQUIRE_NONNULL(fn, virPtr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    if ((uintptr_t)virPtr % VMM_GRANULARITY != 0 || size % VMM_GRANULARITY != 0 || offset % VMM_GRANULARITY != 0) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "'virPtr', 'size' and 'offset' must be multiples of the granularity (%zu)", VMM_GRANULARITY);
    }
    vmm_map *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    core_rwlock_rdlock(&g_vmm_rw);
    resv *rv = resv_find_locked((uintptr_t)virPtr, size);
    core_mutex_lock(&g_vmm_mu);
    phys *p = phys_find_locked(handle);
    aclError rc = ACL_SUCCESS;
    if (rv == NULL) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "range of %zu bytes at %p is not inside a reserved address range",
                        size, virPtr);
    } else if (p == NULL || p->user == 0) {
        rc = core_error(fn, ACL_ERROR_RT_INVALID_HANDLE, "argument 'handle' (%p) is not a live physical memory handle",
                        handle);
    } else if (offset > p->size || size > p->size - offset) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "offset %zu + size %zu exceed the %zu-byte physical allocation",
                        offset, size, p->size);
    } else if (rv->nmaps > 0 && rv->map_device != p->device) {
        /* VMM#aclrtMapMem: one reserved range does not map handles of two devices */
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                        "the reserved range already maps memory of device %d; this handle is on device %d",
                        rv->map_device, p->device);
    } else if (rv->nmaps > 0 && rv->map_imported != p->imported) {
        /* ... nor mixes aclrtMallocPhysical handles with imported ones */
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                        "the reserved range already maps %s handles; this one is %s (do not mix them in one range)",
                        rv->map_imported ? "imported" : "aclrtMallocPhysical",
                        p->imported ? "imported" : "from aclrtMallocPhysical");
    } else {
        p->refs++;
        rv->map_device = p->device;
        rv->map_imported = p->imported;
        rv->nmaps++;
    }
    core_mutex_unlock(&g_vmm_mu);
    core_rwlock_unlock(&g_vmm_rw);
    if (rc != ACL_SUCCESS) {
        free(m);
        return rc;
    }
    m->ph = p;
    m->rv = rv;
    mem_rec *r = mem_rec_new(MEM_REC_VMM_MAP, (uintptr_t)virPtr, size, p->device);
    if (r == NULL) {
        map_undo(m);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    r->span = size;
    r->owner = m;
    r->protect = mem_isolation();
    r->page_size = (uint32_t)granularity_of(&p->prop);
    for (int i = 0; i <= MOCK_MAX_DEVICES; i++) {
        m->access[i] = ACL_RT_MEM_ACCESS_FLAGS_NONE;
    }
    if (!no_access) {
        m->access[p->device] = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
    }
    /* Insert first (refuses an overlap with an existing mapping), then map. */
    if (!mem_registry_insert(r)) {
        free(r);
        map_undo(m);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "range of %zu bytes at %p is already mapped", size, virPtr);
    }
    int prot = (r->protect || no_access) ? PROT_NONE : PROT_READ | PROT_WRITE;
    void *got = mmap(virPtr, size, prot, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset);
    if (got == MAP_FAILED) {
        int e = errno;
        int found;
        bool interior;
        mem_rec *x = mem_registry_remove(virPtr, 1u << MEM_REC_VMM_MAP, &found, &interior);
        (void)x;
        r->dtor = NULL;
        mem_release(r);
        map_undo(m);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot map physical memory: %s", strerror(e));
    }
    r->dtor = map_dtor;
    apply_prot(r);
    return ACL_SUCCESS;
}

aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle, uint64_t flags)
{
    return map_common("aclrtMapMem", virPtr, size, offset, handle, flags, false);
}

aclError aclrtMemMapNoAccess(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle, uint64_t flags)
{
    return map_common("aclrtMemMapNoAccess", virPtr, size, offset, handle, flags, true);
}

aclError aclrtUnmapMem(void *virPtr)
{
    const char *fn = "aclrtUnmapMem";
    MOCK_REQUIRE_NONNULL(fn, virPtr);
    MOCK_ENTER(fn);
    int found;
    bool interior;
    mem_rec *r = mem_registry_remove(virPtr, 1u << MEM_REC_VMM_MAP, &found, &interior);
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "pointer %p is not the start of a mapping", virPtr);
    }
    mem_release(r);
    return ACL_SUCCESS;
}

static int loc_index(const aclrtMemLocation *loc)
{
    if ((int)loc->type == ACL_MEM_LOCATION_TYPE_HOST) {
        return MOCK_MAX_DEVICES;
    }
    if ((int)loc->type == ACL_MEM_LOCATION_TYPE_DEVICE && loc->id < (uint32_t)core_config_get()->visible_count) {
        return (int)loc->id;
    }
    return -1;
}

aclError aclrtMemSetAccess(void *virPtr, size_t size, aclrtMemAccessDesc *desc, size_t count)
{
    const char *fn = "aclrtMemSetAccess";
    MOCK_REQUIRE_NONNULL(fn, virPtr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_REQUIRE_NONNULL(fn, desc);
    if (count == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'count' is 0");
    }
    for (size_t i = 0; i < count; i++) {
        int f = (int)desc[i].flags;
        if (f != ACL_RT_MEM_ACCESS_FLAGS_NONE && f != ACL_RT_MEM_ACCESS_FLAGS_READ &&
            f != ACL_RT_MEM_ACCESS_FLAGS_READWRITE) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "desc[%zu].flags %d is not an aclrtMemAccessFlags", i, f);
        }
        if (loc_index(&desc[i].location) < 0) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "desc[%zu].location (type %d, id %u) is not a valid location",
                              i, (int)desc[i].location.type, desc[i].location.id);
        }
    }
    MOCK_ENTER(fn);
    /* The range must be covered by mappings; update each one. */
    uintptr_t p = (uintptr_t)virPtr, end = p + size;
    if (end < p) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "range wraps the address space");
    }
    while (p < end) {
        mem_rec *r = mem_acquire((void *)p);
        if (r == NULL || r->kind != MEM_REC_VMM_MAP) {
            mem_release(r);
            return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "address %p in the range is not mapped", (void *)p);
        }
        vmm_map *m = r->owner;
        core_mutex_lock(&g_vmm_mu);
        for (size_t i = 0; i < count; i++) {
            m->access[loc_index(&desc[i].location)] = (uint8_t)desc[i].flags;
        }
        apply_prot(r);
        core_mutex_unlock(&g_vmm_mu);
        p = r->base + r->size;
        mem_release(r);
    }
    return ACL_SUCCESS;
}

aclError aclrtMemGetAccess(void *virPtr, aclrtMemLocation *location, uint64_t *flag)
{
    const char *fn = "aclrtMemGetAccess";
    MOCK_REQUIRE_NONNULL(fn, virPtr);
    MOCK_REQUIRE_NONNULL(fn, location);
    MOCK_REQUIRE_NONNULL(fn, flag);
    int idx = loc_index(location);
    if (idx < 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'location' (type %d, id %u) is not a valid location",
                          (int)location->type, location->id);
    }
    MOCK_ENTER(fn);
    mem_rec *r = mem_acquire(virPtr);
    if (r == NULL || r->kind != MEM_REC_VMM_MAP) {
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "pointer %p is not mapped", virPtr);
    }
    core_mutex_lock(&g_vmm_mu);
    *flag = ((vmm_map *)r->owner)->access[idx];
    core_mutex_unlock(&g_vmm_mu);
    mem_release(r);
    return ACL_SUCCESS;
}

aclError aclrtMemRetainAllocationHandle(void *virPtr, aclrtDrvMemHandle *handle)
{
    const char *fn = "aclrtMemRetainAllocationHandle";
    MOCK_REQUIRE_NONNULL(fn, virPtr);
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    mem_rec *r = mem_acquire(virPtr);
    if (r == NULL || r->kind != MEM_REC_VMM_MAP) {
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "pointer %p is not mapped", virPtr);
    }
    core_mutex_lock(&g_vmm_mu);
    phys *p = ((vmm_map *)r->owner)->ph;
    p->refs++;
    p->user++; /* released with aclrtFreePhysical */
    core_mutex_unlock(&g_vmm_mu);
    mem_release(r);
    *handle = p;
    return ACL_SUCCESS;
}

/* Called after every mapping record was dropped by mem_finalize. */
MOCK_HIDDEN void mem_vmm_finalize(void)
{
    for (;;) {
        /* one handle per round: an imported handle's release runs without the lock */
        phys_pending pend = {NULL, NULL};
        core_mutex_lock(&g_vmm_mu);
        phys *p = NULL;
        for (size_t i = 0; p == NULL && i < g_phys.cap; i++) {
            p = core_registry_slot(&g_phys, i);
        }
        if (p != NULL) {
            p->refs = 1;
            phys_unref_locked(p, &pend);
        } else {
            core_registry_release(&g_phys);
        }
        core_mutex_unlock(&g_vmm_mu);
        pending_run(&pend);
        if (p == NULL) {
            break;
        }
    }
    core_rwlock_wrlock(&g_vmm_rw);
    for (size_t i = 0; i < g_nresv; i++) {
        munmap(g_resv[i]->map_base, g_resv[i]->map_size);
        free(g_resv[i]);
    }
    free(g_resv);
    g_resv = NULL;
    g_nresv = g_capresv = 0;
    core_rwlock_unlock(&g_vmm_rw);
}

/* ------------------------------------------------ shareable handles (src/ipc/) */

aclError mem_vmm_share_export(const char *fn, aclrtDrvMemHandle handle, mem_vmm_share_info *out)
{
    enum { OK, DEAD, IMPORTED, AGAIN } st = OK;
    core_mutex_lock(&g_vmm_mu);
    phys *p = phys_find_locked(handle);
    if (p == NULL || p->user == 0) {
        st = DEAD;
    } else if (p->imported) {
        st = IMPORTED;
    } else if (p->exported) {
        st = AGAIN;
    } else {
        p->exported = true;
        out->size = p->size;
        out->prop = p->prop;
        out->device = p->device;
        out->gen = p->gen;
    }
    core_mutex_unlock(&g_vmm_mu);
    switch (st) {
    case DEAD:
        return core_error(fn, ACL_ERROR_RT_INVALID_HANDLE, "argument 'handle' (%p) is not a live physical memory handle",
                          handle);
    case IMPORTED:
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'handle' (%p) was imported from another process: only a handle from "
                          "aclrtMallocPhysical in this process can be exported",
                          handle);
    case AGAIN:
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'handle' (%p) was already exported: a handle and its shareable handle are 1:1",
                          handle);
    case OK:
        break;
    }
    return ACL_SUCCESS;
}

aclError mem_vmm_share_acquire(void *handle, uint32_t gen, void **obj, int *fd, mem_vmm_share_info *out)
{
    core_mutex_lock(&g_vmm_mu);
    phys *p = phys_find_locked(handle);
    bool ok = p != NULL && p->gen == gen && p->exported && p->user > 0;
    if (ok) {
        p->refs++; /* the importer's: the memory lives until it frees its handle */
        *obj = p;
        *fd = p->fd;
        out->size = p->size;
        out->prop = p->prop;
        out->device = p->device;
        out->gen = p->gen;
    }
    core_mutex_unlock(&g_vmm_mu);
    /* freed by the exporter before the import: the import fails (§3.2) */
    return ok ? ACL_SUCCESS : ACL_ERROR_RT_IPC_ERROR;
}

void mem_vmm_share_put(void *obj)
{
    phys_pending pend = {NULL, NULL};
    core_mutex_lock(&g_vmm_mu);
    if (phys_find_locked(obj) != NULL) {
        phys_unref_locked(obj, &pend);
    }
    core_mutex_unlock(&g_vmm_mu);
    pending_run(&pend);
}

aclError mem_vmm_share_import(const char *fn, int fd, const mem_vmm_share_info *info, int32_t device,
                              void (*release)(void *arg), void *arg, aclrtDrvMemHandle *out)
{
    phys *p = calloc(1, sizeof(*p));
    bool ok = false;
    core_mutex_lock(&g_vmm_mu);
    if (p != NULL && core_registry_insert(&g_phys, p)) {
        p->magic = PHYS_MAGIC;
        p->gen = ++g_phys_gen;
        p->fd = fd;
        p->size = (size_t)info->size;
        p->device = device;
        p->prop = info->prop;
        p->prop.location.id = (uint32_t)device;
        p->refs = 1;
        p->user = 1;
        p->imported = true;
        p->release = release;
        p->release_arg = arg;
        ok = true;
    }
    core_mutex_unlock(&g_vmm_mu);
    if (!ok) {
        free(p);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    *out = p;
    return ACL_SUCCESS;
}
