/*
 * memory.c - device memory of the mock: per-device regions, the registry of
 * every range the runtime knows about, isolation mode, and the allocation /
 * free / query entry points (acl_abi.md §1.6, §5.6).
 *
 * Device memory lives apart from the host heap. Each device owns one region of
 * address space reserved with mmap(PROT_NONE, MAP_NORESERVE) on first use, backed by
 * one sparse memfd mapped MAP_SHARED (the "device heap"), so that another process
 * that receives the memfd maps the very same pages (IPC memory, src/ipc/ and
 * mem/ipc.c: zero-copy); an allocation carves page-granular extents out of it (first
 * fit, coalescing free list) and commits them with mprotect(RW); a free gives the
 * pages back by punching a hole in the memfd + mprotect(PROT_NONE), so they read as
 * zeros when reused. (Where memfd_create is unavailable the region is private
 * anonymous memory and MADV_DONTNEED frees; nothing can then be exported.) The
 * capacity of a device is
 * core_config_get()->mem_per_device and is accounted like the real driver:
 * the rounded size (round up to 32, +32 padding) in whole pages of the
 * allocation's policy (see device_alloc), so aclrtGetMemInfo tracks
 * allocations and an allocation past the capacity fails with
 * ACL_ERROR_RT_MEMORY_ALLOCATION.
 *
 * The registry is one array of records sorted by base address, under a
 * rwlock: lookups are a binary search (O(log n)) under the read lock; no lock is
 * held while data is copied. Records are reference counted (see mem_rec).
 *
 * Isolation mode (ASCEND_MOCK_ISOLATION=1): device pages stay PROT_NONE except
 * while a runtime operation is inside a mem_access_begin/end bracket, so a
 * host dereference of a device pointer faults at once.
 */
#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "mem/mem_private.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KIB ((size_t)1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* ------------------------------------------------------------ basic state */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static size_t g_page = 4096;
static bool g_isolation = false;

static void mem_init_once(void)
{
    long p = sysconf(_SC_PAGESIZE);
    if (p > 0) {
        g_page = (size_t)p;
    }
    g_isolation = core_config_get()->isolation;
}

MOCK_HIDDEN bool mem_isolation(void)
{
    pthread_once(&g_once, mem_init_once);
    return g_isolation;
}

MOCK_HIDDEN size_t mem_page_size(void)
{
    pthread_once(&g_once, mem_init_once);
    return g_page;
}

/* --------------------------------------------------------- device regions */

typedef struct extent {
    size_t off;
    size_t len;
} extent;

typedef struct dev_region {
    mock_mutex lock;
    _Atomic(uintptr_t) base; /* 0 until reserved; read without the lock */
    _Atomic(size_t) vsize;
    bool tried;              /* reservation attempted (and failed if base == 0) */
    int fd;                  /* the memfd backing the region (offset = address - base), -1: anonymous */
    uint64_t capacity;
    uint64_t used;           /* rounded bytes of live allocations + physical handles */
    uint64_t peak;
    extent *free;            /* sorted by offset, coalesced */
    size_t nfree;
    size_t capfree;
} dev_region;

static dev_region g_dev[MOCK_MAX_DEVICES];
static pthread_once_t g_dev_once = PTHREAD_ONCE_INIT;

static void dev_init_once(void)
{
    for (int i = 0; i < MOCK_MAX_DEVICES; i++) {
        core_mutex_init(&g_dev[i].lock, MOCK_LOCK_MEM_REGION);
        g_dev[i].fd = -1;
    }
}

static dev_region *dev_get(int32_t device)
{
    pthread_once(&g_dev_once, dev_init_once);
    if (device < 0 || device >= MOCK_MAX_DEVICES) {
        return NULL;
    }
    dev_region *d = &g_dev[device];
    return d;
}

/* Address space to reserve for a capacity: the capacity plus headroom for the
 * page rounding of small allocations (each allocation owns whole pages). */
static size_t region_vsize(uint64_t capacity)
{
    size_t cap = round_up((size_t)capacity, 2 * MIB);
    size_t head = cap > (8 * GIB) / 63 ? 8 * GIB : cap * 63;
    return cap + head;
}

