/*
 * cmo.c - cache maintenance operations (acl_next_semantics.md section 5.3):
 * aclrtCmoAsync, the descriptor form (aclrtCmoGetDescSize / aclrtCmoSetDesc /
 * aclrtCmoAsyncWithDesc), the barrier forms of 310B (aclrtCmoAsyncWithBarrier /
 * aclrtCmoWaitBarrier) and aclrtDeviceL2CacheFlush.
 *
 * The host and the simulated device share coherent memory, so there is nothing to
 * prefetch, write back or invalidate: each operation checks its arguments the way the
 * docs describe and, for the asynchronous ones, queues a task that does nothing, so it
 * completes in stream order (events and synchronizations see it like any task).
 *   - support per SoC (ASCEND_MOCK_SOC_NAME, core/soc.c): aclrtCmoAsync and the
 *     descriptor form on 950, A3 and A2; the barrier forms on 310B only; elsewhere
 *     ACL_ERROR_RT_FEATURE_NOT_SUPPORT (207000);
 *   - aclrtCmoAsync / aclrtCmoAsyncWithDesc: PREFETCH only (another aclrtCmoType is
 *     207000, a value outside the enum ACL_ERROR_INVALID_PARAM 100000); the range is
 *     device memory of the stream's device, inside one allocation (else
 *     ACL_ERROR_RT_PARAM_INVALID 107000); size 0 is 100000;
 *   - the descriptor is aclrtCmoGetDescSize() = 64 bytes of device memory the caller
 *     allocated; aclrtCmoSetDesc writes the range into it, aclrtCmoAsyncWithDesc reads it
 *     back when called (a descriptor never set is 107000); reserve must be NULL;
 *   - barrier forms: barrierId > 0 only with ACL_RT_CMO_TYPE_INVALID, else 0; the wait
 *     takes 1..ACL_RT_CMO_MAX_BARRIER_NUM (6) INVALID entries with barrierId > 0 and flag
 *     0; the stream must be one a model runs: in the mock an ACL_STREAM_PERSISTENT stream
 *     (it captures the task; 107000 for another stream);
 *   - aclrtDeviceL2CacheFlush(rsv): rsv NULL, a current context (107002); flushes
 *     nothing, synchronously.
 */
#include <stdint.h>
#include <string.h>

#include "core/core.h"
#include "mem/mem.h"
#include "mem/mem_private.h"
#include "stream/stream.h"

#define CMO_DESC_SIZE 64u
#define CMO_DESC_MAGIC 0x636d6f4465736331ULL

/* What aclrtCmoSetDesc writes into the caller's descriptor memory. */
typedef struct cmo_desc {
    uint64_t magic;
    uint64_t src;
    uint64_t size;
    uint64_t reserved[5];
} cmo_desc;
_Static_assert(sizeof(cmo_desc) == CMO_DESC_SIZE, "descriptor layout");

/* The support matrices of section 5.3 (core_soc_require records 207000). */
#define CMO_PREFETCH_PRODUCTS (CORE_SOC_950 | CORE_SOC_BIT(CORE_SOC_A3) | CORE_SOC_BIT(CORE_SOC_A2))
#define CMO_BARRIER_PRODUCTS CORE_SOC_BIT(CORE_SOC_310B)

static aclError check_type(const char *fn, aclrtCmoType type, bool prefetch_only)
{
    if ((int)type < (int)ACL_RT_CMO_TYPE_PREFETCH || (int)type > (int)ACL_RT_CMO_TYPE_FLUSH) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'cmoType' %d is not an aclrtCmoType (0..3)",
                          (int)type);
    }
    if (prefetch_only && type != ACL_RT_CMO_TYPE_PREFETCH) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "cmoType %d is not supported: only ACL_RT_CMO_TYPE_PREFETCH (0)", (int)type);
    }
    return ACL_SUCCESS;
}

