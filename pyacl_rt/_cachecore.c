/*
 * pyacl_rt._cachecore - block bookkeeping of the caching device allocator.
 *
 * One Core per device. It never talks to the runtime: pyacl_rt/_allocator/ allocates and
 * frees segments (aclrtMalloc/aclrtFree), records events, handles OOM, and calls in here
 * for everything that is pure bookkeeping, so that the hit path (a cached block handed
 * out, a block given back) is one C call each.
 *
 * Semantics follow PyTorch's CUDA caching allocator:
 *   - requests are rounded up to a multiple of 512 bytes (MIN_BLOCK);
 *   - blocks <= 1 MiB come from the small pool (2 MiB segments), larger ones from the
 *     large pool (20 MiB segments for requests < 10 MiB, else the request rounded up to
 *     2 MiB); allocation_size() says which segment size to allocate on a miss;
 *   - a free block is found best-fit among the free blocks of the *same stream*
 *     (ordered by stream, size, address); it is split when the rest is >= 512 bytes
 *     (small pool) or > 1 MiB (large pool); freed blocks merge with free neighbours;
 *   - adopt() moves wholly free segments to another stream (the caller checked that
 *     the old stream's work completed);
 *   - a block freed while other streams may still use it goes PENDING (not reusable)
 *     until the Python side saw the guarding events complete and calls complete();
 *   - statistics as torch's memory_stats(): allocation / segment / active /
 *     inactive_split counts and *_bytes, each for all / small / large pool with
 *     current / peak / allocated / freed.
 *
 * Sizes: every size computation is overflow-checked. Requests above MAX_ALLOC
 * (2**63 - 2 MiB: rounded up to a 2 MiB segment it still fits the signed 64-bit byte
 * counters) are never served: alloc() reports a miss for them and the Python slow
 * path refuses them with a typed error before anything is allocated; round_size() and
 * allocation_size() raise OverflowError; add_segment() refuses a segment that would
 * wrap the address space or the reserved-bytes counter. Accumulated totals
 * (allocated / freed) saturate at INT64_MAX instead of wrapping.
 *
 * HostCore does the same for the pinned host pool (pyacl_rt/_allocator/_host.py), and the
 * capsule _C_API (pyacl_rt/_cacheapi.h) exports the hit paths of both to pyacl_rt._memcore,
 * whose buffer types call them directly: a cached DeviceBuffer / HostBuffer life is C only.
 *
 * Thread safety: every method runs with the GIL held and never releases it or calls
 * back into Python; Python objects are created only after all mutation is done (a
 * garbage-collection finalizer that frees a buffer may run whenever an object is
 * created, and it calls back into this Core).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_cacheapi.h"

#define MIN_BLOCK ((uint64_t)512)
#define SMALL_SIZE ((uint64_t)1 << 20)
#define SMALL_BUFFER ((uint64_t)2 << 20)
#define LARGE_BUFFER ((uint64_t)20 << 20)
#define MIN_LARGE_ALLOC ((uint64_t)10 << 20)
#define ROUND_LARGE ((uint64_t)2 << 20)
/* The largest request served: 2**63 - 2 MiB (a multiple of ROUND_LARGE <= INT64_MAX). */
#define MAX_ALLOC ((uint64_t)INT64_MAX - ROUND_LARGE + 1)
/* Spare Block structs kept for splits (no malloc/free per split + merge). */
#define SPARE_MAX 64

enum { ST_FREE = 0, ST_ALLOC = 1, ST_PENDING = 2 };
enum { POOL_SMALL = 0, POOL_LARGE = 1 };
enum {
    K_ALLOCATION,
    K_SEGMENT,
    K_ACTIVE,
    K_INACTIVE_SPLIT,
    K_ALLOCATED_BYTES,
    K_RESERVED_BYTES,
    K_ACTIVE_BYTES,
    K_INACTIVE_SPLIT_BYTES,
    K_REQUESTED_BYTES,
    K_OVERSIZE_ALLOCATIONS,
    K_OVERSIZE_SEGMENTS,
    NKIND
};
#define NSTAT (NKIND * 3 * 4)

typedef struct Segment Segment;
typedef struct Block {
    uint64_t ptr, size, requested, stream;
    struct Block *prev, *next;
    Segment *seg;
    int state;
    int pool;
    int region; /* registered with the mock's race sanitizer (set_region_hooks) */
} Block;

/* The race sanitizer of the mock (pyacl_rt._sanitize, set_region_hooks): each block handed
 * out is registered as a sub-allocation region (aclmockMemRegionRegister) and
 * unregistered when it is given back, so that a kernel pointer argument without a
 * declared extent stops at the end of its block, not of the segment. NULL (off): one
 * load and branch per alloc / free. */
typedef int32_t (*RegionRegisterFn)(const void *ptr, size_t size);
typedef int32_t (*RegionUnregisterFn)(const void *ptr);
static RegionRegisterFn g_region_register;
static RegionUnregisterFn g_region_unregister;

struct Segment {
    uint64_t base, size, stream;
    uint64_t free_tick; /* value of Core.tick when it last became wholly free */
    int pool;
    Block *head;
};

typedef struct {
    Block **v;
    size_t n, cap;
} BlockSet;

typedef struct {
    PyObject_HEAD
    BlockSet free[2];
    /* active (allocated or pending) blocks by address: open addressing, linear probing */
    uint64_t *hkeys;
    Block **hvals;
    size_t hcap, hcount;
    Segment **segs;
    size_t nseg, segcap;
    int64_t stats[NKIND][3][4];
    uint64_t max_split;
    uint64_t tick; /* bumped whenever a segment becomes wholly free */
    int64_t trim_permille; /* free() reports reserved > this/1000 * peak allocated */
    Block *spare;          /* free list of Block structs (linked through next) */
    size_t nspare;
} Core;

/* ------------------------------------------------------------------ helpers */
/* Block size of a request: a multiple of 512 bytes. Callers pass n <= MAX_ALLOC (no
 * overflow: MAX_ALLOC is a multiple of 512). */
static inline uint64_t round_size(uint64_t n)
{
    if (n < MIN_BLOCK) {
        return MIN_BLOCK;
    }
    return (n + MIN_BLOCK - 1) & ~(MIN_BLOCK - 1);
}

/* Segment size for a block of `size` bytes (size <= MAX_ALLOC, a multiple of 2 MiB). */
static uint64_t allocation_size(uint64_t size)
{
    if (size <= SMALL_SIZE) {
        return SMALL_BUFFER;
    }
    if (size < MIN_LARGE_ALLOC) {
        return LARGE_BUFFER;
    }
    return (size + ROUND_LARGE - 1) & ~(ROUND_LARGE - 1);
}

/* Accumulated totals saturate rather than overflow (signed overflow is undefined). */
static inline void sat_add(int64_t *v, int64_t d)
{
    if (__builtin_add_overflow(*v, d, v)) {
        *v = INT64_MAX;
    }
}

/* One counter row [current, peak, allocated, freed] up by d >= 0 / down by d >= 0.
 * Current values stay within 0 .. INT64_MAX: byte counts are bounded by the reserved
 * bytes, which add_segment keeps <= INT64_MAX. */
static inline void row_up(int64_t *s, int64_t d)
{
    s[0] += d;
    if (s[0] > s[1]) {
        s[1] = s[0];
    }
    sat_add(&s[2], d);
}

static inline void row_down(int64_t *s, int64_t d)
{
    s[0] -= d;
    sat_add(&s[3], d);
}

static inline void stat_up(Core *c, int kind, int pool, int64_t d)
{
    row_up(c->stats[kind][0], d);
    row_up(c->stats[kind][pool + 1], d);
}

static inline void stat_down(Core *c, int kind, int pool, int64_t d)
{
    row_down(c->stats[kind][0], d);
    row_down(c->stats[kind][pool + 1], d);
}

static inline void stat_add(Core *c, int kind, int pool, int64_t delta)
{
    if (delta >= 0) {
        stat_up(c, kind, pool, delta);
    } else {
        stat_down(c, kind, pool, -delta);
    }
}

/* Oversize stats exist only for "all" in torch. */
static inline void stat_add_all(Core *c, int kind, int64_t delta)
{
    if (delta >= 0) {
        row_up(c->stats[kind][0], delta);
    } else {
        row_down(c->stats[kind][0], -delta);
    }
}

/* Block structs: a short free list saves a malloc + free per split and merge. */
static inline Block *block_new(Core *c)
{
    Block *b = c->spare;
    if (b != NULL) {
        c->spare = b->next;
        c->nspare--;
        return b;
    }
    return malloc(sizeof(*b));
}

static inline void block_release(Core *c, Block *b)
{
    if (c->nspare < SPARE_MAX) {
        b->next = c->spare;
        c->spare = b;
        c->nspare++;
        return;
    }
    free(b);
}

/* n * size bytes, or 0 when that overflows size_t. */
static size_t array_bytes(size_t n, size_t size)
{
    size_t out;
    return __builtin_mul_overflow(n, size, &out) ? 0 : out;
}

/* ------------------------------------------------------------- sorted sets */
static int key_less(const Block *b, uint64_t stream, uint64_t size, uint64_t ptr)
{
    if (b->stream != stream) {
        return b->stream < stream;
    }
    if (b->size != size) {
        return b->size < size;
    }
    return b->ptr < ptr;
}