/* Called with d->lock held. */
static bool region_reserve(dev_region *d, int32_t device)
{
    if (atomic_load(&d->base) != 0) {
        return true;
    }
    if (d->tried) {
        return false;
    }
    d->tried = true;
    d->capacity = core_config_get()->mem_per_device;
    size_t want = region_vsize(d->capacity);
    size_t floor = (size_t)d->capacity < 256 * MIB ? round_up((size_t)d->capacity, g_page) : 256 * MIB;
    if (floor == 0) {
        floor = g_page;
    }
    /* The device heap: a sparse memfd the size of the region (pages exist only where
     * allocations touched them), so that IPC can hand the same pages to another process. */
    int fd = memfd_create("acl_mock_device_heap", MFD_CLOEXEC);
    for (size_t sz = want; sz >= floor; sz /= 2) {
        void *p = MAP_FAILED;
        if (fd >= 0 && ftruncate(fd, (off_t)sz) == 0) {
            p = mmap(NULL, sz, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        }
        if (p == MAP_FAILED && fd >= 0 && sz == floor) {
            close(fd); /* last try: a private region (not shareable) */
            fd = -1;
        }
        if (p == MAP_FAILED && fd < 0) {
            p = mmap(NULL, sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        }
        if (p != MAP_FAILED) {
            if (sz != want) {
                fprintf(stderr,
                        "mock_libascendcl: could not reserve %zu bytes of address space for device %d; "
                        "using %zu (allocations beyond that fail with 207001)\n",
                        want, device, sz);
            }
            d->free = malloc(sizeof(extent) * 16);
            if (d->free == NULL) {
                munmap(p, sz);
                if (fd >= 0) {
                    close(fd);
                }
                return false;
            }
            d->fd = fd;
            d->capfree = 16;
            d->nfree = 1;
            d->free[0].off = 0;
            d->free[0].len = sz;
            atomic_store(&d->vsize, sz);
            atomic_store(&d->base, (uintptr_t)p);
            return true;
        }
        if (sz / 2 < floor && sz != floor) {
            sz = floor * 2; /* one last try at the floor */
        }
    }
    fprintf(stderr, "mock_libascendcl: could not reserve address space for device %d: %s\n", device,
            strerror(errno));
    if (fd >= 0) {
        close(fd);
    }
    return false;
}

static void extent_give(dev_region *d, size_t off, size_t len);

/* First fit of `len` bytes whose absolute address is a multiple of `align`
 * (a power of two, at least the page size). Called with d->lock held.
 * Returns false when no extent fits. */
static bool extent_take(dev_region *d, size_t len, size_t align, size_t *off_out)
{
    uintptr_t base = atomic_load(&d->base);
    for (size_t i = 0; i < d->nfree; i++) {
        size_t off = d->free[i].off, elen = d->free[i].len;
        size_t start = (size_t)(round_up(base + off, align) - base);
        size_t pad = start - off;
        if (pad > elen || elen - pad < len) {
            continue;
        }
        *off_out = start;
        /* shrink the extent to its tail, then give back the alignment gap */
        d->free[i].off = start + len;
        d->free[i].len = elen - pad - len;
        if (d->free[i].len == 0) {
            memmove(&d->free[i], &d->free[i + 1], (d->nfree - i - 1) * sizeof(extent));
            d->nfree--;
        }
        if (pad > 0) {
            extent_give(d, off, pad);
        }
        return true;
    }
    return false;
}

/* Returns an extent, coalescing with its neighbours. d->lock held. */
static void extent_give(dev_region *d, size_t off, size_t len)
{
    size_t lo = 0, hi = d->nfree;
    while (lo < hi) { /* first extent with off > `off` */
        size_t mid = (lo + hi) / 2;
        if (d->free[mid].off > off) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    size_t i = lo;
    bool merge_prev = i > 0 && d->free[i - 1].off + d->free[i - 1].len == off;
    bool merge_next = i < d->nfree && off + len == d->free[i].off;
    if (merge_prev && merge_next) {
        d->free[i - 1].len += len + d->free[i].len;
        memmove(&d->free[i], &d->free[i + 1], (d->nfree - i - 1) * sizeof(extent));
        d->nfree--;
    } else if (merge_prev) {
        d->free[i - 1].len += len;
    } else if (merge_next) {
        d->free[i].off = off;
        d->free[i].len += len;
    } else {
        if (d->nfree == d->capfree) {
            size_t ncap = d->capfree * 2;
            extent *n = realloc(d->free, ncap * sizeof(extent));
            if (n == NULL) {
                return; /* leak the address range rather than crash */
            }
            d->free = n;
            d->capfree = ncap;
        }
        memmove(&d->free[i + 1], &d->free[i], (d->nfree - i) * sizeof(extent));
        d->free[i].off = off;
        d->free[i].len = len;
        d->nfree++;
    }
}

/* Capacity accounting of a region; d->lock held. */
static bool capacity_fits_locked(const dev_region *d, uint64_t bytes)
{
    return bytes <= d->capacity - d->used && d->used <= d->capacity;
}

static void capacity_add_locked(dev_region *d, uint64_t bytes)
{
    d->used += bytes;
    if (d->used > d->peak) {
        d->peak = d->used;
    }
}

static void capacity_sub_locked(dev_region *d, uint64_t bytes)
{
    d->used = bytes > d->used ? 0 : d->used - bytes;
}

MOCK_HIDDEN bool mem_capacity_take(int32_t device, uint64_t bytes)
{
    dev_region *d = dev_get(device);
    if (d == NULL) {
        return false;
    }
    core_mutex_lock(&d->lock);
    if (d->capacity == 0) {
        d->capacity = core_config_get()->mem_per_device;
    }
    bool ok = capacity_fits_locked(d, bytes);
    if (ok) {
        capacity_add_locked(d, bytes);
    }
    core_mutex_unlock(&d->lock);
    return ok;
}

MOCK_HIDDEN void mem_capacity_give(int32_t device, uint64_t bytes)
{
    dev_region *d = dev_get(device);
    if (d == NULL) {
        return;
    }
    core_mutex_lock(&d->lock);
    capacity_sub_locked(d, bytes);
    core_mutex_unlock(&d->lock);
}

static void dev_used(int32_t device, uint64_t *used, uint64_t *peak, uint64_t *capacity)
{
    dev_region *d = dev_get(device);
    core_mutex_lock(&d->lock);
    if (d->capacity == 0) {
        d->capacity = core_config_get()->mem_per_device;
    }
    *used = d->used;
    *peak = d->peak;
    *capacity = d->capacity;
    core_mutex_unlock(&d->lock);
}

/* -------------------------------------------------------------- registry */

static mock_rwlock g_reg_lock = MOCK_RWLOCK_INIT(MOCK_LOCK_MEM_REGISTRY);
static mem_rec **g_reg;
static size_t g_nreg, g_capreg;
/* Guards the isolation access counts of records and their mprotect calls. */
static mock_mutex g_iso_lock = MOCK_MUTEX_INIT(MOCK_LOCK_MEM_ISOLATION);

MOCK_HIDDEN mem_rec *mem_rec_new(mem_rec_kind kind, uintptr_t base, size_t size, int32_t device)
{
    mem_rec *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    r->kind = kind;
    r->base = base;
    r->size = size;
    r->span = size;
    r->device = device;
    r->page_size = (uint32_t)mem_page_size();
    atomic_init(&r->refs, 1);
    atomic_init(&r->freed, false);
    r->m_pref_type = ACL_MEM_LOCATIONTYPE_INVALID;
    r->m_pref_id = -1;
    r->m_last_type = ACL_MEM_LOCATIONTYPE_INVALID;
    r->m_last_id = -1;
    return r;
}

/* Index of the last record with base <= p, or -1. Lock held. */
static long reg_find_le(uintptr_t p)
{
    size_t lo = 0, hi = g_nreg;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_reg[mid]->base <= p) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return (long)lo - 1;
}

static size_t rec_extent(const mem_rec *r)
{
    return r->span > r->size ? r->span : r->size;
}

aclError mem_register_allocation(const char *fn, mem_rec *rec, int32_t device, uint64_t bytes)
{
    if (!mem_registry_insert(rec)) {
        mem_release(rec);
        return core_error(fn, ACL_ERROR_RT_INTERNAL_ERROR, "registry insertion failed");
    }
    if (device < 0) {
        core_stat_add(-1, MOCK_STAT_HOST_ALLOCATIONS, 1);
        core_stat_add(-1, MOCK_STAT_HOST_BYTES, (int64_t)bytes);
    } else {
        core_stat_add(device, MOCK_STAT_ALLOCATIONS, 1);
        core_stat_add(device, MOCK_STAT_BYTES, (int64_t)bytes);
    }
    if (core_observing()) { /* timing model: the cost of an allocation */
        core_observe_simple(CORE_OBS_MEM_ALLOC, NULL, NULL, (const void *)rec->base, rec->size, device);
    }
    return ACL_SUCCESS;
}

aclError mem_check_batch_indexes(const char *fn, const size_t *idx, size_t n, size_t count, const char *idx_name,
                                 const char *n_name, const char *count_name)
{
    if (n == 0 || n > count) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' (%zu) must be in 1..%s (%zu)", n_name, n,
                          count_name, count);
    }
    if (idx[0] != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "%s[0] must be 0", idx_name);
    }
    for (size_t k = 1; k < n; k++) {
        if (idx[k] <= idx[k - 1] || idx[k] >= count) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "%s must be strictly increasing and below %s (index %zu)", idx_name, count_name, k);
        }
    }
    return ACL_SUCCESS;
}

MOCK_HIDDEN bool mem_registry_insert(mem_rec *rec)
{
    core_rwlock_wrlock(&g_reg_lock);
    long i = reg_find_le(rec->base);
    size_t ext = rec_extent(rec);
    bool overlap = false;
    if (i >= 0 && g_reg[i]->base + rec_extent(g_reg[i]) > rec->base) {
        overlap = true;
    }
    if ((size_t)(i + 1) < g_nreg && g_reg[i + 1]->base < rec->base + ext) {
        overlap = true;
    }
    bool ok = !overlap;
    if (ok && g_nreg == g_capreg) {
        size_t ncap = g_capreg ? g_capreg * 2 : 256;
        mem_rec **n = realloc(g_reg, ncap * sizeof(*n));
        if (n == NULL) {
            ok = false;
        } else {
            g_reg = n;
            g_capreg = ncap;
        }
    }
    if (ok) {
        size_t at = (size_t)(i + 1);
        memmove(&g_reg[at + 1], &g_reg[at], (g_nreg - at) * sizeof(*g_reg));
        g_reg[at] = rec;
        g_nreg++;
    }
    core_rwlock_unlock(&g_reg_lock);
    return ok;
}

MOCK_HIDDEN mem_rec *mem_registry_remove(const void *ptr, unsigned kinds_mask, int *found_kind,
                                         bool *interior)
{
    uintptr_t p = (uintptr_t)ptr;
    mem_rec *out = NULL;
    *found_kind = 0;
    *interior = false;
    core_rwlock_wrlock(&g_reg_lock);
    long i = reg_find_le(p);
    if (i >= 0 && p < g_reg[i]->base + rec_extent(g_reg[i])) {
        mem_rec *r = g_reg[i];
        *found_kind = (int)r->kind;
        if (r->base == p && (kinds_mask & (1u << r->kind)) != 0) {
            memmove(&g_reg[i], &g_reg[i + 1], (g_nreg - (size_t)i - 1) * sizeof(*g_reg));
            g_nreg--;
            atomic_store(&r->freed, true);
            out = r;
        } else if (r->base != p) {
            *interior = true;
        }
    }
    core_rwlock_unlock(&g_reg_lock);
    return out;
}

MOCK_HIDDEN mem_rec *mem_acquire(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    mem_rec *out = NULL;
    core_rwlock_rdlock(&g_reg_lock);
    long i = reg_find_le(p);
    if (i >= 0 && p < g_reg[i]->base + g_reg[i]->size) {
        out = g_reg[i];
        atomic_fetch_add(&out->refs, 1);
    }
    core_rwlock_unlock(&g_reg_lock);
    return out;
}