/* [src, src+size) must be device memory of `device` inside one allocation. */
static aclError check_range(const char *fn, const void *src, size_t size, int32_t device)
{
    if (src == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'src' is NULL");
    }
    if (size == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'size' is 0");
    }
    mock_mem_info info;
    if (!mem_lookup(src, &info) || info.kind != MOCK_MEM_DEVICE) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "argument 'src' (%p) is not device memory", src);
    }
    if (info.device != device) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'src' (%p) is memory of device %d, the stream belongs to device %d", src,
                          info.device, device);
    }
    size_t off = (uintptr_t)src - info.base;
    if (size > info.size - off) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "%zu bytes at offset %zu overrun the %zu-byte allocation at %p", size, off, info.size,
                          (void *)info.base);
    }
    return ACL_SUCCESS;
}

static aclError cmo_task(void *arg)
{
    (void)arg; /* coherent memory: nothing to do, in stream order */
    return ACL_SUCCESS;
}

static aclError enqueue_noop(const char *fn, mock_stream *s)
{
    aclError rc = stream_enqueue(s, cmo_task, NULL, NULL);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the task");
    }
    return ACL_SUCCESS;
}

/* The prefetch shared by aclrtCmoAsync and aclrtCmoAsyncWithDesc. */
static aclError prefetch(const char *fn, const void *src, size_t size, aclrtCmoType type, aclrtStream stream)
{
    aclError rc = check_type(fn, type, true);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_stream *s;
    rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    rc = check_range(fn, src, size, stream_device(s));
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    return enqueue_noop(fn, s);
}

aclError aclrtCmoAsync(void *src, size_t size, aclrtCmoType cmoType, aclrtStream stream)
{
    const char *fn = "aclrtCmoAsync";
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CMO_PREFETCH_PRODUCTS);
    return rc != ACL_SUCCESS ? rc : prefetch(fn, src, size, cmoType, stream);
}

aclError aclrtCmoGetDescSize(size_t *size)
{
    const char *fn = "aclrtCmoGetDescSize";
    MOCK_REQUIRE_NONNULL(fn, size);
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CMO_PREFETCH_PRODUCTS);
    if (rc == ACL_SUCCESS) {
        *size = CMO_DESC_SIZE;
    }
    return rc;
}

/* The descriptor memory: CMO_DESC_SIZE bytes of device memory inside one allocation. */
static aclError check_desc(const char *fn, const void *desc)
{
    return mem_check_desc(fn, "cmoDesc", desc, CMO_DESC_SIZE, "aclrtCmoGetDescSize");
}

aclError aclrtCmoSetDesc(void *cmoDesc, void *src, size_t size)
{
    const char *fn = "aclrtCmoSetDesc";
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CMO_PREFETCH_PRODUCTS);
    if (rc == ACL_SUCCESS) {
        rc = check_desc(fn, cmoDesc);
    }
    mock_mem_info info;
    if (rc == ACL_SUCCESS) {
        /* the range may be on any device: the stream of the later call decides */
        rc = check_range(fn, src, size, mem_lookup(src, &info) ? info.device : -1);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    cmo_desc d = {CMO_DESC_MAGIC, (uint64_t)(uintptr_t)src, (uint64_t)size, {0}};
    if (!mem_write(cmoDesc, &d, sizeof d)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID, "the descriptor memory at %p went away", cmoDesc);
    }
    return ACL_SUCCESS;
}

aclError aclrtCmoAsyncWithDesc(void *cmoDesc, aclrtCmoType cmoType, aclrtStream stream, const void *reserve)
{
    const char *fn = "aclrtCmoAsyncWithDesc";
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CMO_PREFETCH_PRODUCTS);
    if (rc == ACL_SUCCESS && reserve != NULL) {
        rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'reserve' must be NULL");
    }
    if (rc == ACL_SUCCESS) {
        rc = check_desc(fn, cmoDesc);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    cmo_desc d;
    if (!mem_read(cmoDesc, &d, sizeof d) || d.magic != CMO_DESC_MAGIC) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the descriptor at %p was not filled by aclrtCmoSetDesc", cmoDesc);
    }
    return prefetch(fn, (const void *)(uintptr_t)d.src, (size_t)d.size, cmoType, stream);
}