static size_t set_lower_bound(const BlockSet *s, uint64_t stream, uint64_t size, uint64_t ptr)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_less(s->v[mid], stream, size, ptr)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

static int set_reserve(BlockSet *s, size_t extra)
{
    if (s->n + extra <= s->cap) {
        return 0;
    }
    size_t want, cap = s->cap ? s->cap : 64;
    if (__builtin_add_overflow(s->n, extra, &want)) {
        return -1;
    }
    while (cap < want) {
        if (__builtin_mul_overflow(cap, (size_t)2, &cap)) {
            return -1;
        }
    }
    size_t bytes = array_bytes(cap, sizeof(Block *));
    Block **v = bytes ? realloc(s->v, bytes) : NULL;
    if (v == NULL) {
        return -1;
    }
    s->v = v;
    s->cap = cap;
    return 0;
}

/* Caller reserved room. */
static void set_insert(BlockSet *s, Block *b)
{
    size_t i = set_lower_bound(s, b->stream, b->size, b->ptr);
    memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof(*s->v));
    s->v[i] = b;
    s->n++;
}

static void set_remove_at(BlockSet *s, size_t i)
{
    memmove(s->v + i, s->v + i + 1, (s->n - i - 1) * sizeof(*s->v));
    s->n--;
}

/* Whether b may take slot i (replacing the block there) and keep the set ordered. */
static inline int set_fits(const BlockSet *s, size_t i, const Block *b)
{
    return (i == 0 || key_less(s->v[i - 1], b->stream, b->size, b->ptr)) &&
           (i + 1 >= s->n || !key_less(s->v[i + 1], b->stream, b->size, b->ptr));
}

static void set_remove(BlockSet *s, Block *b)
{
    size_t i = set_lower_bound(s, b->stream, b->size, b->ptr);
    if (i < s->n && s->v[i] == b) {
        set_remove_at(s, i);
    }
}

/* ------------------------------------------------------------- active hash */
static size_t h_slot(const Core *c, uint64_t key)
{
    return (size_t)(((key >> 6) * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & (c->hcap - 1);
}

static Block *h_get(const Core *c, uint64_t key)
{
    if (c->hcap == 0) {
        return NULL;
    }
    for (size_t i = h_slot(c, key);; i = (i + 1) & (c->hcap - 1)) {
        if (c->hkeys[i] == key) {
            return c->hvals[i];
        }
        if (c->hkeys[i] == 0) {
            return NULL;
        }
    }
}

static void h_put_nogrow(Core *c, uint64_t key, Block *b)
{
    size_t i = h_slot(c, key);
    while (c->hkeys[i] != 0 && c->hkeys[i] != key) {
        i = (i + 1) & (c->hcap - 1);
    }
    if (c->hkeys[i] == 0) {
        c->hcount++;
    }
    c->hkeys[i] = key;
    c->hvals[i] = b;
}

/* Make room for one more entry (before any mutation). */
static int h_reserve(Core *c)
{
    if ((c->hcount + 1) * 2 <= c->hcap) {
        return 0;
    }
    size_t ncap = c->hcap ? c->hcap * 2 : 256;
    if (ncap < c->hcap || array_bytes(ncap, sizeof(uint64_t)) == 0 ||
        array_bytes(ncap, sizeof(Block *)) == 0) {
        return -1;
    }
    uint64_t *ok = c->hkeys;
    Block **ov = c->hvals;
    size_t ocap = c->hcap;
    uint64_t *nk = calloc(ncap, sizeof(*nk));
    Block **nv = calloc(ncap, sizeof(*nv));
    if (nk == NULL || nv == NULL) {
        free(nk);
        free(nv);
        return -1;
    }
    c->hkeys = nk;
    c->hvals = nv;
    c->hcap = ncap;
    c->hcount = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (ok[i] != 0) {
            h_put_nogrow(c, ok[i], ov[i]);
        }
    }
    free(ok);
    free(ov);
    return 0;
}

static void h_del(Core *c, uint64_t key)
{
    if (c->hcap == 0) {
        return;
    }
    size_t mask = c->hcap - 1;
    size_t i = h_slot(c, key);
    while (c->hkeys[i] != key) {
        if (c->hkeys[i] == 0) {
            return;
        }
        i = (i + 1) & mask;
    }
    /* backward-shift deletion */
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (c->hkeys[j] == 0) {
            break;
        }
        size_t home = h_slot(c, c->hkeys[j]);
        /* move j to i if home is cyclically outside (i, j] */
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            c->hkeys[i] = c->hkeys[j];
            c->hvals[i] = c->hvals[j];
            i = j;
        }
    }
    c->hkeys[i] = 0;
    c->hvals[i] = NULL;
    c->hcount--;
}

/* ---------------------------------------------------------------- arguments */
static int u64_arg(PyObject *o, uint64_t *out, const char *what)
{
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "_cachecore: %s must be an int", what);
        return -1;
    }
#if ULONG_MAX == UINT64_MAX
    /* PyLong_AsUnsignedLong converts multi-digit ints with a digit loop; the
     * long long variant goes through the generic byte-array conversion. */
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) {
        return -1;
    }
#else
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        return -1;
    }
#endif
    *out = (uint64_t)v;
    return 0;
}