MOCK_HIDDEN void mem_release(mem_rec *rec)
{
    if (rec == NULL) {
        return;
    }
    if (atomic_fetch_sub(&rec->refs, 1) == 1) {
        if (rec->dtor != NULL) {
            rec->dtor(rec);
        }
        free(rec->regions);
        free(rec);
    }
}

MOCK_HIDDEN bool mem_in_dead_space(const void *ptr, size_t len)
{
    uintptr_t p = (uintptr_t)ptr;
    uintptr_t e = p + (len ? len : 1);
    if (e < p) {
        return true; /* wraps the address space */
    }
    pthread_once(&g_dev_once, dev_init_once);
    for (int i = 0; i < MOCK_MAX_DEVICES; i++) {
        uintptr_t b = atomic_load(&g_dev[i].base);
        if (b != 0) {
            uintptr_t be = b + atomic_load(&g_dev[i].vsize);
            if (p < be && e > b) {
                return true;
            }
        }
    }
    return mem_vmm_in_reservation(ptr, len);
}

/* Plain host memory is not in the registry: make sure at least that the
 * range is mapped, so that a garbage pointer gives an error instead of a
 * crash (msync(MS_ASYNC) fails with ENOMEM on unmapped pages and has no
 * effect otherwise). Permissions are not checked. */
MOCK_HIDDEN bool mem_host_mapped(const void *ptr, size_t len)
{
    uintptr_t page = (uintptr_t)mem_page_size();
    uintptr_t start = (uintptr_t)ptr & ~(page - 1);
    uintptr_t end = (uintptr_t)ptr + (len ? len : 1);
    if (end < (uintptr_t)ptr) {
        return false;
    }
    return msync((void *)start, end - start, MS_ASYNC) == 0 || errno != ENOMEM;
}

/* ------------------------------------------------------------- isolation */

static int rec_prot(const mem_rec *r)
{
    return r->readonly ? PROT_READ : PROT_READ | PROT_WRITE;
}

MOCK_HIDDEN void mem_rec_access_begin(mem_rec *rec)
{
    if (rec == NULL || !rec->protect) {
        return;
    }
    core_mutex_lock(&g_iso_lock);
    if (rec->access++ == 0) {
        mprotect((void *)rec->base, rec->span, rec_prot(rec));
    }
    core_mutex_unlock(&g_iso_lock);
}

MOCK_HIDDEN void mem_rec_access_end(mem_rec *rec)
{
    if (rec == NULL || !rec->protect) {
        return;
    }
    core_mutex_lock(&g_iso_lock);
    if (rec->access > 0 && --rec->access == 0) {
        mprotect((void *)rec->base, rec->span, PROT_NONE);
    }
    core_mutex_unlock(&g_iso_lock);
}

/* The contract brackets (mem/mem.h). begin and end are called by the
 * same thread; begin takes a reference on the record (so that a concurrent
 * aclrtFree cannot unmap the pages under the caller) and end finds it again
 * on a small thread-local stack. */
#define ACCESS_STACK 32
typedef struct access_slot {
    const void *ptr;
    mem_rec *rec;
    bool gate; /* entered the device-write gate (copy.c) */
} access_slot;
static _Thread_local access_slot t_access[ACCESS_STACK];
static _Thread_local int t_naccess;

MOCK_HIDDEN void mem_access_begin(const void *ptr, size_t len)
{
    (void)len;
    if (ptr == NULL) {
        return;
    }
    mem_rec *r = mem_acquire(ptr);
    if (r == NULL) {
        return;
    }
    if (t_naccess == ACCESS_STACK) {
        mem_release(r); /* nesting this deep does not happen; stay safe */
        return;
    }
    mem_rec_access_begin(r);
    /* Another subsystem touching device memory (e.g. aclrtReduceAsync, the
     * overflow status buffer) counts as a device write for aclrtValueWait:
     * enter the write gate so waiters never race with it and are woken. */
    bool gate = mem_rec_is_device(r);
    if (gate) {
        mem_write_begin();
    }
    t_access[t_naccess].ptr = ptr;
    t_access[t_naccess].rec = r;
    t_access[t_naccess].gate = gate;
    t_naccess++;
}

MOCK_HIDDEN void mem_access_end(const void *ptr, size_t len)
{
    (void)len;
    for (int i = t_naccess - 1; i >= 0; i--) {
        if (t_access[i].ptr == ptr) {
            mem_rec *r = t_access[i].rec;
            bool gate = t_access[i].gate;
            memmove(&t_access[i], &t_access[i + 1], (size_t)(t_naccess - i - 1) * sizeof(access_slot));
            t_naccess--;
            if (gate) {
                mem_write_end();
            }
            mem_rec_access_end(r);
            mem_release(r);
            return;
        }
    }
}

MOCK_HIDDEN bool mem_lookup(const void *ptr, mock_mem_info *out)
{
    mock_mem_info tmp;
    if (out == NULL) {
        out = &tmp;
    }
    memset(out, 0, sizeof(*out));
    out->kind = MOCK_MEM_UNKNOWN;
    out->device = -1;
    mem_rec *r = mem_acquire(ptr);
    if (r == NULL) {
        return false;
    }
    /* device, VMM-mapped and managed memory are device memory; pinned and
     * registered host memory are runtime-known host memory */
    out->kind = (r->kind == MEM_REC_HOST_PINNED || r->kind == MEM_REC_HOST_REG) ? MOCK_MEM_HOST_PINNED
                                                                              : MOCK_MEM_DEVICE;
    out->device = r->device;
    out->base = r->base;
    out->size = r->size;
    mem_release(r);
    return true;
}

/* ------------------------------------------------ sub-allocation regions */

/* The index of the first region of r whose hi > p. */
static size_t region_find(const mem_rec *r, uintptr_t p)
{
    size_t lo = 0, hi = r->nregions;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->regions[2 * mid + 1] <= p) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

bool mem_lookup_region(const void *ptr, mock_mem_info *out, size_t *left)
{
    uintptr_t p = (uintptr_t)ptr;
    memset(out, 0, sizeof(*out));
    out->kind = MOCK_MEM_UNKNOWN;
    out->device = -1;
    bool found = false;
    core_rwlock_rdlock(&g_reg_lock);
    long i = reg_find_le(p);
    if (i >= 0 && p < g_reg[i]->base + g_reg[i]->size) {
        const mem_rec *r = g_reg[i];
        out->kind = (r->kind == MEM_REC_HOST_PINNED || r->kind == MEM_REC_HOST_REG) ? MOCK_MEM_HOST_PINNED
                                                                                  : MOCK_MEM_DEVICE;
        out->device = r->device;
        out->base = r->base;
        out->size = r->size;
        *left = r->base + r->size - p;
        size_t k = region_find(r, p);
        if (k < r->nregions && r->regions[2 * k] <= p) {
            *left = r->regions[2 * k + 1] - p;
        }
        found = true;
    }
    core_rwlock_unlock(&g_reg_lock);
    return found;
}

/* README "Race sanitizer": a block a sub-allocator (the caching allocator of pyacl_rt)
 * hands out. Regions of one allocation are disjoint: a new one replaces those it
 * overlaps (a block handed out again before its old region was unregistered). */