/* The stream of a barrier operation: one a model runs (a persistent stream). */
static aclError model_stream(const char *fn, aclrtStream stream, mock_stream **out)
{
    aclError rc = stream_resolve(fn, stream, out);
    if (rc == ACL_SUCCESS && !stream_is_persistent(*out)) {
        rc = core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                        "the stream must be bound to a model (an ACL_STREAM_PERSISTENT stream)");
    }
    return rc;
}

aclError aclrtCmoAsyncWithBarrier(void *src, size_t size, aclrtCmoType cmoType, uint32_t barrierId,
                                  aclrtStream stream)
{
    const char *fn = "aclrtCmoAsyncWithBarrier";
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CMO_BARRIER_PRODUCTS);
    if (rc == ACL_SUCCESS) {
        rc = check_type(fn, cmoType, false);
    }
    if (rc == ACL_SUCCESS && barrierId != 0 && cmoType != ACL_RT_CMO_TYPE_INVALID) {
        rc = core_error(fn, ACL_ERROR_INVALID_PARAM,
                        "argument 'barrierId' %u must be 0 unless cmoType is ACL_RT_CMO_TYPE_INVALID", barrierId);
    }
    mock_stream *s = NULL;
    if (rc == ACL_SUCCESS) {
        rc = model_stream(fn, stream, &s);
    }
    if (rc == ACL_SUCCESS) {
        rc = check_range(fn, src, size, stream_device(s));
    }
    return rc != ACL_SUCCESS ? rc : enqueue_noop(fn, s);
}

aclError aclrtCmoWaitBarrier(aclrtBarrierTaskInfo *taskInfo, aclrtStream stream, uint32_t flag)
{
    const char *fn = "aclrtCmoWaitBarrier";
    MOCK_ENTER(fn);
    aclError rc = core_soc_require(fn, CMO_BARRIER_PRODUCTS);
    if (rc == ACL_SUCCESS && taskInfo == NULL) {
        rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'taskInfo' is NULL");
    }
    if (rc == ACL_SUCCESS && flag != 0) {
        rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flag' is %u (must be 0)", flag);
    }
    if (rc == ACL_SUCCESS && (taskInfo->barrierNum == 0 || taskInfo->barrierNum > ACL_RT_CMO_MAX_BARRIER_NUM)) {
        rc = core_error(fn, ACL_ERROR_INVALID_PARAM, "barrierNum %zu is not in [1, %u]", taskInfo->barrierNum,
                        (unsigned)ACL_RT_CMO_MAX_BARRIER_NUM);
    }
    for (size_t i = 0; rc == ACL_SUCCESS && i < taskInfo->barrierNum; i++) {
        const aclrtBarrierCmoInfo *b = &taskInfo->cmoInfo[i];
        if (b->cmoType != ACL_RT_CMO_TYPE_INVALID || b->barrierId == 0) {
            rc = core_error(fn, ACL_ERROR_INVALID_PARAM,
                            "cmoInfo[%zu] must be ACL_RT_CMO_TYPE_INVALID with a barrierId > 0 (got type %d, id %u)",
                            i, (int)b->cmoType, b->barrierId);
        }
    }
    mock_stream *s = NULL;
    if (rc == ACL_SUCCESS) {
        rc = model_stream(fn, stream, &s);
    }
    return rc != ACL_SUCCESS ? rc : enqueue_noop(fn, s);
}

aclError aclrtDeviceL2CacheFlush(void *rsv)
{
    const char *fn = "aclrtDeviceL2CacheFlush";
    if (rsv != NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'rsv' must be NULL");
    }
    MOCK_ENTER(fn);
    mock_context *ctx;
    return core_ctx_require(fn, &ctx);
}