static int nargs_ok(Py_ssize_t n, Py_ssize_t want, const char *name)
{
    if (n != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", name, want, n);
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ core ops */
static void free_block(Core *c, Block *b)
{
    uint64_t orig = b->size;
    BlockSet *set = &c->free[b->pool];
    int64_t net_blocks = 0, net_bytes = 0;
    h_del(c, b->ptr);
    Block *cands[2] = {b->prev, b->next};
    int nfree = (cands[0] != NULL && cands[0]->state == ST_FREE) +
                (cands[1] != NULL && cands[1]->state == ST_FREE);
    size_t slot = SIZE_MAX; /* one free neighbour: b may take its slot in the set */
    for (int k = 0; k < 2; k++) {
        Block *src = cands[k];
        if (src == NULL || src->state != ST_FREE) {
            continue;
        }
        if (nfree == 1) {
            size_t j = set_lower_bound(set, src->stream, src->size, src->ptr);
            if (j < set->n && set->v[j] == src) {
                slot = j;
            }
        } else {
            set_remove(set, src);
        }
        if (src == b->prev) {
            b->ptr = src->ptr;
            b->prev = src->prev;
            if (b->prev != NULL) {
                b->prev->next = b;
            }
            if (b->seg->head == src) {
                b->seg->head = b;
            }
        } else {
            b->next = src->next;
            if (b->next != NULL) {
                b->next->prev = b;
            }
        }
        b->size += src->size;
        net_blocks -= 1;
        net_bytes -= (int64_t)src->size;
        block_release(c, src);
    }
    b->state = ST_FREE;
    b->requested = 0;
    if (slot != SIZE_MAX && set_fits(set, slot, b)) {
        set->v[slot] = b; /* the merged block keeps the neighbour's place */
    } else {
        if (slot != SIZE_MAX) {
            set_remove_at(set, slot);
        }
        set_insert(set, b); /* room reserved by the caller */
    }
    if (b->prev != NULL || b->next != NULL) {
        net_blocks += 1;
        net_bytes += (int64_t)b->size;
    }
    if (b->prev == NULL && b->next == NULL) {
        b->seg->free_tick = ++c->tick;
    }
    if (net_blocks) {
        stat_add(c, K_INACTIVE_SPLIT, b->pool, net_blocks);
    }
    if (net_bytes) {
        stat_add(c, K_INACTIVE_SPLIT_BYTES, b->pool, net_bytes);
    }
    stat_down(c, K_ACTIVE, b->pool, 1);
    stat_down(c, K_ACTIVE_BYTES, b->pool, (int64_t)orig);
}

/* alloc(stream, nbytes) -> address, or 0 when no cached block fits (allocate a segment
 * of allocation_size(nbytes), add_segment() it and call again). */
/* The address of a cached block for (stream, nbytes), 0 on a miss, or 0 with an
 * exception set (out of host memory). */
static uint64_t alloc_impl(Core *c, uint64_t stream, uint64_t nbytes)
{
    if (nbytes > MAX_ALLOC) {
        return 0; /* never served: the slow path raises the typed error */
    }
    uint64_t size = round_size(nbytes);
    int pool = size <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
    BlockSet *set = &c->free[pool];
    size_t i = set_lower_bound(set, stream, size, 0);
    if (i == set->n || set->v[i]->stream != stream) {
        return 0;
    }
    Block *b = set->v[i];
    if ((size < c->max_split && b->size >= c->max_split) ||
        (size >= c->max_split && b->size - size >= LARGE_BUFFER)) {
        return 0;
    }
    if (h_reserve(c) < 0) {
        PyErr_NoMemory();
        return 0;
    }
    uint64_t remaining = b->size - size;
    int split = pool == POOL_SMALL ? remaining >= MIN_BLOCK
                                   : (size < c->max_split && remaining > SMALL_SIZE);
    Block *r = NULL;
    if (split) {
        r = block_new(c);
        if (r == NULL) {
            split = 0; /* hand out the whole block rather than fail */
        }
    }
    int already_split = b->prev != NULL || b->next != NULL;
    if (split) {
        r->ptr = b->ptr + size;
        r->size = remaining;
        r->requested = 0;
        r->stream = b->stream;
        r->seg = b->seg;
        r->pool = b->pool;
        r->state = ST_FREE;
        r->prev = b;
        r->next = b->next;
        if (b->next != NULL) {
            b->next->prev = r;
        }
        b->next = r;
        b->size = size;
        if (set_fits(set, i, r)) {
            set->v[i] = r; /* the rest keeps b's place (usual: best fit, big rest) */
        } else {
            set_remove_at(set, i);
            set_insert(set, r); /* b's slot was just freed */
        }
        if (already_split) {
            stat_add(c, K_INACTIVE_SPLIT_BYTES, pool, -(int64_t)size);
        } else {
            stat_add(c, K_INACTIVE_SPLIT_BYTES, pool, (int64_t)remaining);
            stat_add(c, K_INACTIVE_SPLIT, pool, 1);
        }
    } else {
        set_remove_at(set, i);
        if (already_split) {
            stat_add(c, K_INACTIVE_SPLIT_BYTES, pool, -(int64_t)b->size);
            stat_add(c, K_INACTIVE_SPLIT, pool, -1);
        }
    }
    b->state = ST_ALLOC;
    b->requested = nbytes;
    b->region = 0;
    if (g_region_register != NULL && nbytes != 0) {
        b->region = g_region_register((const void *)(uintptr_t)b->ptr, (size_t)nbytes) == 0;
    }
    h_put_nogrow(c, b->ptr, b);
    stat_up(c, K_ALLOCATION, pool, 1);
    stat_up(c, K_ALLOCATED_BYTES, pool, (int64_t)b->size);
    stat_up(c, K_ACTIVE, pool, 1);
    stat_up(c, K_ACTIVE_BYTES, pool, (int64_t)b->size);
    stat_up(c, K_REQUESTED_BYTES, pool, (int64_t)nbytes);
    if (b->size >= c->max_split) {
        stat_add_all(c, K_OVERSIZE_ALLOCATIONS, 1);
    }
    return b->ptr;
}

static PyObject *core_alloc(Core *c, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t stream, nbytes;
    if (!nargs_ok(nargs, 2, "alloc") || u64_arg(args[0], &stream, "stream") ||
        u64_arg(args[1], &nbytes, "nbytes")) {
        return NULL;
    }
    uint64_t p = alloc_impl(c, stream, nbytes);
    if (p == 0 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(p);
}

/* Shared by free() and free_pending(): ALLOC -> no longer allocated. */
static Block *release_alloc_ptr(Core *c, uint64_t ptr)
{
    Block *b = h_get(c, ptr);
    if (b == NULL || b->state != ST_ALLOC) {
        return NULL;
    }
    if (set_reserve(&c->free[b->pool], 1) < 0) {
        PyErr_NoMemory();
        return NULL;
    }
    if (b->region) {
        b->region = 0;
        if (g_region_unregister != NULL) {
            (void)g_region_unregister((const void *)(uintptr_t)b->ptr);
        }
    }
    stat_down(c, K_ALLOCATION, b->pool, 1);
    stat_down(c, K_ALLOCATED_BYTES, b->pool, (int64_t)b->size);
    stat_down(c, K_REQUESTED_BYTES, b->pool, (int64_t)b->requested);
    if (b->size >= c->max_split) {
        stat_add_all(c, K_OVERSIZE_ALLOCATIONS, -1);
    }
    return b;
}

static Block *release_alloc(Core *c, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    return release_alloc_ptr(c, ptr);
}

/* Reserved bytes > trim_permille / 1000 * peak allocated bytes, and more than 20 MiB
 * above it (both counters are within 0 .. INT64_MAX; the products need 74 bits). */
static inline int over_budget(const Core *c)
{
    int64_t reserved = c->stats[K_RESERVED_BYTES][0][0];
    int64_t peak = c->stats[K_ALLOCATED_BYTES][0][1];
    if (c->trim_permille <= 0 || reserved - peak <= (int64_t)LARGE_BUFFER) {
        return 0;
    }
#ifdef __SIZEOF_INT128__
    return (__int128)reserved * 1000 > (__int128)c->trim_permille * peak;
#else
    return (long double)reserved * 1000 > (long double)c->trim_permille * peak;
#endif
}

/* The size of the block at ptr, negated when the cache is now over its trim budget;
 * 0 when ptr is not an allocated block (exception set only for out of host memory). */
static int64_t free_impl(Core *c, uint64_t ptr)
{
    Block *b = release_alloc_ptr(c, ptr);
    if (b == NULL) {
        return 0;
    }
    int64_t size = (int64_t)b->size;
    free_block(c, b);
    if (over_budget(c)) {
        size = -size;
    }
    return size;
}

/* free(ptr) -> block size, negated when the cache is now over its trim budget
 * (reserved > trim_permille / 1000 * peak allocated and > peak allocated + 20 MiB);
 * 0 when ptr is not an allocated block of this Core. */
static PyObject *core_free(Core *c, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    int64_t size = free_impl(c, ptr);
    if (size == 0 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromLongLong(size);
}

/* set_trim(permille): the budget free() reports against (0: never). */
static PyObject *core_set_trim(Core *c, PyObject *arg)
{
    uint64_t v;
    if (u64_arg(arg, &v, "permille")) {
        return NULL;
    }
    c->trim_permille = (int64_t)(v > 1000000 ? 1000000 : v);
    Py_RETURN_NONE;
}

/* free_pending(ptr) -> block size (0: unknown): no longer allocated, but still active
 * (not reusable) until complete(ptr). */
static PyObject *core_free_pending(Core *c, PyObject *arg)
{
    Block *b = release_alloc(c, arg);
    if (b == NULL) {
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    }
    b->state = ST_PENDING;
    return PyLong_FromUnsignedLongLong(b->size);
}

/* complete(ptr) -> block size (0: not a pending block): its guarding events completed. */
static PyObject *core_complete(Core *c, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    Block *b = h_get(c, ptr);
    if (b == NULL || b->state != ST_PENDING) {
        return PyLong_FromLong(0);
    }
    if (set_reserve(&c->free[b->pool], 1) < 0) {
        return PyErr_NoMemory();
    }
    uint64_t size = b->size;
    free_block(c, b);
    return PyLong_FromUnsignedLongLong(size);
}

/* add_segment(stream, base, size, small): a fresh segment, one free block. */
static PyObject *core_add_segment(Core *c, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t stream, base, size;
    if (!nargs_ok(nargs, 4, "add_segment") || u64_arg(args[0], &stream, "stream") ||
        u64_arg(args[1], &base, "base") || u64_arg(args[2], &size, "size")) {
        return NULL;
    }
    int small = PyObject_IsTrue(args[3]);
    if (small < 0) {
        return NULL;
    }
    if (base == 0 || size == 0) {
        PyErr_SetString(PyExc_ValueError, "add_segment: base and size must be nonzero");
        return NULL;
    }
    if (size > MAX_ALLOC || base > UINT64_MAX - size) {
        PyErr_Format(PyExc_OverflowError,
                     "add_segment: a segment of %llu bytes at %llu does not fit the 64-bit "
                     "address space (at most %llu bytes)",
                     (unsigned long long)size, (unsigned long long)base,
                     (unsigned long long)MAX_ALLOC);
        return NULL;
    }
    if ((uint64_t)c->stats[K_RESERVED_BYTES][0][0] > (uint64_t)INT64_MAX - size) {
        PyErr_Format(PyExc_OverflowError,
                     "add_segment: %llu more reserved bytes would overflow the counter",
                     (unsigned long long)size);
        return NULL;
    }
    int pool = small ? POOL_SMALL : POOL_LARGE;
    if (set_reserve(&c->free[pool], 1) < 0) {
        return PyErr_NoMemory();
    }
    if (c->nseg == c->segcap) {
        size_t cap = c->segcap ? c->segcap * 2 : 32;
        size_t bytes = cap > c->segcap ? array_bytes(cap, sizeof(Segment *)) : 0;
        Segment **v = bytes ? realloc(c->segs, bytes) : NULL;
        if (v == NULL) {
            return PyErr_NoMemory();
        }
        c->segs = v;
        c->segcap = cap;
    }
    Segment *s = malloc(sizeof(*s));
    Block *b = block_new(c);
    if (s == NULL || b == NULL) {
        free(s);
        if (b != NULL) {
            block_release(c, b);
        }
        return PyErr_NoMemory();
    }
    s->base = base;
    s->size = size;
    s->stream = stream;
    s->pool = pool;
    s->head = b;
    s->free_tick = ++c->tick;
    b->ptr = base;
    b->size = size;
    b->requested = 0;
    b->stream = stream;
    b->prev = b->next = NULL;
    b->seg = s;
    b->state = ST_FREE;
    b->pool = pool;
    c->segs[c->nseg++] = s;
    set_insert(&c->free[pool], b);
    stat_up(c, K_SEGMENT, pool, 1);
    stat_up(c, K_RESERVED_BYTES, pool, (int64_t)size);
    if (size >= c->max_split) {
        stat_add_all(c, K_OVERSIZE_SEGMENTS, 1);
    }
    Py_RETURN_NONE;
}

static PyObject *pairs_list(const uint64_t *pairs, size_t n)
{
    PyObject *out = PyList_New((Py_ssize_t)n);
    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        PyObject *t = Py_BuildValue("(KK)", (unsigned long long)pairs[2 * i],
                                    (unsigned long long)pairs[2 * i + 1]);
        if (t == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
    return out;
}

/* release_cached([stream, max_tick]) -> [(base, size)]: forget every segment that is
 * one free block (of `stream` only and wholly free since tick <= max_tick, if given);
 * the caller frees them with aclrtFree. */
static PyObject *core_release_cached(Core *c, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t only = 0, max_tick = UINT64_MAX;
    int filter = nargs == 2;
    if (nargs != 0 && nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "release_cached() takes 0 or 2 arguments");
        return NULL;
    }
    if (filter && (u64_arg(args[0], &only, "stream") || u64_arg(args[1], &max_tick, "max_tick"))) {
        return NULL;
    }
    size_t bytes = array_bytes(c->nseg ? c->nseg : 1, 2 * sizeof(uint64_t));
    uint64_t *pairs = bytes ? malloc(bytes) : NULL;
    if (pairs == NULL) {
        return PyErr_NoMemory();
    }
    size_t n = 0, keep = 0;
    for (size_t i = 0; i < c->nseg; i++) {
        Segment *s = c->segs[i];
        Block *h = s->head;
        if (h->state == ST_FREE && h->prev == NULL && h->next == NULL &&
            (!filter || (s->stream == only && s->free_tick <= max_tick))) {
            set_remove(&c->free[s->pool], h);
            stat_add(c, K_SEGMENT, s->pool, -1);
            stat_add(c, K_RESERVED_BYTES, s->pool, -(int64_t)s->size);
            if (s->size >= c->max_split) {
                stat_add_all(c, K_OVERSIZE_SEGMENTS, -1);
            }
            pairs[2 * n] = s->base;
            pairs[2 * n + 1] = s->size;
            n++;
            block_release(c, h);
            free(s);
        } else {
            c->segs[keep++] = s;
        }
    }
    c->nseg = keep;
    PyObject *out = pairs_list(pairs, n);
    free(pairs);
    return out;
}

/* adopt(from_stream, to_stream, max_tick) -> bytes: every segment of from_stream that is
 * wholly free since tick <= max_tick (see tick()) now belongs to to_stream. Call once
 * an event recorded on from_stream when tick() was max_tick has completed. */
static PyObject *core_adopt(Core *c, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t from, to, max_tick, moved = 0;
    if (!nargs_ok(nargs, 3, "adopt") || u64_arg(args[0], &from, "from_stream") ||
        u64_arg(args[1], &to, "to_stream") || u64_arg(args[2], &max_tick, "max_tick")) {
        return NULL;
    }
    for (size_t i = 0; i < c->nseg && from != to; i++) {
        Segment *s = c->segs[i];
        Block *h = s->head;
        if (s->stream != from || h->state != ST_FREE || h->prev != NULL || h->next != NULL ||
            s->free_tick > max_tick) {
            continue;
        }
        set_remove(&c->free[s->pool], h);
        s->stream = to;
        h->stream = to;
        set_insert(&c->free[s->pool], h); /* the slot just freed */
        moved += s->size;
    }
    return PyLong_FromUnsignedLongLong(moved);
}

static PyObject *core_tick(Core *c, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromUnsignedLongLong(c->tick);
}

/* idle_streams() -> list of the streams that own at least one wholly free segment. */
static PyObject *core_idle_streams(Core *c, PyObject *Py_UNUSED(ignored))
{
    size_t n = 0;
    size_t bytes = array_bytes(c->nseg ? c->nseg : 1, sizeof(uint64_t));
    uint64_t *keys = bytes ? malloc(bytes) : NULL;
    if (keys == NULL) {
        return PyErr_NoMemory();
    }
    for (size_t i = 0; i < c->nseg; i++) {
        Segment *s = c->segs[i];
        Block *h = s->head;
        if (h->state != ST_FREE || h->prev != NULL || h->next != NULL) {
            continue;
        }
        size_t k = 0;
        while (k < n && keys[k] != s->stream) {
            k++;
        }
        if (k == n) {
            keys[n++] = s->stream;
        }
    }
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t k = 0; out != NULL && k < n; k++) {
        PyObject *v = PyLong_FromUnsignedLongLong(keys[k]);
        if (v == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)k, v);
    }
    free(keys);
    return out;
}

static void clear_all(Core *c)
{
    for (size_t i = 0; i < c->nseg; i++) {
        Block *b = c->segs[i]->head;
        while (b != NULL) {
            Block *nx = b->next;
            free(b);
            b = nx;
        }
        free(c->segs[i]);
    }
    free(c->segs);
    free(c->free[0].v);
    free(c->free[1].v);
    free(c->hkeys);
    free(c->hvals);
    c->segs = NULL;
    c->nseg = c->segcap = 0;
    memset(c->free, 0, sizeof(c->free));
    c->hkeys = NULL;
    c->hvals = NULL;
    c->hcap = c->hcount = 0;
    while (c->spare != NULL) {
        Block *nx = c->spare->next;
        free(c->spare);
        c->spare = nx;
    }
    c->nspare = 0;
}

/* clear() -> [(base, size)] of every segment; forgets all blocks and zeroes current
 * values (peaks and totals stay). For finalize (caller frees) and fork (caller does not). */
static PyObject *core_clear(Core *c, PyObject *Py_UNUSED(ignored))
{
    size_t bytes = array_bytes(c->nseg ? c->nseg : 1, 2 * sizeof(uint64_t));
    uint64_t *pairs = bytes ? malloc(bytes) : NULL;
    if (pairs == NULL) {
        return PyErr_NoMemory();
    }
    size_t n = c->nseg;
    for (size_t i = 0; i < n; i++) {
        pairs[2 * i] = c->segs[i]->base;
        pairs[2 * i + 1] = c->segs[i]->size;
    }
    clear_all(c);
    for (int k = 0; k < NKIND; k++) {
        for (int p = 0; p < 3; p++) {
            c->stats[k][p][3] += c->stats[k][p][0] > 0 ? c->stats[k][p][0] : 0;
            c->stats[k][p][0] = 0;
        }
    }
    PyObject *out = pairs_list(pairs, n);
    free(pairs);
    return out;
}

typedef struct {
    uint64_t ptr, size, requested;
    int state;
} BlockRow;

/* segments() -> [(base, size, stream, is_small, [(ptr, size, requested, state), ...])]
 * in address order within each segment; state 0 free, 1 allocated, 2 pending. */
static PyObject *core_segments(Core *c, PyObject *Py_UNUSED(ignored))
{
    size_t nseg = c->nseg, nblk = 0;
    for (size_t i = 0; i < nseg; i++) {
        for (Block *b = c->segs[i]->head; b != NULL; b = b->next) {
            nblk++;
        }
    }
    size_t sb = array_bytes(nseg ? nseg : 1, sizeof(Segment));
    size_t cb = array_bytes(nseg ? nseg : 1, sizeof(size_t));
    size_t rb = array_bytes(nblk ? nblk : 1, sizeof(BlockRow));
    Segment *segs = sb ? malloc(sb) : NULL;
    size_t *counts = cb ? malloc(cb) : NULL;
    BlockRow *rows = rb ? malloc(rb) : NULL;
    if (segs == NULL || counts == NULL || rows == NULL) {
        free(segs);
        free(counts);
        free(rows);
        return PyErr_NoMemory();
    }
    size_t r = 0;
    for (size_t i = 0; i < nseg; i++) {
        segs[i] = *c->segs[i];
        counts[i] = 0;
        for (Block *b = c->segs[i]->head; b != NULL; b = b->next) {
            rows[r].ptr = b->ptr;
            rows[r].size = b->size;
            rows[r].requested = b->requested;
            rows[r].state = b->state;
            r++;
            counts[i]++;
        }
    }
    /* From here on only the copies are read: a finalizer may change the Core. */
    PyObject *out = PyList_New((Py_ssize_t)nseg);
    r = 0;
    for (size_t i = 0; out != NULL && i < nseg; i++) {
        PyObject *blocks = PyList_New((Py_ssize_t)counts[i]);
        if (blocks == NULL) {
            Py_CLEAR(out);
            break;
        }
        for (size_t k = 0; k < counts[i]; k++, r++) {
            PyObject *t = Py_BuildValue("(KKKi)", (unsigned long long)rows[r].ptr,
                                        (unsigned long long)rows[r].size,
                                        (unsigned long long)rows[r].requested, rows[r].state);
            if (t == NULL) {
                Py_DECREF(blocks);
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(blocks, (Py_ssize_t)k, t);
        }
        if (out == NULL) {
            break;
        }
        PyObject *seg = Py_BuildValue("(KKKiN)", (unsigned long long)segs[i].base,
                                      (unsigned long long)segs[i].size,
                                      (unsigned long long)segs[i].stream,
                                      segs[i].pool == POOL_SMALL, blocks);
        if (seg == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, seg);
    }
    free(segs);
    free(counts);
    free(rows);
    return out;
}

/* block(ptr) -> (size, requested, stream, state) of an active block, or None. */
static PyObject *core_block(Core *c, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    Block *b = h_get(c, ptr);
    if (b == NULL) {
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(KKKi)", (unsigned long long)b->size,
                         (unsigned long long)b->requested, (unsigned long long)b->stream,
                         b->state);
}

/* check() -> None, or RuntimeError naming the first broken invariant: the blocks of each
 * segment tile it exactly with consistent links, no two free blocks are adjacent,
 * the free sets hold exactly the free blocks in (stream, size, address) order, the
 * active table holds exactly the allocated and pending blocks, and the current
 * counters equal what the blocks add up to. For tests (cost: linear in blocks). */
#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            PyErr_Format(PyExc_RuntimeError, "_cachecore invariant: " __VA_ARGS__);       \
            return NULL;                                                                 \
        }                                                                                \
    } while (0)

static PyObject *core_check(Core *c, PyObject *Py_UNUSED(ignored))
{
    int64_t want[NKIND][3];
    memset(want, 0, sizeof want);
    size_t nfree[2] = {0, 0}, nactive = 0;
    for (size_t i = 0; i < c->nseg; i++) {
        Segment *sg = c->segs[i];
        int pool = sg->pool;
        CHECK(sg->head != NULL && sg->head->prev == NULL, "segment %zu has no head", i);
        CHECK(sg->size <= MAX_ALLOC && sg->base <= UINT64_MAX - sg->size,
              "segment %zu overflows", i);
        uint64_t at = sg->base;
        int split = sg->head->next != NULL;
        for (Block *b = sg->head; b != NULL; b = b->next) {
            CHECK(b->seg == sg && b->pool == pool && b->stream == sg->stream,
                  "a block of segment %zu has another segment, pool or stream", i);
            CHECK(b->ptr == at && b->size > 0 && b->size <= sg->base + sg->size - at,
                  "the blocks of segment %zu do not tile it", i);
            CHECK(b->next == NULL || b->next->prev == b, "broken links in segment %zu", i);
            at += b->size;
            int64_t row[NKIND] = {0};
            if (b->state == ST_FREE) {
                CHECK(b->next == NULL || b->next->state != ST_FREE,
                      "two adjacent free blocks in segment %zu", i);
                CHECK(b->requested == 0, "a free block has a requested size");
                CHECK(h_get(c, b->ptr) == NULL, "a free block is in the active table");
                BlockSet *set = &c->free[pool];
                size_t j = set_lower_bound(set, b->stream, b->size, b->ptr);
                CHECK(j < set->n && set->v[j] == b, "a free block is missing from its set");
                nfree[pool]++;
                if (split) {
                    row[K_INACTIVE_SPLIT] = 1;
                    row[K_INACTIVE_SPLIT_BYTES] = (int64_t)b->size;
                }
            } else {
                CHECK(b->state == ST_ALLOC || b->state == ST_PENDING, "bad block state");
                CHECK(h_get(c, b->ptr) == b, "an active block is missing from the table");
                CHECK(b->requested <= b->size, "requested > size");
                nactive++;
                row[K_ACTIVE] = 1;
                row[K_ACTIVE_BYTES] = (int64_t)b->size;
                if (b->state == ST_ALLOC) {
                    row[K_ALLOCATION] = 1;
                    row[K_ALLOCATED_BYTES] = (int64_t)b->size;
                    row[K_REQUESTED_BYTES] = (int64_t)b->requested;
                }
            }
            for (int k = 0; k < NKIND; k++) {
                want[k][0] += row[k];
                want[k][pool + 1] += row[k];
            }
        }
        CHECK(at == sg->base + sg->size, "the blocks of segment %zu do not tile it", i);
        want[K_SEGMENT][0]++;
        want[K_SEGMENT][pool + 1]++;
        want[K_RESERVED_BYTES][0] += (int64_t)sg->size;
        want[K_RESERVED_BYTES][pool + 1] += (int64_t)sg->size;
    }
    for (int p = 0; p < 2; p++) {
        BlockSet *set = &c->free[p];
        CHECK(set->n == nfree[p], "free set %d holds %zu blocks, %zu are free", p, set->n,
              nfree[p]);
        for (size_t j = 1; j < set->n; j++) {
            const Block *b = set->v[j];
            CHECK(key_less(set->v[j - 1], b->stream, b->size, b->ptr),
                  "free set %d is out of order", p);
        }
    }
    CHECK(c->hcount == nactive, "the active table holds %zu blocks, %zu are active", c->hcount,
          nactive);
    static const int kinds[] = {K_ALLOCATION,      K_SEGMENT,        K_ACTIVE,
                                K_INACTIVE_SPLIT,  K_ALLOCATED_BYTES, K_RESERVED_BYTES,
                                K_ACTIVE_BYTES,    K_INACTIVE_SPLIT_BYTES, K_REQUESTED_BYTES};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int p = 0; p < 3; p++) {
            int64_t *st = c->stats[kinds[k]][p];
            CHECK(st[0] == want[kinds[k]][p], "counter %d/%d is %lld, the blocks add up to %lld",
                  kinds[k], p, (long long)st[0], (long long)want[kinds[k]][p]);
            CHECK(st[1] >= st[0], "counter %d/%d: peak below current", kinds[k], p);
        }
    }
    Py_RETURN_NONE;
}
#undef CHECK