aclError aclmockMemRegionRegister(const void *ptr, size_t size)
{
    static const char fn[] = "aclmockMemRegionRegister";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    uintptr_t lo = (uintptr_t)ptr, hi = lo + size;
    if (hi < lo) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "the region of %zu bytes at %p wraps the address space", size,
                          ptr);
    }
    enum { OK, NOT_DEVICE, PAST_END, NO_MEMORY } got = OK;
    size_t end_left = 0;
    core_rwlock_wrlock(&g_reg_lock);
    long i = reg_find_le(lo);
    mem_rec *r = i >= 0 && lo < g_reg[i]->base + g_reg[i]->size ? g_reg[i] : NULL;
    if (r == NULL || r->kind == MEM_REC_HOST_PINNED || r->kind == MEM_REC_HOST_REG) {
        got = NOT_DEVICE;
    } else if (hi > r->base + r->size) {
        got = PAST_END;
        end_left = r->base + r->size - lo;
    } else {
        size_t k = region_find(r, lo); /* first region with its hi > lo */
        size_t j = k;
        while (j < r->nregions && r->regions[2 * j] < hi) {
            j++; /* [k, j) overlap the new region: replaced */
        }
        if (j == k && r->nregions == r->capregions) {
            size_t nc = r->capregions ? r->capregions * 2 : 8;
            uintptr_t *nr = realloc(r->regions, 2 * nc * sizeof *nr);
            if (nr == NULL) {
                got = NO_MEMORY;
            } else {
                r->regions = nr;
                r->capregions = nc;
            }
        }
        if (got == OK) {
            size_t keep = j > k ? j - k - 1 : 0; /* slots freed beyond the one reused */
            if (j == k) {
                memmove(r->regions + 2 * (k + 1), r->regions + 2 * k, 2 * (r->nregions - k) * sizeof *r->regions);
                r->nregions++;
            } else if (keep > 0) {
                memmove(r->regions + 2 * (k + 1), r->regions + 2 * j, 2 * (r->nregions - j) * sizeof *r->regions);
                r->nregions -= keep;
            }
            r->regions[2 * k] = lo;
            r->regions[2 * k + 1] = hi;
        }
    }
    core_rwlock_unlock(&g_reg_lock);
    switch (got) {
    case NOT_DEVICE:
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'ptr' (%p) is not in a live device allocation", ptr);
    case PAST_END:
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "the region of %zu bytes at %p runs past the end of its allocation (%zu bytes left)", size,
                          ptr, end_left);
    case NO_MEMORY:
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    default:
        return ACL_SUCCESS;
    }
}

aclError aclmockMemRegionUnregister(const void *ptr)
{
    static const char fn[] = "aclmockMemRegionUnregister";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    uintptr_t lo = (uintptr_t)ptr;
    bool found = false;
    core_rwlock_wrlock(&g_reg_lock);
    long i = reg_find_le(lo);
    mem_rec *r = i >= 0 && lo < g_reg[i]->base + g_reg[i]->size ? g_reg[i] : NULL;
    if (r != NULL) {
        size_t k = region_find(r, lo);
        if (k < r->nregions && r->regions[2 * k] == lo) {
            memmove(r->regions + 2 * k, r->regions + 2 * (k + 1), 2 * (r->nregions - k - 1) * sizeof *r->regions);
            r->nregions--;
            found = true;
        }
    }
    core_rwlock_unlock(&g_reg_lock);
    if (!found) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "no region starts at %p (aclmockMemRegionRegister)", ptr);
    }
    return ACL_SUCCESS;
}

/* ------------------------------------------- the device heap for mem/ipc.c */

int mem_region_fd(int32_t device, uintptr_t *base)
{
    dev_region *d = dev_get(device);
    if (d == NULL) {
        return -1;
    }
    core_mutex_lock(&d->lock);
    int fd = atomic_load(&d->base) != 0 ? d->fd : -1;
    *base = atomic_load(&d->base);
    core_mutex_unlock(&d->lock);
    return fd;
}

bool mem_region_take(int32_t device, size_t len, size_t align, uintptr_t *addr)
{
    dev_region *d = dev_get(device);
    if (d == NULL) {
        return false;
    }
    size_t off = 0;
    core_mutex_lock(&d->lock);
    bool ok = region_reserve(d, device) && extent_take(d, len, align, &off);
    if (ok) {
        *addr = atomic_load(&d->base) + off;
    }
    core_mutex_unlock(&d->lock);
    return ok;
}

void mem_region_give(int32_t device, uintptr_t addr, size_t len)
{
    dev_region *d = dev_get(device);
    core_mutex_lock(&d->lock);
    uintptr_t base = atomic_load(&d->base);
    if (base != 0 && addr >= base && addr - base < atomic_load(&d->vsize)) {
        /* put the heap's own (untouched, PROT_NONE) pages back under the range */
        if (d->fd >= 0) {
            mmap((void *)addr, len, PROT_NONE, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, d->fd, (off_t)(addr - base));
        } else {
            mmap((void *)addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
        }
        extent_give(d, addr - base, len);
    }
    core_mutex_unlock(&d->lock);
}

/* ------------------------------------------------------ device allocation */

static void device_rec_dtor(mem_rec *r)
{
    dev_region *d = dev_get(r->device);
    void *p = (void *)r->base;
    uintptr_t base = atomic_load(&d->base);
    if (d->fd < 0) {
        madvise(p, r->span, MADV_DONTNEED);
    } else if (!atomic_load(&r->ipc_keep_pages) && base != 0 && r->base >= base) {
        /* free the heap's pages (they read as zeros when the range is reused); not at
         * aclFinalize while another process still maps them (mem/ipc.c) */
        fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(r->base - base), (off_t)r->span);
    }
    mprotect(p, r->span, PROT_NONE);
    core_mutex_lock(&d->lock);
    base = atomic_load(&d->base);
    if (base != 0 && r->base >= base) {
        extent_give(d, r->base - base, r->span);
    }
    if (!r->cap_returned) {
        capacity_sub_locked(d, r->charged);
    }
    core_mutex_unlock(&d->lock);
}

/* Real rounding (§5.6): alignedSize = (size + 32 + padding - 1) / 32 * 32,
 * padding 32 except for aclrtMallocAlign32 and the HUGE1G policies. */
static bool aligned_size(size_t size, bool pad, size_t *out)
{
    size_t padding = pad ? 32 : 0;
    if (size > SIZE_MAX - 64 - padding) {
        return false;
    }
    *out = (size + 32 + padding - 1) / 32 * 32;
    return true;
}

static uint32_t policy_page_size(uint32_t policy, size_t size)
{
    uint32_t base = policy & 0xFFu;
    switch (base) {
    case ACL_MEM_MALLOC_HUGE_ONLY:
    case ACL_MEM_MALLOC_HUGE_ONLY_P2P:
        return (uint32_t)(2 * MIB);
    case ACL_MEM_MALLOC_HUGE_FIRST:
    case ACL_MEM_MALLOC_HUGE_FIRST_P2P:
        /* normal pages for requests of at most 1 MiB (doc 25-02) */
        return size > MIB ? (uint32_t)(2 * MIB) : (uint32_t)mem_page_size();
    case ACL_MEM_MALLOC_NORMAL_ONLY:
    case ACL_MEM_MALLOC_NORMAL_ONLY_P2P:
        return (uint32_t)mem_page_size();
    case ACL_MEM_MALLOC_HUGE1G_ONLY:
    case ACL_MEM_MALLOC_HUGE1G_ONLY_P2P:
        return (uint32_t)GIB;
    default:
        /* values outside the enum: >= 2 MiB -> huge pages, else normal (doc) */
        return size >= 2 * MIB ? (uint32_t)(2 * MIB) : (uint32_t)mem_page_size();
    }
}

static bool policy_is_1g(uint32_t policy)
{
    uint32_t base = policy & 0xFFu;
    return base == ACL_MEM_MALLOC_HUGE1G_ONLY || base == ACL_MEM_MALLOC_HUGE1G_ONLY_P2P;
}

/* HUGE_FIRST: huge pages when there are enough, else normal ones (doc 25-02). */
static bool policy_falls_back(uint32_t policy)
{
    uint32_t base = policy & 0xFFu;
    return base == ACL_MEM_MALLOC_HUGE_FIRST || base == ACL_MEM_MALLOC_HUGE_FIRST_P2P;
}

/* Gives back the range and capacity device_alloc took, when it fails afterwards. */
static void device_alloc_undo(dev_region *d, size_t off, size_t span, uint64_t charge)
{
    core_mutex_lock(&d->lock);
    extent_give(d, off, span);
    capacity_sub_locked(d, charge);
    core_mutex_unlock(&d->lock);
}

