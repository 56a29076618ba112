/*
 * managed.c - managed (unified) memory of the mock: aclrtMemAllocManaged,
 * aclrtMemManagedAdvise, aclrtMemManagedGetAttr(s), aclrtMemManagedPrefetchAsync
 * and PrefetchBatchAsync. Managed memory is accessible from the host and from
 * every device, so on a host simulator it is ordinary page-aligned memory
 * (never isolated) registered as MEM_REC_MANAGED and freed with aclrtFree.
 * Advice and prefetch locations are bookkeeping kept per allocation and
 * reported back through the range attributes (CUDA-style encodings: device
 * id, -1 for the host, -2 for "none").
 */
#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define LOC_HOST (-1)
#define LOC_NONE (-2)

static mock_mutex g_managed_mu = MOCK_MUTEX_INIT(MOCK_LOCK_MANAGED); /* advice fields of records */

static void managed_dtor(mem_rec *r)
{
    munmap((void *)r->base, r->span);
}

aclError aclrtMemAllocManaged(void **ptr, uint64_t size, uint32_t flag)
{
    const char *fn = "aclrtMemAllocManaged";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    if (flag != 0 && flag != ACL_RT_MEM_ATTACH_GLOBAL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flag' 0x%x is not ACL_RT_MEM_ATTACH_GLOBAL", flag);
    }
    MOCK_ENTER(fn);
    mock_context *ctx;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    size_t page = mem_page_size();
    if (size > SIZE_MAX - page) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "size %llu is too large", (unsigned long long)size);
    }
    size_t span = ((size_t)size + page - 1) / page * page;
    void *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "cannot allocate %llu bytes of managed memory: %s",
                          (unsigned long long)size, strerror(errno));
    }
    int32_t dev = core_ctx_device(ctx);
    mem_rec *r = mem_rec_new(MEM_REC_MANAGED, (uintptr_t)p, (size_t)size, dev);
    if (r == NULL) {
        munmap(p, span);
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for bookkeeping");
    }
    r->span = span;
    r->dtor = managed_dtor;
    rc = mem_register_allocation(fn, r, dev, size);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *ptr = p;
    return ACL_SUCCESS;
}

/* The managed record containing [ptr, ptr+size), with a reference. */
static aclError managed_range(const char *fn, const void *ptr, size_t size, mem_rec **out)
{
    *out = NULL; /* defined on every path (the callers read it only on success) */
    mem_rec *r = mem_acquire(ptr);
    if (r == NULL || r->kind != MEM_REC_MANAGED) {
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "pointer %p is not managed memory (aclrtMemAllocManaged)",
                          ptr);
    }
    size_t off = (uintptr_t)ptr - r->base;
    if (size > r->size - off) {
        size_t rs = r->size;
        mem_release(r);
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "range of %zu bytes at offset %zu overruns the %zu-byte "
                          "managed allocation", size, off, rs);
    }
    *out = r;
    return ACL_SUCCESS;
}

/* Checks a location; *id gets the device id, LOC_HOST or LOC_NONE. */
static aclError check_location(const char *fn, const char *what, aclrtMemManagedLocation loc, bool allow_invalid,
                               int32_t *id)
{
    *id = LOC_NONE; /* defined on every path (the callers read it only on success) */
    switch ((int)loc.type) {
    case ACL_MEM_LOCATIONTYPE_DEVICE: {
        aclError rc = core_device_check(fn, loc.id);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
        *id = loc.id;
        return ACL_SUCCESS;
    }
    case ACL_MEM_LOCATIONTYPE_HOST:
    case ACL_MEM_LOCATIONTYPE_HOST_NUMA:
    case ACL_MEM_LOCATIONTYPE_HOST_NUMA_CURRENT:
        *id = LOC_HOST;
        return ACL_SUCCESS;
    case ACL_MEM_LOCATIONTYPE_INVALID:
        if (allow_invalid) {
            *id = LOC_NONE;
            return ACL_SUCCESS;
        }
        break;
    default:
        break;
    }
    return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' has invalid type %d", what, (int)loc.type);
}