/* stats() -> tuple of NKIND*3*4 ints: [kind][all, small, large][current, peak,
 * allocated, freed]. */
static PyObject *core_stats(Core *c, PyObject *Py_UNUSED(ignored))
{
    int64_t copy[NSTAT];
    memcpy(copy, c->stats, sizeof(copy));
    PyObject *out = PyTuple_New(NSTAT);
    if (out == NULL) {
        return NULL;
    }
    for (int i = 0; i < NSTAT; i++) {
        PyObject *v = PyLong_FromLongLong(copy[i]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *core_reset_peak(Core *c, PyObject *Py_UNUSED(ignored))
{
    for (int k = 0; k < NKIND; k++) {
        for (int p = 0; p < 3; p++) {
            c->stats[k][p][1] = c->stats[k][p][0];
        }
    }
    Py_RETURN_NONE;
}

static PyObject *core_reset_accumulated(Core *c, PyObject *Py_UNUSED(ignored))
{
    for (int k = 0; k < NKIND; k++) {
        for (int p = 0; p < 3; p++) {
            c->stats[k][p][2] = 0;
            c->stats[k][p][3] = 0;
        }
    }
    Py_RETURN_NONE;
}

static PyObject *core_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if ((kwds != NULL && PyDict_GET_SIZE(kwds) != 0) || PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "Core() takes no arguments");
        return NULL;
    }
    Core *c = (Core *)type->tp_alloc(type, 0);
    if (c != NULL) {
        c->max_split = UINT64_MAX;
    }
    return (PyObject *)c;
}

static void core_dealloc(Core *c)
{
    clear_all(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef core_methods[] = {
    {"alloc", (PyCFunction)(void (*)(void))core_alloc, METH_FASTCALL,
     "alloc(stream, nbytes) -> address of a cached block, or 0 (miss; always for "
     "nbytes > MAX_ALLOC)."},
    {"free", (PyCFunction)core_free, METH_O,
     "free(ptr) -> size of the block given back, negative when over the trim budget "
     "(0: not an allocated block)."},
    {"set_trim", (PyCFunction)core_set_trim, METH_O,
     "set_trim(permille): free() returns -size while reserved > permille/1000 * peak "
     "allocated (0: off)."},
    {"free_pending", (PyCFunction)core_free_pending, METH_O,
     "free_pending(ptr) -> size; the block stays unusable until complete(ptr)."},
    {"complete", (PyCFunction)core_complete, METH_O,
     "complete(ptr) -> size; a pending block becomes free (0: not pending)."},
    {"add_segment", (PyCFunction)(void (*)(void))core_add_segment, METH_FASTCALL,
     "add_segment(stream, base, size, small) -> None: a new segment, all free."},
    {"release_cached", (PyCFunction)(void (*)(void))core_release_cached, METH_FASTCALL,
     "release_cached([stream, max_tick]) -> [(base, size)] of the wholly free segments "
     "(of stream, free since max_tick), now forgotten."},
    {"adopt", (PyCFunction)(void (*)(void))core_adopt, METH_FASTCALL,
     "adopt(from_stream, to_stream, max_tick) -> bytes of wholly free segments moved."},
    {"tick", (PyCFunction)core_tick, METH_NOARGS,
     "tick() -> counter bumped whenever a segment becomes wholly free."},
    {"idle_streams", (PyCFunction)core_idle_streams, METH_NOARGS,
     "idle_streams() -> streams owning at least one wholly free segment."},
    {"clear", (PyCFunction)core_clear, METH_NOARGS,
     "clear() -> [(base, size)] of every segment; forgets every block."},
    {"segments", (PyCFunction)core_segments, METH_NOARGS,
     "segments() -> [(base, size, stream, small, [(ptr, size, requested, state)])]."},
    {"block", (PyCFunction)core_block, METH_O,
     "block(ptr) -> (size, requested, stream, state) of an active block, or None."},
    {"stats", (PyCFunction)core_stats, METH_NOARGS, "stats() -> tuple of counters."},
    {"check", (PyCFunction)core_check, METH_NOARGS,
     "check() -> None; RuntimeError naming the first broken invariant (tests)."},
    {"reset_peak", (PyCFunction)core_reset_peak, METH_NOARGS, "peak = current."},
    {"reset_accumulated", (PyCFunction)core_reset_accumulated, METH_NOARGS,
     "allocated = freed = 0."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyacl_rt._cachecore.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Block bookkeeping of one device's caching allocator (see module doc).",
    .tp_new = core_new,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_methods = core_methods,
};

/* ------------------------------------------------------------ raw handles */
/* Raw(core, stream, slow_alloc, trim, traced_alloc, traced_free): a per-stream handle
 * whose alloc(nbytes) / free(ptr) are one C call on a cache hit. A miss calls
 * slow_alloc(stream, nbytes); a free over the trim budget calls trim(); while
 * tracing is on (set_tracing) both go to traced_alloc(nbytes) / traced_free(ptr). */
static int g_tracing = 0;

typedef struct {
    PyObject_HEAD
    Core *core;
    uint64_t key;
    PyObject *slow, *trim, *traced_alloc, *traced_free;
} Raw;

static int index_u64(PyObject *o, uint64_t *out, const char *what)
{
    if (PyLong_CheckExact(o)) {
        return u64_arg(o, out, what);
    }
    if (PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not bool", what);
        return -1;
    }
    PyObject *v = PyNumber_Index(o);
    if (v == NULL) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", what, Py_TYPE(o)->tp_name);
        return -1;
    }
    int rc = u64_arg(v, out, what);
    Py_DECREF(v);
    if (rc < 0 && PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Format(PyExc_ValueError, "%s must be within 0 .. 2**64 - 1", what);
    }
    return rc;
}

static PyObject *raw_alloc(Raw *r, PyObject *arg)
{
    if (g_tracing) {
        return PyObject_CallOneArg(r->traced_alloc, arg);
    }
    uint64_t nbytes;
    if (index_u64(arg, &nbytes, "nbytes")) {
        return NULL;
    }
    uint64_t p = alloc_impl(r->core, r->key, nbytes);
    if (p != 0) {
        return PyLong_FromUnsignedLongLong(p);
    }
    if (PyErr_Occurred()) {
        return NULL;
    }
    return PyObject_CallFunction(r->slow, "KK", (unsigned long long)r->key,
                                 (unsigned long long)nbytes);
}

static PyObject *raw_free(Raw *r, PyObject *arg)
{
    if (g_tracing) {
        return PyObject_CallOneArg(r->traced_free, arg);
    }
    uint64_t ptr;
    if (index_u64(arg, &ptr, "ptr")) {
        return NULL;
    }
    int64_t size = free_impl(r->core, ptr);
    if (size > 0) {
        Py_RETURN_NONE;
    }
    if (size < 0) {
        return PyObject_CallNoArgs(r->trim);
    }
    if (!PyErr_Occurred()) {
        /* PyErr_Format has no %llx before Python 3.12 */
        char hex[24];
        snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)ptr);
        PyErr_Format(PyExc_ValueError, "%s is not an address allocated by this allocator", hex);
    }
    return NULL;
}

static PyObject *raw_get_stream_key(Raw *r, void *Py_UNUSED(closure))
{
    return PyLong_FromUnsignedLongLong(r->key);
}

static PyTypeObject CoreType;

static PyObject *raw_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *core, *slow, *trim, *talloc, *tfree;
    unsigned long long key;
    if ((kwds != NULL && PyDict_GET_SIZE(kwds) != 0) ||
        !PyArg_ParseTuple(args, "O!KOOOO:Raw", &CoreType, &core, &key, &slow, &trim, &talloc,
                          &tfree)) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "Raw() takes positional arguments only");
        }
        return NULL;
    }
    Raw *r = (Raw *)type->tp_alloc(type, 0);
    if (r == NULL) {
        return NULL;
    }
    Py_INCREF(core);
    r->core = (Core *)core;
    r->key = key;
    r->slow = Py_NewRef(slow);
    r->trim = Py_NewRef(trim);
    r->traced_alloc = Py_NewRef(talloc);
    r->traced_free = Py_NewRef(tfree);
    return (PyObject *)r;
}