/* Allocates `size` bytes (already validated nonzero) on `device`.
 *
 * The usable size is CANN's rounded size (aligned_size); the device memory it
 * costs (aclrtGetMemInfo free, aclrtGetMemUsageInfo) is that size rounded up to
 * whole pages of the policy, like the real driver, which maps pages: normal
 * pages (the host page size, 4 KiB on x86-64) for NORMAL_ONLY and for
 * HUGE_FIRST requests of at most 1 MiB, 2 MiB pages for HUGE_ONLY and larger
 * HUGE_FIRST requests, 1 GiB pages for HUGE1G_ONLY (doc 25-02). HUGE_FIRST
 * falls back to normal pages when the huge-page rounding does not fit; the
 * *_ONLY policies fail with ACL_ERROR_RT_MEMORY_ALLOCATION instead. */
static aclError device_alloc(const char *fn, int32_t device, size_t size, uint32_t policy, bool pad,
                             void **out)
{
    size_t asize;
    if (!aligned_size(size, pad && !policy_is_1g(policy), &asize)) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "size %zu is too large", size);
    }
    size_t page = mem_page_size();
    size_t span = round_up(asize, page);
    uint32_t psize = policy_page_size(policy, size);
    if (asize > SIZE_MAX - psize) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "size %zu is too large", size);
    }
    uint64_t charge = round_up(asize, psize);
    dev_region *d = dev_get(device);
    if (d == NULL) {
        return core_error(fn, ACL_ERROR_RT_INVALID_DEVICEID, "device %d out of range", device);
    }
    /* One critical section decides; the errors are reported after it. */
    enum { TAKEN, NO_ADDRESS_SPACE, NO_CAPACITY, FRAGMENTED } got = TAKEN;
    uint64_t used = 0, cap = 0;
    size_t off = 0;
    uintptr_t base = 0;
    core_mutex_lock(&d->lock);
    if (!region_reserve(d, device)) {
        got = NO_ADDRESS_SPACE;
    } else {
        if (!capacity_fits_locked(d, charge) && psize > page && policy_falls_back(policy)) {
            psize = (uint32_t)page; /* HUGE_FIRST: not enough huge pages, take normal ones */
            charge = span;
        }
        /* Huge-page allocations start on a 2 MiB boundary like the real
         * allocator's granules (and can be backed by host huge pages). */
        size_t align = psize >= 2 * MIB && span >= 2 * MIB ? 2 * MIB : page;
        if (!capacity_fits_locked(d, charge)) {
            got = NO_CAPACITY;
            used = d->used;
            cap = d->capacity;
        } else if (!extent_take(d, span, align, &off)) {
            got = FRAGMENTED;
        } else {
            capacity_add_locked(d, charge);
            base = atomic_load(&d->base) + off;
        }
    }
    core_mutex_unlock(&d->lock);
    switch (got) {
    case NO_ADDRESS_SPACE:
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION,
                          "device %d: no address space could be reserved for device memory", device);
    case NO_CAPACITY:
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION,
                          "out of device memory on device %d: requested %zu bytes (%zu after rounding, "
                          "%llu in %u-byte pages), %llu of %llu bytes in use",
                          device, size, asize, (unsigned long long)charge, psize, (unsigned long long)used,
                          (unsigned long long)cap);
    case FRAGMENTED:
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION,
                          "out of device memory on device %d: no free range of %zu bytes (fragmentation)",
                          device, span);
    case TAKEN:
        break;
    }

    if (!mem_isolation() && mprotect((void *)base, span, PROT_READ | PROT_WRITE) != 0) {
        device_alloc_undo(d, off, span, charge);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "device %d: cannot commit %zu bytes: %s", device,
                          span, strerror(errno));
    }
    mem_rec *r = mem_rec_new(MEM_REC_DEVICE, base, asize, device);
    if (r == NULL) {
        mprotect((void *)base, span, PROT_NONE);
        device_alloc_undo(d, off, span, charge);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    r->span = span;
    r->charged = charge;
    r->policy = policy;
    r->page_size = psize;
    r->protect = mem_isolation();
    r->dtor = device_rec_dtor;
    aclError rc = mem_register_allocation(fn, r, device, asize);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *out = (void *)base;
    return ACL_SUCCESS;
}

static aclError malloc_common(const char *fn, void **devPtr, size_t size, aclrtMemMallocPolicy policy,
                              bool pad)
{
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_ENTER(fn);
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return device_alloc(fn, core_ctx_device(ctx), size, (uint32_t)policy, pad, devPtr);
}

aclError mem_device_alloc(const char *fn, int32_t device, size_t size, void **out)
{
    return device_alloc(fn, device, size, ACL_MEM_MALLOC_NORMAL_ONLY, true, out);
}

bool mem_device_free_quiet(void *ptr)
{
    int found;
    bool interior;
    mem_rec *r = mem_registry_remove(ptr, 1u << MEM_REC_DEVICE, &found, &interior);
    if (r == NULL) {
        return false;
    }
    mem_capacity_give(r->device, r->charged);
    r->cap_returned = true;
    mem_release(r); /* the registry's reference */
    return true;
}

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return malloc_common("aclrtMalloc", devPtr, size, policy, true);
}

aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return malloc_common("aclrtMallocAlign32", devPtr, size, policy, false);
}

aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy)
{
    return malloc_common("aclrtMallocCached", devPtr, size, policy, true);
}

/* Validates a malloc config; *device gets ACL_RT_MEM_ATTR_DEVICE_ID or -1. */
static aclError check_cfg(const char *fn, const aclrtMallocConfig *cfg, int32_t *device)
{
    *device = -1;
    if (cfg == NULL) {
        return ACL_SUCCESS;
    }
    if (cfg->numAttrs > 0 && cfg->attrs == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'cfg->attrs' is NULL but numAttrs is %zu",
                          cfg->numAttrs);
    }
    for (size_t i = 0; i < cfg->numAttrs; i++) {
        switch ((int)cfg->attrs[i].attr) {
        case ACL_RT_MEM_ATTR_RSV:
        case ACL_RT_MEM_ATTR_MODULE_ID:
        case ACL_RT_MEM_ATTR_VA_FLAG:
            break;
        case ACL_RT_MEM_ATTR_DEVICE_ID:
            *device = (int32_t)cfg->attrs[i].value.deviceId;
            break;
        default:
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "cfg->attrs[%zu].attr %d is not a valid attribute", i,
                              (int)cfg->attrs[i].attr);
        }
    }
    return ACL_SUCCESS;
}

/* Shared front of aclrtMalloc{,Host}WithCfg: `out` non-NULL, size > 0, a valid cfg, the
 * fault hook, and the device named by the cfg (if any) exists; *device = that device or -1. */
static aclError cfg_alloc_front(const char *fn, void **out, const char *out_name, uint64_t size,
                                aclrtMallocConfig *cfg, int32_t *device)
{
    if (out == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", out_name);
    }
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    aclError rc = check_cfg(fn, cfg, device);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    MOCK_ENTER(fn);
    return *device >= 0 ? core_device_check(fn, *device) : ACL_SUCCESS;
}

static aclError malloc_with_cfg(const char *fn, void **devPtr, size_t size, aclrtMemMallocPolicy policy,
                                aclrtMallocConfig *cfg)
{
    int32_t device = -1;
    aclError rc = cfg_alloc_front(fn, devPtr, "devPtr", size, cfg, &device);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (device < 0) {
        mock_context *ctx;
        rc = core_ctx_require(fn, &ctx);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
        device = core_ctx_device(ctx);
    }
    return device_alloc(fn, device, size, (uint32_t)policy, true, devPtr);
}

aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy, aclrtMallocConfig *cfg)
{
    return malloc_with_cfg("aclrtMallocWithCfg", devPtr, size, policy, cfg);
}

/* Memory the task scheduler reaches: the mock's device memory is reachable by every
 * engine, so this is aclrtMallocWithCfg under its own name (mock choice). */
aclError aclrtMallocForTaskScheduler(void **devPtr, size_t size, aclrtMemMallocPolicy policy,
                                     aclrtMallocConfig *cfg)
{
    return malloc_with_cfg("aclrtMallocForTaskScheduler", devPtr, size, policy, cfg);
}