aclError aclrtMemManagedAdvise(const void *const ptr, uint64_t size, aclrtMemManagedAdviseType advise,
                               aclrtMemManagedLocation location)
{
    const char *fn = "aclrtMemManagedAdvise";
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    if ((int)advise < ACL_MEM_ADVISE_SET_READ_MOSTLY || (int)advise > ACL_MEM_ADVISE_UNSET_ACCESSED_BY) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'advise' %d is not an aclrtMemManagedAdviseType",
                          (int)advise);
    }
    MOCK_ENTER(fn);
    int32_t id = LOC_NONE;
    bool needs_loc = advise == ACL_MEM_ADVISE_SET_PREFERRED_LOCATION || advise == ACL_MEM_ADVISE_SET_ACCESSED_BY ||
                     advise == ACL_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (needs_loc) {
        aclError rc = check_location(fn, "location", location, false, &id);
        if (rc != ACL_SUCCESS) {
            return rc;
        }
    }
    mem_rec *r;
    aclError rc = managed_range(fn, ptr, (size_t)size, &r);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_managed_mu);
    switch ((int)advise) {
    case ACL_MEM_ADVISE_SET_READ_MOSTLY:
        r->m_read_mostly = 1;
        break;
    case ACL_MEM_ADVISE_UNSET_READ_MOSTLY:
        r->m_read_mostly = 0;
        break;
    case ACL_MEM_ADVISE_SET_PREFERRED_LOCATION:
        r->m_pref_type = (int32_t)location.type;
        r->m_pref_id = id;
        break;
    case ACL_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        r->m_pref_type = ACL_MEM_LOCATIONTYPE_INVALID;
        r->m_pref_id = LOC_NONE;
        break;
    case ACL_MEM_ADVISE_SET_ACCESSED_BY:
    default: { /* UNSET_ACCESSED_BY */
        bool set = advise == ACL_MEM_ADVISE_SET_ACCESSED_BY;
        if (id == LOC_HOST) {
            r->m_accessed_by_host = set;
        } else if (set) {
            r->m_accessed_by |= 1ull << id;
        } else {
            r->m_accessed_by &= ~(1ull << id);
        }
        break;
    }
    }
    core_mutex_unlock(&g_managed_mu);
    mem_release(r);
    return ACL_SUCCESS;
}

static aclError get_attr(const char *fn, aclrtMemManagedRangeAttribute attribute, mem_rec *r, void *data,
                         size_t dataSize)
{
    int32_t v;
    switch ((int)attribute) {
    case ACL_MEM_RANGE_ATTRIBUTE_READ_MOSTLY:
        v = r->m_read_mostly;
        break;
    case ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
    case ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
        v = r->m_pref_id;
        break;
    case ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
        v = r->m_pref_type;
        break;
    case ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
    case ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
        v = r->m_last_id;
        break;
    case ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
        v = r->m_last_type;
        break;
    case ACL_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        /* an int32 array: the devices advised, then -2 fill */
        if (dataSize < 4 || dataSize % 4 != 0) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM,
                              "dataSize %zu for ACCESSED_BY must be a nonzero multiple of 4", dataSize);
        }
        size_t n = dataSize / 4, k = 0;
        int32_t *out = data;
        for (int d = 0; d < MOCK_MAX_DEVICES && k < n; d++) {
            if (r->m_accessed_by & (1ull << d)) {
                out[k++] = d;
            }
        }
        if (r->m_accessed_by_host && k < n) {
            out[k++] = LOC_HOST;
        }
        while (k < n) {
            out[k++] = LOC_NONE;
        }
        return ACL_SUCCESS;
    }
    default:
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "attribute %d is not an aclrtMemManagedRangeAttribute",
                          (int)attribute);
    }
    if (dataSize < sizeof(int32_t)) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "dataSize %zu is smaller than 4", dataSize);
    }
    memcpy(data, &v, sizeof(v));
    return ACL_SUCCESS;
}

aclError aclrtMemManagedGetAttr(aclrtMemManagedRangeAttribute attribute, const void *ptr, size_t size, void *data,
                                size_t dataSize)
{
    const char *fn = "aclrtMemManagedGetAttr";
    if (ptr == NULL || data == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL", ptr == NULL ? "ptr" : "data");
    }
    if (size == 0 || dataSize == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is 0", size == 0 ? "size" : "dataSize");
    }
    MOCK_ENTER(fn);
    mem_rec *r;
    aclError rc = managed_range(fn, ptr, size, &r);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_managed_mu);
    rc = get_attr(fn, attribute, r, data, dataSize);
    core_mutex_unlock(&g_managed_mu);
    mem_release(r);
    return rc;
}

aclError aclrtMemManagedGetAttrs(aclrtMemManagedRangeAttribute *attributes, size_t numAttributes, const void *ptr,
                                 size_t size, void **data, size_t *dataSizes)
{
    const char *fn = "aclrtMemManagedGetAttrs";
    if (attributes == NULL || ptr == NULL || data == NULL || dataSizes == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          attributes == NULL ? "attributes" : ptr == NULL ? "ptr" : data == NULL ? "data" : "dataSizes");
    }
    if (numAttributes == 0 || size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is 0", numAttributes == 0 ? "numAttributes" : "size");
    }
    for (size_t i = 0; i < numAttributes; i++) {
        if (data[i] == NULL || dataSizes[i] == 0) {
            return core_error(fn, ACL_ERROR_INVALID_PARAM, "data[%zu] is NULL or dataSizes[%zu] is 0", i, i);
        }
    }
    MOCK_ENTER(fn);
    mem_rec *r;
    aclError rc = managed_range(fn, ptr, size, &r);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    core_mutex_lock(&g_managed_mu);
    for (size_t i = 0; i < numAttributes && rc == ACL_SUCCESS; i++) {
        rc = get_attr(fn, attributes[i], r, data[i], dataSizes[i]);
    }
    core_mutex_unlock(&g_managed_mu);
    mem_release(r);
    return rc;
}