static int raw_traverse(Raw *r, visitproc visit, void *arg)
{
    Py_VISIT(r->slow);
    Py_VISIT(r->trim);
    Py_VISIT(r->traced_alloc);
    Py_VISIT(r->traced_free);
    return 0;
}

static int raw_clear(Raw *r)
{
    Py_CLEAR(r->slow);
    Py_CLEAR(r->trim);
    Py_CLEAR(r->traced_alloc);
    Py_CLEAR(r->traced_free);
    return 0;
}

static void raw_dealloc(Raw *r)
{
    PyObject_GC_UnTrack(r);
    raw_clear(r);
    Py_XDECREF((PyObject *)r->core);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyMethodDef raw_methods[] = {
    {"alloc", (PyCFunction)raw_alloc, METH_O,
     "alloc(nbytes) -> address of a block for this handle's stream."},
    {"free", (PyCFunction)raw_free, METH_O,
     "free(ptr): give back an address from alloc() (ValueError for anything else)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef raw_getset[] = {
    {"stream_key", (getter)raw_get_stream_key, NULL, "the stream's cache key", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RawType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyacl_rt._cachecore.Raw",
    .tp_basicsize = sizeof(Raw),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Per-stream raw allocation handle of a Core (see the module source).",
    .tp_new = raw_new,
    .tp_dealloc = (destructor)raw_dealloc,
    .tp_traverse = (traverseproc)raw_traverse,
    .tp_clear = (inquiry)raw_clear,
    .tp_methods = raw_methods,
    .tp_getset = raw_getset,
};

/* ------------------------------------------------------------ pinned host blocks */
/* HostCore(): bookkeeping of the pinned host pool (pyacl_rt/_allocator/_host.py talks to
 * the runtime). Blocks are power-of-two sizes >= HOST_MIN_BLOCK (host_block_size()), each
 * in one state: IDLE (reusable, on the LIFO stack of its size), ALLOC (a live HostBuffer)
 * or HELD (freed while streams may still use it: waits for guard events, then
 * make_idle()). Counters are those of host_memory_stats(). `pending` is how many HELD
 * blocks the Python side still has to check; take() through the C API serves nothing
 * while it is nonzero (the slow path checks them first, so guard events go back).
 *
 * Each block is an entry of a dense array; a hash table maps addresses to entries and
 * the idle stacks hold entry indices, so that the C API's take/give (which pass the
 * entry index along) never hash. */
#define HOST_MIN_BLOCK ((uint64_t)512)
enum { HB_IDLE = 1, HB_ALLOC = 2, HB_HELD = 3 };

typedef struct {
    uint64_t ptr, size;
    int state; /* 0: a free entry */
} HEntry;

typedef struct {
    size_t *v;
    size_t n, cap;
} IdxStack;

typedef struct {
    PyObject_HEAD
    HEntry *ent;
    size_t nent, entcap;
    IdxStack spare;   /* free entry indices */
    uint64_t *keys;   /* block address (0 = empty slot) */
    size_t *vals;     /* its entry index */
    size_t cap, count;
    IdxStack idle[64]; /* by log2(size) */
    int64_t allocated, allocated_peak, reserved, reserved_peak;
    int64_t num_alloc, num_free, allocations;
    Py_ssize_t pending;
} HostCore;

/* The pool block size of a request of nbytes: the next power of two, at least 512 bytes;
 * 0 when that does not fit 64 bits. */
static uint64_t host_block_size(uint64_t nbytes)
{
    if (nbytes <= HOST_MIN_BLOCK) {
        return HOST_MIN_BLOCK;
    }
    if (nbytes > ((uint64_t)1 << 63)) {
        return 0;
    }
    return (uint64_t)1 << (64 - __builtin_clzll(nbytes - 1));
}

static int idx_push(IdxStack *s, size_t i)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        size_t *v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = i;
    return 0;
}

static size_t hb_slot(const HostCore *h, uint64_t key)
{
    return (size_t)(((key >> 9) * UINT64_C(0x9E3779B97F4A7C15)) >> 20) & (h->cap - 1);
}

/* The entry index of block `key`, or (size_t)-1. */
static size_t hb_find(const HostCore *h, uint64_t key)
{
    if (h->cap == 0 || key == 0) {
        return (size_t)-1;
    }
    for (size_t i = hb_slot(h, key);; i = (i + 1) & (h->cap - 1)) {
        if (h->keys[i] == key) {
            return h->vals[i];
        }
        if (h->keys[i] == 0) {
            return (size_t)-1;
        }
    }
}

static void hb_put_nogrow(HostCore *h, uint64_t key, size_t val)
{
    size_t i = hb_slot(h, key);
    while (h->keys[i] != 0 && h->keys[i] != key) {
        i = (i + 1) & (h->cap - 1);
    }
    if (h->keys[i] == 0) {
        h->count++;
    }
    h->keys[i] = key;
    h->vals[i] = val;
}

static int hb_reserve(HostCore *h)
{
    if ((h->count + 1) * 2 <= h->cap) {
        return 0;
    }
    size_t ncap = h->cap ? h->cap * 2 : 64;
    uint64_t *nk = calloc(ncap, sizeof(*nk));
    size_t *nv = calloc(ncap, sizeof(*nv));
    if (nk == NULL || nv == NULL) {
        free(nk);
        free(nv);
        PyErr_NoMemory();
        return -1;
    }
    uint64_t *ok = h->keys;
    size_t *ov = h->vals;
    size_t ocap = h->cap;
    h->keys = nk;
    h->vals = nv;
    h->cap = ncap;
    h->count = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (ok[i] != 0) {
            hb_put_nogrow(h, ok[i], ov[i]);
        }
    }
    free(ok);
    free(ov);
    return 0;
}

static void hb_del(HostCore *h, uint64_t key)
{
    if (h->cap == 0) {
        return;
    }
    size_t mask = h->cap - 1;
    size_t i = hb_slot(h, key);
    while (h->keys[i] != key) {
        if (h->keys[i] == 0) {
            return;
        }
        i = (i + 1) & mask;
    }
    size_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (h->keys[j] == 0) {
            break;
        }
        size_t home = hb_slot(h, h->keys[j]);
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            h->keys[i] = h->keys[j];
            h->vals[i] = h->vals[j];
            i = j;
        }
    }
    h->keys[i] = 0;
    h->vals[i] = 0;
    h->count--;
}