aclError mem_malloc(const char *fn, void **devPtr, size_t size)
{
    return malloc_common(fn, devPtr, size, ACL_MEM_MALLOC_HUGE_FIRST, true);
}

mem_rec **mem_registry_collect(unsigned kinds_mask, size_t *n)
{
    *n = 0;
    core_rwlock_rdlock(&g_reg_lock);
    mem_rec **v = g_nreg > 0 ? malloc(g_nreg * sizeof(*v)) : NULL;
    for (size_t i = 0; v != NULL && i < g_nreg; i++) {
        if ((kinds_mask & (1u << g_reg[i]->kind)) != 0) {
            atomic_fetch_add(&g_reg[i]->refs, 1);
            v[(*n)++] = g_reg[i];
        }
    }
    core_rwlock_unlock(&g_reg_lock);
    return v;
}

static void stats_on_free(mem_rec *r)
{
    if (r->kind == MEM_REC_DEVICE || r->kind == MEM_REC_MANAGED) {
        core_stat_add(r->device, MOCK_STAT_ALLOCATIONS, -1);
        core_stat_add(r->device, MOCK_STAT_BYTES, -(int64_t)r->size);
    } else if (r->kind == MEM_REC_HOST_PINNED) {
        core_stat_add(-1, MOCK_STAT_HOST_ALLOCATIONS, -1);
        core_stat_add(-1, MOCK_STAT_HOST_BYTES, -(int64_t)r->size);
    }
}

static const char *kind_name(int kind)
{
    switch (kind) {
    case MEM_REC_DEVICE:
        return "device memory from aclrtMalloc";
    case MEM_REC_HOST_PINNED:
        return "host memory from aclrtMallocHost (use aclrtFreeHost)";
    case MEM_REC_MANAGED:
        return "managed memory";
    case MEM_REC_HOST_REG:
        return "registered host memory (use aclrtHostUnregister)";
    case MEM_REC_VMM_MAP:
        return "a VMM mapping (use aclrtUnmapMem)";
    case MEM_REC_IPC:
        return "memory imported with aclrtIpcMemImportByKey (use aclrtIpcMemClose)";
    default:
        return "unknown memory";
    }
}

/* Freeing something that is not the base of a live allocation (double free,
 * interior or foreign pointer): the driver rejects the address and the
 * runtime reports a free failure; the closest public code is
 * ACL_ERROR_RT_MEMORY_FREE (207002, "memory free error"). */
static aclError free_common(const char *fn, void *ptr, unsigned kinds)
{
    int found;
    bool interior;
    mem_rec *r = mem_registry_remove(ptr, kinds, &found, &interior);
    if (r == NULL) {
        if (interior) {
            return core_error(fn, ACL_ERROR_RT_MEMORY_FREE,
                              "pointer %p is inside %s, not the start of an allocation", ptr, kind_name(found));
        }
        if (found != 0) {
            return core_error(fn, ACL_ERROR_RT_MEMORY_FREE, "pointer %p is %s", ptr, kind_name(found));
        }
        return core_error(fn, ACL_ERROR_RT_MEMORY_FREE,
                          "pointer %p is not a live allocation (double free or foreign pointer)", ptr);
    }
    stats_on_free(r);
    if (core_observing()) { /* race sanitizer: tasks that may still use it; timing: the cost */
        core_observe_simple(CORE_OBS_MEM_FREE, NULL, NULL, (const void *)r->base, r->size,
                            r->kind == MEM_REC_HOST_PINNED ? -1 : r->device);
    }
    if (r->kind == MEM_REC_DEVICE) {
        /* aclrtFree does not wait for tasks still using the memory: the
         * capacity is free at once, while the pages themselves stay mapped
         * until an in-flight copy holding the record lets go. */
        mem_capacity_give(r->device, r->charged);
        r->cap_returned = true;
    }
    int32_t dev = r->kind == MEM_REC_HOST_PINNED ? -1 : r->device;
    mem_release(r); /* the registry's reference */
    /* Memory of a lost device is released, but the call reports the sticky
     * code like every other call on that device (aclmockSetDeviceLost). */
    aclError lost = core_device_lost_code(dev);
    if (lost != ACL_SUCCESS) {
        return core_error(fn, lost, "device %d of the memory at %p is lost (the memory was released)", dev, ptr);
    }
    return ACL_SUCCESS;
}

aclError mem_free(const char *fn, void *devPtr)
{
    return free_common(fn, devPtr, 1u << MEM_REC_DEVICE);
}

aclError aclrtFree(void *devPtr)
{
    const char *fn = "aclrtFree";
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    MOCK_ENTER(fn);
    return free_common(fn, devPtr, (1u << MEM_REC_DEVICE) | (1u << MEM_REC_MANAGED));
}

static aclError sync_current_device(const char *fn)
{
    mock_context *ctx = core_ctx_current();
    if (ctx == NULL) {
        return core_error(fn, ACL_ERROR_RT_CONTEXT_NULL, "no current context on this thread");
    }
    return core_subsystems_ctx_sync(ctx, -1); /* aclrtSynchronizeDevice: every subsystem's work */
}

aclError aclrtFreeWithDevSync(void *devPtr)
{
    const char *fn = "aclrtFreeWithDevSync";
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    MOCK_ENTER(fn);
    aclError rc = sync_current_device(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return free_common(fn, devPtr, (1u << MEM_REC_DEVICE) | (1u << MEM_REC_MANAGED));
}

/* ------------------------------------------------------------ host memory */

static void host_rec_dtor(mem_rec *r)
{
    free((void *)r->base);
}

/* Pinned memory while the race sanitizer is on (README "Race sanitizer"): the
 * sanitizer remembers the last 256 ranges aclrtFreeHost released and reports a task
 * touching them later. That is only true while nobody else can get those addresses,
 * so such memory is mapped on its own (not from the malloc heap) and, once freed, its
 * pages are dropped but the addresses stay reserved (readable zeros) in a quarantine
 * of HOST_QUARANTINE ranges - more than the sanitizer remembers - before they go back
 * to the system. Without it, a numpy array or bytearray that malloc placed where a
 * freed HostBuffer was looked like a use of freed memory. */
#define HOST_QUARANTINE 512u
typedef struct host_quarantined {
    void *p;
    size_t len;
} host_quarantined;
static _Atomic(host_quarantined *) g_quarantine[HOST_QUARANTINE];
static atomic_size_t g_quarantine_next;

static bool host_sanitized(void)
{
    return (atomic_load_explicit(&core_observing_mask_, memory_order_relaxed) & CORE_OBSERVE_SANITIZER) != 0;
}

static size_t host_map_len(const mem_rec *r)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return round_up(r->size, page);
}

static void host_mapped_dtor(mem_rec *r)
{
    size_t len = host_map_len(r);
    void *p = (void *)r->base;
    host_quarantined *q = malloc(sizeof *q);
    /* drop the pages, keep the addresses */
    if (q == NULL || mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
                          -1, 0) == MAP_FAILED) {
        free(q);
        munmap(p, len);
        return;
    }
    q->p = p;
    q->len = len;
    size_t slot = atomic_fetch_add(&g_quarantine_next, 1) % HOST_QUARANTINE;
    host_quarantined *old = atomic_exchange(&g_quarantine[slot], q);
    if (old != NULL) {
        munmap(old->p, old->len);
        free(old);
    }
}

static aclError host_alloc(const char *fn, void **out, uint64_t size)
{
    /* Beyond 1 TiB no host could pin it (and sanitizer allocators abort on
     * such requests instead of failing): refuse up front. */
    if (size > ((uint64_t)1 << 40)) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "size %llu is too large for host memory",
                          (unsigned long long)size);
    }
    void *p = NULL;
    bool mapped = host_sanitized();
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (mapped) {
        p = mmap(NULL, round_up((size_t)size, page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            p = NULL;
        }
    } else if (posix_memalign(&p, 64, round_up((size_t)size, 64)) != 0) {
        p = NULL;
    }
    if (p == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot allocate %llu bytes of host memory",
                          (unsigned long long)size);
    }
    mem_rec *r = mem_rec_new(MEM_REC_HOST_PINNED, (uintptr_t)p, (size_t)size, -1);
    if (r == NULL) {
        if (mapped) {
            munmap(p, round_up((size_t)size, page));
        } else {
            free(p);
        }
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    r->dtor = mapped ? host_mapped_dtor : host_rec_dtor;
    aclError rc = mem_register_allocation(fn, r, -1, size);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *out = p;
    return ACL_SUCCESS;
}