/* Prefetch: the data is already where every agent can reach it; the task
 * records the destination in stream order (LAST_PREFETCH_LOCATION). */
typedef struct prefetch_task {
    size_t n;
    mem_rec **recs;
    int32_t *types;
    int32_t *ids;
} prefetch_task;

static aclError prefetch_run(void *arg)
{
    prefetch_task *t = arg;
    core_mutex_lock(&g_managed_mu);
    for (size_t i = 0; i < t->n; i++) {
        t->recs[i]->m_last_type = t->types[i];
        t->recs[i]->m_last_id = t->ids[i];
    }
    core_mutex_unlock(&g_managed_mu);
    return ACL_SUCCESS;
}

static void prefetch_free(void *arg)
{
    prefetch_task *t = arg;
    for (size_t i = 0; i < t->n; i++) {
        mem_release(t->recs[i]);
    }
    free(t->recs);
    free(t->types);
    free(t->ids);
    free(t);
}

static prefetch_task *prefetch_new(size_t n)
{
    prefetch_task *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    t->recs = calloc(n, sizeof(*t->recs));
    t->types = calloc(n, sizeof(*t->types));
    t->ids = calloc(n, sizeof(*t->ids));
    if (t->recs == NULL || t->types == NULL || t->ids == NULL) {
        prefetch_free(t);
        return NULL;
    }
    return t;
}

static aclError prefetch_submit(const char *fn, prefetch_task *t, aclrtStream stream)
{
    mock_stream *st;
    aclError rc = stream_resolve(fn, stream, &st);
    if (rc != ACL_SUCCESS) {
        prefetch_free(t);
        return rc;
    }
    rc = stream_enqueue(st, prefetch_run, t, prefetch_free);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the task");
    }
    return ACL_SUCCESS;
}

aclError aclrtMemManagedPrefetchAsync(const void *ptr, size_t size, aclrtMemManagedLocation location, uint32_t flags,
                                      aclrtStream stream)
{
    const char *fn = "aclrtMemManagedPrefetchAsync";
    (void)flags; /* reserved */
    MOCK_REQUIRE_NONNULL(fn, ptr);
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    MOCK_ENTER(fn);
    int32_t id;
    aclError rc = check_location(fn, "location", location, false, &id);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    prefetch_task *t = prefetch_new(1);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for the task");
    }
    rc = managed_range(fn, ptr, size, &t->recs[0]);
    if (rc != ACL_SUCCESS) {
        prefetch_free(t);
        return rc;
    }
    t->n = 1;
    t->types[0] = (int32_t)location.type;
    t->ids[0] = id;
    return prefetch_submit(fn, t, stream);
}

aclError aclrtMemManagedPrefetchBatchAsync(const void **ptrs, size_t *sizes, size_t count,
                                           aclrtMemManagedLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                           size_t numPrefetchLocs, uint64_t flags, aclrtStream stream)
{
    const char *fn = "aclrtMemManagedPrefetchBatchAsync";
    (void)flags; /* reserved */
    if (ptrs == NULL || sizes == NULL || prefetchLocs == NULL || prefetchLocIdxs == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument '%s' is NULL",
                          ptrs == NULL ? "ptrs" : sizes == NULL ? "sizes" : prefetchLocs == NULL ? "prefetchLocs"
                                                                                               : "prefetchLocIdxs");
    }
    if (count == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'count' is 0");
    }
    aclError vrc = mem_check_batch_indexes(fn, prefetchLocIdxs, numPrefetchLocs, count, "prefetchLocIdxs",
                                           "numPrefetchLocs", "count");
    if (vrc != ACL_SUCCESS) {
        return vrc;
    }
    MOCK_ENTER(fn);
    prefetch_task *t = prefetch_new(count);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "host out of memory for the task");
    }
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        while (k + 1 < numPrefetchLocs && prefetchLocIdxs[k + 1] <= i) {
            k++;
        }
        int32_t id;
        aclError rc = check_location(fn, "prefetchLocs[k]", prefetchLocs[k], false, &id);
        if (rc == ACL_SUCCESS) {
            if (ptrs[i] == NULL || sizes[i] == 0) {
                rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "ptrs[%zu] is NULL or sizes[%zu] is 0", i, i);
            } else {
                rc = managed_range(fn, ptrs[i], sizes[i], &t->recs[i]);
            }
        }
        if (rc != ACL_SUCCESS) {
            t->n = i;
            prefetch_free(t);
            return rc;
        }
        t->types[i] = (int32_t)prefetchLocs[k].type;
        t->ids[i] = id;
    }
    t->n = count;
    return prefetch_submit(fn, t, stream);
}