/* Forget entry i (its block leaves the pool). */
static void hb_drop(HostCore *h, size_t i)
{
    hb_del(h, h->ent[i].ptr);
    h->ent[i].state = 0;
    h->ent[i].ptr = 0;
    if (idx_push(&h->spare, i) < 0) {
        PyErr_Clear(); /* the entry is just not reused */
    }
}

static void hb_count_alloc(HostCore *h, uint64_t size, int sign)
{
    h->allocations += sign;
    h->allocated += sign * (int64_t)size;
    if (h->allocated > h->allocated_peak) {
        h->allocated_peak = h->allocated;
    }
}

/* An idle block for nbytes (now ALLOC) and its entry index, or 0. */
static uint64_t host_take_impl(HostCore *h, uint64_t nbytes, size_t *slot)
{
    uint64_t size = host_block_size(nbytes);
    if (size == 0) {
        return 0;
    }
    IdxStack *s = &h->idle[__builtin_ctzll(size)];
    if (s->n == 0) {
        return 0;
    }
    size_t i = s->v[--s->n];
    HEntry *e = &h->ent[i];
    e->state = HB_ALLOC;
    hb_count_alloc(h, size, 1);
    *slot = i;
    return e->ptr;
}

/* Entry i (of block ptr) in state `from` -> `to` (IDLE: pushed on its stack); its size,
 * or 0 (exception set only when out of host memory). */