aclError aclrtMallocHost(void **hostPtr, size_t size)
{
    const char *fn = "aclrtMallocHost";
    MOCK_REQUIRE_NONNULL(fn, hostPtr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_ENTER(fn);
    return host_alloc(fn, hostPtr, size);
}

aclError aclrtMallocHostWithCfg(void **ptr, uint64_t size, aclrtMallocConfig *cfg)
{
    const char *fn = "aclrtMallocHostWithCfg";
    int32_t device = -1;
    aclError rc = cfg_alloc_front(fn, ptr, "ptr", size, cfg, &device);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return host_alloc(fn, ptr, size);
}

aclError aclrtFreeHost(void *hostPtr)
{
    const char *fn = "aclrtFreeHost";
    MOCK_REQUIRE_NONNULL(fn, hostPtr);
    MOCK_ENTER(fn);
    return free_common(fn, hostPtr, 1u << MEM_REC_HOST_PINNED);
}

aclError aclrtFreeHostWithDevSync(void *hostPtr)
{
    const char *fn = "aclrtFreeHostWithDevSync";
    MOCK_REQUIRE_NONNULL(fn, hostPtr);
    MOCK_ENTER(fn);
    aclError rc = sync_current_device(fn);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return free_common(fn, hostPtr, 1u << MEM_REC_HOST_PINNED);
}

/* ---------------------------------------------------------------- queries */

aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free_out, size_t *total)
{
    const char *fn = "aclrtGetMemInfo";
    if (free_out == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'free' is NULL");
    }
    MOCK_REQUIRE_NONNULL(fn, total);
    if ((int)attr < ACL_DDR_MEM || (int)attr > ACL_MEM_P2P_HUGE1G) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'attr' %d is not an aclrtMemAttr", (int)attr);
    }
    MOCK_ENTER(fn);
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    switch ((int)attr) {
    case ACL_DDR_MEM:
    case ACL_DDR_MEM_HUGE:
    case ACL_DDR_MEM_NORMAL:
    case ACL_DDR_MEM_P2P_HUGE:
    case ACL_DDR_MEM_P2P_NORMAL:
        /* The simulated card (Ascend910B) has HBM only: a DDR query is an
         * unsupported attribute, which reports 0/0 (doc). */
        *free_out = 0;
        *total = 0;
        return ACL_SUCCESS;
    default:
        break;
    }
    uint64_t used, peak, cap;
    dev_used(core_ctx_device(ctx), &used, &peak, &cap);
    *total = (size_t)cap;
    *free_out = (size_t)(used > cap ? 0 : cap - used);
    return ACL_SUCCESS;
}

aclError aclrtGetMemUsageInfo(int32_t deviceId, aclrtMemUsageInfo *memUsageInfo, size_t inputNum,
                              size_t *outputNum)
{
    const char *fn = "aclrtGetMemUsageInfo";
    MOCK_REQUIRE_NONNULL(fn, memUsageInfo);
    MOCK_REQUIRE_NONNULL(fn, outputNum);
    if (inputNum == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'inputNum' is 0");
    }
    MOCK_ENTER(fn);
    aclError rc = core_device_check(fn, deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    uint64_t used, peak, cap;
    dev_used(deviceId, &used, &peak, &cap);
    /* The simulator has a single memory consumer: the runtime allocator. */
    memset(&memUsageInfo[0], 0, sizeof(memUsageInfo[0]));
    snprintf(memUsageInfo[0].name, sizeof(memUsageInfo[0].name), "%s", "RUNTIME");
    memUsageInfo[0].curMemSize = used;
    memUsageInfo[0].memPeakSize = peak;
    *outputNum = 1;
    return ACL_SUCCESS;
}

aclError aclrtPointerGetAttributes(const void *ptr, aclrtPtrAttributes *attributes)
{
    const char *fn = "aclrtPointerGetAttributes";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    MOCK_REQUIRE_NONNULL(fn, attributes);
    MOCK_ENTER(fn);
    memset(attributes, 0, sizeof(*attributes));
    mem_rec *r = mem_acquire(ptr);
    if (r == NULL) {
        attributes->location.type = ACL_MEM_LOCATION_TYPE_UNREGISTERED;
        attributes->location.id = 0;
        attributes->pageSize = (uint32_t)mem_page_size();
        return ACL_SUCCESS;
    }
    switch (r->kind) {
    case MEM_REC_DEVICE:
    case MEM_REC_VMM_MAP:
    case MEM_REC_IPC:
        attributes->location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
        attributes->location.id = (uint32_t)r->device;
        break;
    case MEM_REC_MANAGED:
        attributes->location.type = ACL_MEM_LOCATION_TYPE_MANAGED;
        attributes->location.id = (uint32_t)(r->device < 0 ? 0 : r->device);
        break;
    default:
        attributes->location.type = ACL_MEM_LOCATION_TYPE_HOST;
        attributes->location.id = 0;
        break;
    }
    attributes->pageSize = r->page_size;
    mem_release(r);
    return ACL_SUCCESS;
}

aclError aclrtCheckMemType(void **addrList, uint32_t size, uint32_t memType, uint32_t *checkResult,
                           uint32_t reserve)
{
    const char *fn = "aclrtCheckMemType";
    const uint32_t known = ACL_RT_MEM_TYPE_DEV | ACL_RT_MEM_TYPE_DVPP | ACL_RT_MEM_TYPE_RSVD;
    (void)reserve;
    MOCK_REQUIRE_NONNULL(fn, addrList);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_REQUIRE_NONNULL(fn, checkResult);
    if (memType == 0 || (memType & ~known) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'memType' 0x%x is not a combination of "
                          "ACL_RT_MEM_TYPE_DEV/DVPP/RSVD", memType);
    }
    MOCK_ENTER(fn);
    uint32_t ok = 1;
    for (uint32_t i = 0; i < size && ok; i++) {
        bool match = false;
        mem_rec *r = mem_acquire(addrList[i]);
        if (r != NULL) {
            if ((memType & ACL_RT_MEM_TYPE_DEV) && (r->kind == MEM_REC_DEVICE || r->kind == MEM_REC_IPC)) {
                match = true;
            }
            if ((memType & ACL_RT_MEM_TYPE_RSVD) && r->kind == MEM_REC_VMM_MAP) {
                match = true;
            }
            /* the simulator has no DVPP memory pool */
            mem_release(r);
        } else if ((memType & ACL_RT_MEM_TYPE_RSVD) && addrList[i] != NULL &&
                   mem_vmm_in_reservation(addrList[i], 1)) {
            match = true;
        }
        ok = match ? 1 : 0;
    }
    *checkResult = ok;
    return ACL_SUCCESS;
}

aclError aclrtMemGetAddressRange(void *ptr, void **pbase, size_t *psize)
{
    const char *fn = "aclrtMemGetAddressRange";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (pbase == NULL && psize == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "arguments 'pbase' and 'psize' are both NULL");
    }
    MOCK_ENTER(fn);
    /* Any allocation of the runtime: device (aclrtMalloc*, VMM mappings),
     * managed and page-locked host memory (aclrtMallocHost*). Registered
     * host ranges are the user's memory, not an allocation. */
    mem_rec *r = mem_acquire(ptr);
    if (r == NULL || r->kind == MEM_REC_HOST_REG) {
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "pointer %p is not inside memory allocated by the runtime (device, managed or "
                          "aclrtMallocHost memory)",
                          ptr);
    }
    if (pbase != NULL) {
        *pbase = (void *)r->base;
    }
    if (psize != NULL) {
        *psize = r->size;
    }
    mem_release(r);
    return ACL_SUCCESS;
}

/* Cache maintenance: host and simulated device share coherent memory, so the
 * operations only validate their arguments. */
static aclError cache_op(const char *fn, void *devPtr, size_t size)
{
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_ENTER(fn);
    mem_rec *r = mem_acquire(devPtr);
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "pointer %p is not memory allocated by the runtime",
                          devPtr);
    }
    bool oob = (uintptr_t)devPtr - r->base > r->size || size > r->size - ((uintptr_t)devPtr - r->base);
    size_t rsize = r->size;
    mem_release(r);
    if (oob) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "range of %zu bytes at %p overruns its %zu-byte allocation",
                          size, devPtr, rsize);
    }
    return ACL_SUCCESS;
}

aclError aclrtMemFlush(void *devPtr, size_t size)
{
    return cache_op("aclrtMemFlush", devPtr, size);
}

aclError aclrtMemInvalidate(void *devPtr, size_t size)
{
    return cache_op("aclrtMemInvalidate", devPtr, size);
}

/* ---------------------------------------------------- host registration */

static aclError host_register(const char *fn, void *ptr, uint64_t size, uint32_t policy, bool readonly)
{
    if (size > SIZE_MAX || (uintptr_t)ptr + size < (uintptr_t)ptr) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' %llu wraps the address space",
                          (unsigned long long)size);
    }
    if (mem_in_dead_space(ptr, (size_t)size)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "range at %p is device address space, not host memory",
                          ptr);
    }
    if (!mem_host_mapped(ptr, (size_t)size)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "range of %llu bytes at %p is not mapped memory",
                          (unsigned long long)size, ptr);
    }
    mem_rec *r = mem_rec_new(MEM_REC_HOST_REG, (uintptr_t)ptr, (size_t)size, -1);
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    r->policy = policy;
    r->readonly = readonly;
    mock_context *ctx = core_ctx_current();
    r->device = ctx != NULL ? core_ctx_device(ctx) : 0;
    if (!mem_registry_insert(r)) {
        mem_release(r);
        return core_error(fn, ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                          "range of %llu bytes at %p overlaps memory already registered or allocated by the runtime",
                          (unsigned long long)size, ptr);
    }
    return ACL_SUCCESS;
}

aclError aclrtHostRegister(void *ptr, uint64_t size, aclrtHostRegisterType type, void **devPtr)
{
    const char *fn = "aclrtHostRegister";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_REQUIRE_NONNULL(fn, devPtr);
    if ((int)type != ACL_HOST_REGISTER_MAPPED && (int)type != ACL_HOST_REGISTER_IOMEMORY &&
        (int)type != ACL_HOST_REGISTER_READONLY) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'type' %d is not an aclrtHostRegisterType",
                          (int)type);
    }
    MOCK_ENTER(fn);
    aclError rc = host_register(fn, ptr, size, ACL_HOST_REG_MAPPED | (uint32_t)type,
                                (int)type == ACL_HOST_REGISTER_READONLY);
    if (rc == ACL_SUCCESS) {
        /* The simulated device shares the host's address space (unified
         * addressing): the device view of registered memory is the same
         * address. */
        *devPtr = ptr;
    }
    return rc;
}

aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag)
{
    const char *fn = "aclrtHostRegisterV2";
    const uint64_t known = ACL_HOST_REG_MAPPED | ACL_HOST_REG_IOMEMORY | ACL_HOST_REG_READONLY | ACL_HOST_REG_PINNED;
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    if (flag == 0 || ((uint64_t)flag & ~known) != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'flag' 0x%x is not a combination of ACL_HOST_REG_* flags", flag);
    }
    MOCK_ENTER(fn);
    return host_register(fn, ptr, size, flag, (flag & ACL_HOST_REG_READONLY) != 0);
}

aclError aclrtHostUnregister(void *ptr)
{
    const char *fn = "aclrtHostUnregister";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    MOCK_ENTER(fn);
    int found;
    bool interior;
    mem_rec *r = mem_registry_remove(ptr, 1u << MEM_REC_HOST_REG, &found, &interior);
    if (r == NULL) {
        return core_error(fn, ACL_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer %p is not the start of a registered "
                          "host range", ptr);
    }
    mem_release(r);
    return ACL_SUCCESS;
}

aclError aclrtHostGetDevicePointer(void *pHost, void **pDevice, uint32_t flag)
{
    const char *fn = "aclrtHostGetDevicePointer";
    MOCK_REQUIRE_NONNULL(fn, pHost);
    MOCK_REQUIRE_NONNULL(fn, pDevice);
    if (flag != 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flag' must be 0, got %u", flag);
    }
    MOCK_ENTER(fn);
    mem_rec *r = mem_acquire(pHost);
    bool ok = r != NULL && (r->kind == MEM_REC_HOST_REG || r->kind == MEM_REC_HOST_PINNED ||
                            r->kind == MEM_REC_MANAGED);
    bool mapped = ok && (r->kind != MEM_REC_HOST_REG || (r->policy & ACL_HOST_REG_MAPPED) != 0);
    mem_release(r);
    if (!ok) {
        return core_error(fn, ACL_ERROR_HOST_MEMORY_NOT_REGISTERED,
                          "pointer %p is not registered or runtime-allocated host memory", pHost);
    }
    if (!mapped) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "pointer %p was registered without ACL_HOST_REG_MAPPED",
                          pHost);
    }
    *pDevice = pHost; /* unified addressing, see aclrtHostRegister */
    return ACL_SUCCESS;
}

aclError aclrtHostMemMapCapabilities(uint32_t deviceId, aclrtHacType hacType,
                                     aclrtHostMemMapCapability *capabilities)
{
    const char *fn = "aclrtHostMemMapCapabilities";
    MOCK_REQUIRE_NONNULL(fn, capabilities);
    if ((int)hacType < ACL_RT_HAC_TYPE_STARS || (int)hacType > ACL_RT_HAC_TYPE_CCU) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'hacType' %d is not an aclrtHacType", (int)hacType);
    }
    MOCK_ENTER(fn);
    if (deviceId > INT32_MAX) {
        return core_error(fn, ACL_ERROR_RT_INVALID_DEVICEID, "device id %u is invalid", deviceId);
    }
    aclError rc = core_device_check(fn, (int32_t)deviceId);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    /* Every engine of the simulated device reaches host memory directly. */
    *capabilities = ACL_RT_HOST_MEM_MAP_SUPPORTED;
    return ACL_SUCCESS;
}

/* --------------------------------------------------------------- finalize */

MOCK_HIDDEN void mem_finalize(void)
{
    mem_copy_finalize();
    /* Drop every live record (the leak report has already been printed). */
    for (;;) {
        core_rwlock_wrlock(&g_reg_lock);
        if (g_nreg == 0) {
            core_rwlock_unlock(&g_reg_lock);
            break;
        }
        mem_rec *r = g_reg[g_nreg - 1];
        g_nreg--;
        atomic_store(&r->freed, true);
        core_rwlock_unlock(&g_reg_lock);
        stats_on_free(r);
        mem_release(r);
    }
    mem_vmm_finalize();
    mem_peer_finalize();
    core_rwlock_wrlock(&g_reg_lock);
    free(g_reg);
    g_reg = NULL;
    g_capreg = 0;
    core_rwlock_unlock(&g_reg_lock);
    pthread_once(&g_dev_once, dev_init_once);
    for (int i = 0; i < MOCK_MAX_DEVICES; i++) {
        dev_region *d = &g_dev[i];
        core_mutex_lock(&d->lock);
        uintptr_t b = atomic_load(&d->base);
        if (b != 0) {
            munmap((void *)b, atomic_load(&d->vsize));
        }
        if (d->fd >= 0) {
            close(d->fd); /* pages another process still maps stay alive in its mapping */
            d->fd = -1;
        }
        atomic_store(&d->base, 0);
        atomic_store(&d->vsize, 0);
        free(d->free);
        d->free = NULL;
        d->nfree = d->capfree = 0;
        d->tried = false;
        d->used = 0;
        d->peak = 0;
        d->capacity = 0;
        core_mutex_unlock(&d->lock);
    }
}