static uint64_t host_move_at(HostCore *h, size_t i, uint64_t ptr, int from, int to)
{
    if (i >= h->nent || h->ent[i].ptr != ptr || ptr == 0 || h->ent[i].state != from) {
        return 0;
    }
    uint64_t size = h->ent[i].size;
    if (to == HB_IDLE && idx_push(&h->idle[__builtin_ctzll(size)], i) < 0) {
        return 0;
    }
    h->ent[i].state = to;
    if (from == HB_ALLOC) {
        hb_count_alloc(h, size, -1);
    }
    return size;
}

static uint64_t host_move(HostCore *h, uint64_t ptr, int from, int to)
{
    return host_move_at(h, hb_find(h, ptr), ptr, from, to);
}

static PyObject *size_or_error(uint64_t size)
{
    if (size == 0 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(size);
}

static PyObject *hc_take(HostCore *h, PyObject *arg)
{
    uint64_t nbytes;
    size_t slot;
    if (u64_arg(arg, &nbytes, "nbytes")) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(host_take_impl(h, nbytes, &slot));
}

static PyObject *hc_add(HostCore *h, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t ptr, size;
    if (!nargs_ok(nargs, 2, "add") || u64_arg(args[0], &ptr, "ptr") ||
        u64_arg(args[1], &size, "size")) {
        return NULL;
    }
    if (ptr == 0 || size < HOST_MIN_BLOCK || (size & (size - 1)) != 0) {
        PyErr_Format(PyExc_ValueError,
                     "HostCore.add: ptr must be nonzero and size a power of two >= %llu "
                     "(got 0x%llx, %llu)",
                     (unsigned long long)HOST_MIN_BLOCK, (unsigned long long)ptr,
                     (unsigned long long)size);
        return NULL;
    }
    if (hb_find(h, ptr) != (size_t)-1) {
        PyErr_Format(PyExc_ValueError, "HostCore.add: block 0x%llx is already known",
                     (unsigned long long)ptr);
        return NULL;
    }
    if (hb_reserve(h) < 0) {
        return NULL;
    }
    size_t i;
    if (h->spare.n) {
        i = h->spare.v[--h->spare.n];
    } else {
        if (h->nent == h->entcap) {
            size_t cap = h->entcap ? h->entcap * 2 : 64;
            HEntry *v = realloc(h->ent, cap * sizeof(*v));
            if (v == NULL) {
                return PyErr_NoMemory();
            }
            h->ent = v;
            h->entcap = cap;
        }
        i = h->nent++;
    }
    h->ent[i].ptr = ptr;
    h->ent[i].size = size;
    h->ent[i].state = HB_ALLOC;
    hb_put_nogrow(h, ptr, i);
    h->num_alloc++;
    h->reserved += (int64_t)size;
    if (h->reserved > h->reserved_peak) {
        h->reserved_peak = h->reserved;
    }
    hb_count_alloc(h, size, 1);
    Py_RETURN_NONE;
}

static PyObject *hc_give(HostCore *h, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    return size_or_error(host_move(h, ptr, HB_ALLOC, HB_IDLE));
}

static PyObject *hc_hold(HostCore *h, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    return size_or_error(host_move(h, ptr, HB_ALLOC, HB_HELD));
}

static PyObject *hc_make_idle(HostCore *h, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    return size_or_error(host_move(h, ptr, HB_HELD, HB_IDLE));
}

static PyObject *hc_size(HostCore *h, PyObject *arg)
{
    uint64_t ptr;
    if (u64_arg(arg, &ptr, "ptr")) {
        return NULL;
    }
    size_t i = hb_find(h, ptr);
    return PyLong_FromUnsignedLongLong(i == (size_t)-1 ? 0 : h->ent[i].size);
}

/* Forget blocks (all, or the idle ones) and return [(ptr, size)]: counted as freed; the
 * caller gives them back with aclrtFreeHost (or not, after fork). */
static PyObject *hc_forget(HostCore *h, int idle_only)
{
    size_t n = 0;
    for (size_t i = 0; i < h->nent; i++) {
        n += h->ent[i].state != 0 && (!idle_only || h->ent[i].state == HB_IDLE);
    }
    uint64_t *pairs = malloc((n ? n : 1) * 2 * sizeof(uint64_t));
    if (pairs == NULL) {
        return PyErr_NoMemory();
    }
    size_t k = 0;
    for (size_t i = 0; i < h->nent; i++) {
        HEntry *e = &h->ent[i];
        if (e->state == 0 || (idle_only && e->state != HB_IDLE)) {
            continue;
        }
        if (e->state == HB_ALLOC) {
            hb_count_alloc(h, e->size, -1);
        }
        pairs[2 * k] = e->ptr;
        pairs[2 * k + 1] = e->size;
        k++;
        h->reserved -= (int64_t)e->size;
        h->num_free++;
        hb_drop(h, i);
    }
    for (int c = 0; c < 64; c++) {
        h->idle[c].n = 0;
    }
    if (!idle_only) {
        h->pending = 0;
    }
    PyObject *out = pairs_list(pairs, k);
    free(pairs);
    return out;
}

static PyObject *hc_blocks(HostCore *h, PyObject *Py_UNUSED(ignored))
{
    size_t n = 0;
    for (size_t i = 0; i < h->nent; i++) {
        n += h->ent[i].state != 0;
    }
    uint64_t *pairs = malloc((n ? n : 1) * 2 * sizeof(uint64_t));
    if (pairs == NULL) {
        return PyErr_NoMemory();
    }
    size_t k = 0;
    for (size_t i = 0; i < h->nent; i++) {
        if (h->ent[i].state != 0) {
            pairs[2 * k] = h->ent[i].ptr;
            pairs[2 * k + 1] = h->ent[i].size;
            k++;
        }
    }
    /* Objects only from here on (a collection may free blocks into this pool). */
    PyObject *out = PyDict_New();
    for (size_t j = 0; out != NULL && j < k; j++) {
        PyObject *key = PyLong_FromUnsignedLongLong(pairs[2 * j]);
        PyObject *val = PyLong_FromUnsignedLongLong(pairs[2 * j + 1]);
        if (key == NULL || val == NULL || PyDict_SetItem(out, key, val) < 0) {
            Py_CLEAR(out);
        }
        Py_XDECREF(key);
        Py_XDECREF(val);
    }
    free(pairs);
    return out;
}

static PyObject *hc_drain_idle(HostCore *h, PyObject *Py_UNUSED(ignored))
{
    return hc_forget(h, 1);
}

static PyObject *hc_clear(HostCore *h, PyObject *Py_UNUSED(ignored))
{
    return hc_forget(h, 0);
}

static PyObject *hc_set_pending(HostCore *h, PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    h->pending = n < 0 ? 0 : n;
    Py_RETURN_NONE;
}

static PyObject *hc_stats(HostCore *h, PyObject *Py_UNUSED(ignored))
{
    return Py_BuildValue("{sLsLsLsLsLsLsL}", "allocated_bytes.current", (long long)h->allocated,
                         "allocated_bytes.peak", (long long)h->allocated_peak,
                         "allocations.current", (long long)h->allocations, "num_host_alloc",
                         (long long)h->num_alloc, "num_host_free", (long long)h->num_free,
                         "reserved_bytes.current", (long long)h->reserved,
                         "reserved_bytes.peak", (long long)h->reserved_peak);
}

static PyObject *hc_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if ((kwds != NULL && PyDict_GET_SIZE(kwds) != 0) || PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "HostCore() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0);
}

static void hc_dealloc(HostCore *h)
{
    free(h->ent);
    free(h->spare.v);
    free(h->keys);
    free(h->vals);
    for (int c = 0; c < 64; c++) {
        free(h->idle[c].v);
    }
    Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyMethodDef hc_methods[] = {
    {"take", (PyCFunction)hc_take, METH_O,
     "take(nbytes) -> address of an idle block of block_size(nbytes) (now allocated), or 0."},
    {"add", (PyCFunction)(void (*)(void))hc_add, METH_FASTCALL,
     "add(ptr, size): a new block from aclrtMallocHost, allocated."},
    {"give", (PyCFunction)hc_give, METH_O,
     "give(ptr) -> size: an allocated block becomes idle (0: not an allocated block)."},
    {"hold", (PyCFunction)hc_hold, METH_O,
     "hold(ptr) -> size: an allocated block is freed but not reusable until make_idle()."},
    {"make_idle", (PyCFunction)hc_make_idle, METH_O,
     "make_idle(ptr) -> size: a held block becomes idle (0: not a held block)."},
    {"size", (PyCFunction)hc_size, METH_O, "size(ptr) -> block size, 0 if unknown."},
    {"blocks", (PyCFunction)hc_blocks, METH_NOARGS,
     "blocks() -> {ptr: size} of every block of the pool (any state)."},
    {"drain_idle", (PyCFunction)hc_drain_idle, METH_NOARGS,
     "drain_idle() -> [(ptr, size)] of the idle blocks, now forgotten (to aclrtFreeHost)."},
    {"clear", (PyCFunction)hc_clear, METH_NOARGS,
     "clear() -> [(ptr, size)] of every block, now forgotten."},
    {"set_pending", (PyCFunction)hc_set_pending, METH_O,
     "set_pending(n): held blocks the Python side still checks (C take() waits for 0)."},
    {"stats", (PyCFunction)hc_stats, METH_NOARGS, "stats() -> host_memory_stats() dict."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject HostCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "pyacl_rt._cachecore.HostCore",
    .tp_basicsize = sizeof(HostCore),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Block bookkeeping of the pinned host pool (see the module source).",
    .tp_new = hc_new,
    .tp_dealloc = (destructor)hc_dealloc,
    .tp_methods = hc_methods,
};

static PyObject *mod_host_block_size(PyObject *Py_UNUSED(m), PyObject *arg)
{
    uint64_t n;
    if (u64_arg(arg, &n, "nbytes")) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(host_block_size(n));
}

/* --------------------------------------------------------------- the C API */
static int api_is_core(PyObject *o)
{
    return Py_IS_TYPE(o, &CoreType);
}

static int api_is_host_core(PyObject *o)
{
    return Py_IS_TYPE(o, &HostCoreType);
}

static uint64_t api_dev_alloc(PyObject *core, uint64_t stream, uint64_t nbytes)
{
    return alloc_impl((Core *)core, stream, nbytes);
}

static int64_t api_dev_free(PyObject *core, uint64_t ptr)
{
    return free_impl((Core *)core, ptr);
}

static uint64_t api_host_take(PyObject *core, uint64_t nbytes, size_t *slot)
{
    HostCore *h = (HostCore *)core;
    return h->pending ? 0 : host_take_impl(h, nbytes, slot);
}

static uint64_t api_host_give(PyObject *core, uint64_t ptr, size_t slot)
{
    HostCore *h = (HostCore *)core;
    uint64_t size = host_move_at(h, slot, ptr, HB_ALLOC, HB_IDLE);
    return (size || PyErr_Occurred()) ? size : host_move(h, ptr, HB_ALLOC, HB_IDLE);
}

static PyaclCacheAPI g_cache_api = {
    PYACL_CACHE_API_VERSION, sizeof(PyaclCacheAPI), api_is_core, api_is_host_core,
    api_dev_alloc, api_dev_free, api_host_take, api_host_give,
};

static PyObject *mod_set_tracing(PyObject *Py_UNUSED(m), PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    g_tracing = on;
    Py_RETURN_NONE;
}

/* set_region_hooks(register, unregister): the addresses of the mock's
 * aclmockMemRegionRegister / aclmockMemRegionUnregister (0, 0: off). Blocks handed out
 * from now on are registered; those registered before are unregistered when given back. */
static PyObject *mod_set_region_hooks(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t reg, unreg;
    if (!nargs_ok(nargs, 2, "set_region_hooks") || u64_arg(args[0], &reg, "register") ||
        u64_arg(args[1], &unreg, "unregister")) {
        return NULL;
    }
    if ((reg == 0) != (unreg == 0)) {
        PyErr_SetString(PyExc_ValueError, "set_region_hooks(): give both addresses, or 0 for both");
        return NULL;
    }
    g_region_register = (RegionRegisterFn)(uintptr_t)reg;
    if (unreg != 0) {
        g_region_unregister = (RegionUnregisterFn)(uintptr_t)unreg; /* kept: blocks registered before */
    }
    Py_RETURN_NONE;
}

/* A request size within 0 .. MAX_ALLOC (OverflowError naming it otherwise). */
static int request_arg(PyObject *o, uint64_t *out)
{
    if (u64_arg(o, out, "nbytes")) {
        return -1;
    }
    if (*out > MAX_ALLOC) {
        PyErr_Format(PyExc_OverflowError,
                     "a request of %llu bytes exceeds the caching allocator's maximum of %llu "
                     "bytes",
                     (unsigned long long)*out, (unsigned long long)MAX_ALLOC);
        return -1;
    }
    return 0;
}

static PyObject *mod_round_size(PyObject *Py_UNUSED(m), PyObject *arg)
{
    uint64_t n;
    if (request_arg(arg, &n)) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(round_size(n));
}

static PyObject *mod_allocation_size(PyObject *Py_UNUSED(m), PyObject *arg)
{
    uint64_t n;
    if (request_arg(arg, &n)) {
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(allocation_size(round_size(n)));
}

static PyMethodDef module_methods[] = {
    {"set_tracing", mod_set_tracing, METH_O,
     "set_tracing(on): Raw handles route through their traced_* callables."},
    {"set_region_hooks", (PyCFunction)(void (*)(void))mod_set_region_hooks, METH_FASTCALL,
     "set_region_hooks(register, unregister): the mock's region calls (0, 0: off)."},
    {"round_size", mod_round_size, METH_O, "Block size of a request (512-byte multiple)."},
    {"allocation_size", mod_allocation_size, METH_O,
     "Segment size to allocate when a request of nbytes misses the cache."},
    {"host_block_size", mod_host_block_size, METH_O,
     "Pinned pool block size of a request: the next power of two, at least 512 (0: too big)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "pyacl_rt._cachecore",
    .m_doc = "Block bookkeeping of pyacl_rt's caching device allocator.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__cachecore(void)
{
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&RawType) < 0 ||
        PyType_Ready(&HostCoreType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "Core", (PyObject *)&CoreType) < 0 ||
        PyModule_AddObjectRef(m, "Raw", (PyObject *)&RawType) < 0 ||
        PyModule_AddIntConstant(m, "MIN_BLOCK", (long)MIN_BLOCK) < 0 ||
        PyModule_AddIntConstant(m, "SMALL_SIZE", (long)SMALL_SIZE) < 0 ||
        PyModule_AddIntConstant(m, "SMALL_BUFFER", (long)SMALL_BUFFER) < 0 ||
        PyModule_AddIntConstant(m, "LARGE_BUFFER", (long)LARGE_BUFFER) < 0 ||
        PyModule_AddIntConstant(m, "MIN_LARGE_ALLOC", (long)MIN_LARGE_ALLOC) < 0 ||
        PyModule_AddIntConstant(m, "ROUND_LARGE", (long)ROUND_LARGE) < 0 ||
        PyModule_AddIntConstant(m, "NKIND", NKIND) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *max_alloc = PyLong_FromUnsignedLongLong(MAX_ALLOC);
    int rc = max_alloc == NULL ? -1 : PyModule_AddObjectRef(m, "MAX_ALLOC", max_alloc);
    Py_XDECREF(max_alloc);
    PyObject *api = rc < 0 ? NULL : PyCapsule_New(&g_cache_api, PYACL_CACHE_API_CAPSULE, NULL);
    rc = api == NULL ? -1 : PyModule_AddObjectRef(m, "_C_API", api);
    Py_XDECREF(api);
    if (rc < 0 || PyModule_AddObjectRef(m, "HostCore", (PyObject *)&HostCoreType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
