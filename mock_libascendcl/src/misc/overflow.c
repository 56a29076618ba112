/*
 * overflow.c - float overflow handling: device saturation mode, per-stream
 * overflow-check switch, overflow status buffers.
 *
 * A host simulator never overflows: every status query writes zeros ("no
 * overflow") into the caller's device buffer, in stream order, and every reset
 * is a stream-ordered no-op. The calls validate and fail like the runtime.
 * Saturation mode (acl_abi.md §5.2): default INF/NaN on A2/A3-class SoCs
 * (Ascend910B*, Ascend910_93*, Ascend950/910_95*), saturation on older SoCs,
 * which support nothing else (INF/NaN -> ACL_ERROR_RT_FEATURE_NOT_SUPPORT).
 */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "mem/mem.h"
#include "misc/misc_private.h"

#define OVERFLOW_STATUS_BYTES 64u /* bytes of status the runtime writes at most */

/* ------------------------------------------------------ saturation mode */

static mock_mutex g_ovf_mu = MOCK_MUTEX_INIT(MOCK_LOCK_OVERFLOW);
static int8_t g_sat_mode[MOCK_MAX_DEVICES]; /* 0 = default, else mode + 1 */

static bool soc_supports_infnan(void)
{
    const char *soc = core_config_get()->soc_name;
    static const char *const prefixes[] = { "Ascend910B", "Ascend910_93", "Ascend910_95", "Ascend950", NULL };
    for (size_t i = 0; prefixes[i] != NULL; i++) {
        if (strncmp(soc, prefixes[i], strlen(prefixes[i])) == 0) {
            return true;
        }
    }
    return false;
}

MOCK_HIDDEN aclrtFloatOverflowMode misc_device_sat_mode(int32_t device)
{
    int8_t v = 0;
    if (device >= 0 && device < MOCK_MAX_DEVICES) {
        core_mutex_lock(&g_ovf_mu);
        v = g_sat_mode[device];
        core_mutex_unlock(&g_ovf_mu);
    }
    if (v != 0) {
        return (aclrtFloatOverflowMode)(v - 1);
    }
    return soc_supports_infnan() ? ACL_RT_OVERFLOW_MODE_INFNAN : ACL_RT_OVERFLOW_MODE_SATURATION;
}

aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)
{
    static const char fn[] = "aclrtSetDeviceSatMode";
    if ((int)mode != ACL_RT_OVERFLOW_MODE_SATURATION && (int)mode != ACL_RT_OVERFLOW_MODE_INFNAN) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'mode' (%d) must be ACL_RT_OVERFLOW_MODE_SATURATION (0) or "
                          "ACL_RT_OVERFLOW_MODE_INFNAN (1)",
                          (int)mode);
    }
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if ((int)mode == ACL_RT_OVERFLOW_MODE_INFNAN && !soc_supports_infnan()) {
        return core_error(fn, ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "SoC %s supports only saturation mode",
                          core_config_get()->soc_name);
    }
    int32_t dev = core_ctx_device(ctx);
    if (dev >= 0 && dev < MOCK_MAX_DEVICES) {
        core_mutex_lock(&g_ovf_mu);
        g_sat_mode[dev] = (int8_t)((int)mode + 1);
        core_mutex_unlock(&g_ovf_mu);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode)
{
    static const char fn[] = "aclrtGetDeviceSatMode";
    MOCK_REQUIRE_NONNULL(fn, mode);
    MOCK_ENTER(fn);
    mock_context *ctx = NULL;
    aclError rc = core_ctx_require(fn, &ctx);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *mode = misc_device_sat_mode(core_ctx_device(ctx));
    return ACL_SUCCESS;
}

/* ------------------------------------------------ stream overflow switch */

/* The switch lives in the stream (shared with ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK
 * of aclrtSet/GetStreamAttribute, stream.c); default off. */

aclError aclrtSetStreamOverflowSwitch(aclrtStream stream, uint32_t flag)
{
    static const char fn[] = "aclrtSetStreamOverflowSwitch";
    if (flag > 1) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'flag' (%u) must be 0 (off) or 1 (on)", flag);
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    stream_set_overflow_switch(s, flag);
    return ACL_SUCCESS;
}

aclError aclrtGetStreamOverflowSwitch(aclrtStream stream, uint32_t *flag)
{
    static const char fn[] = "aclrtGetStreamOverflowSwitch";
    MOCK_REQUIRE_NONNULL(fn, flag);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *flag = stream_get_overflow_switch(s);
    return ACL_SUCCESS;
}

/* ------------------------------------------------------- status buffers */

typedef struct zero_task {
    void *ptr;
    size_t len;
} zero_task;

static aclError run_zero_task(void *arg)
{
    zero_task *t = (zero_task *)arg;
    mem_access_begin(t->ptr, t->len);
    memset(t->ptr, 0, t->len);
    mem_access_end(t->ptr, t->len);
    return ACL_SUCCESS;
}

static aclError run_noop_task(void *arg)
{
    (void)arg;
    return ACL_SUCCESS;
}

/* Validates (outputAddr, outputSize) as a device buffer on the stream's device
 * and enqueues the write of "no overflow" (zeros). */
static aclError status_get(const char *fn, void *outputAddr, uint64_t outputSize, aclrtStream stream)
{
    MOCK_REQUIRE_NONNULL(fn, outputAddr);
    if (outputSize == 0) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'outputSize' is 0");
    }
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_mem_info mi;
    if (!mem_lookup(outputAddr, &mi) || mi.kind != MOCK_MEM_DEVICE) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'outputAddr' (%p) is not device memory allocated with aclrtMalloc", outputAddr);
    }
    uintptr_t off = (uintptr_t)outputAddr - mi.base;
    if (outputSize > mi.size - off) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'outputSize' (%llu) exceeds the %zu bytes left in the allocation at 'outputAddr'",
                          (unsigned long long)outputSize, mi.size - (size_t)off);
    }
    if (mi.device != stream_device(s)) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "argument 'outputAddr' is memory of device %d but the stream belongs to device %d",
                          (int)mi.device, (int)stream_device(s));
    }
    zero_task *t = (zero_task *)malloc(sizeof *t);
    if (t == NULL) {
        return core_error(fn, ACL_ERROR_BAD_ALLOC, "out of host memory");
    }
    t->ptr = outputAddr;
    t->len = outputSize < OVERFLOW_STATUS_BYTES ? (size_t)outputSize : OVERFLOW_STATUS_BYTES;
    rc = stream_enqueue(s, run_zero_task, t, free);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the task (stream failed or being destroyed)");
    }
    return ACL_SUCCESS;
}

MOCK_HIDDEN aclError misc_enqueue_noop(const char *fn, aclrtStream stream, mock_task_kind kind)
{
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_resolve(fn, stream, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    mock_task_desc desc = {.kind = kind, .name = fn, .peer_device = -1};
    rc = stream_enqueue_desc(s, run_noop_task, NULL, NULL, &desc);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "the stream refused the task (stream failed or being destroyed)");
    }
    return ACL_SUCCESS;
}

aclError aclrtGetOverflowStatus(void *outputAddr, size_t outputSize, aclrtStream stream)
{
    return status_get("aclrtGetOverflowStatus", outputAddr, (uint64_t)outputSize, stream);
}

aclError aclrtResetOverflowStatus(aclrtStream stream)
{
    return misc_enqueue_noop("aclrtResetOverflowStatus", stream, MOCK_TASK_OTHER);
}

aclError aclrtGetFloatOverflowStatus(void *outputAddr, uint64_t outputSize, aclrtStream stream)
{
    return status_get("aclrtGetFloatOverflowStatus", outputAddr, outputSize, stream);
}

aclError aclrtResetFloatOverflowStatus(aclrtStream stream)
{
    return misc_enqueue_noop("aclrtResetFloatOverflowStatus", stream, MOCK_TASK_OTHER);
}

/* checkMode is a reserved selector in CANN; every value is accepted. */
aclError aclrtNpuGetFloatOverFlowStatus(void *outputAddr, uint64_t outputSize, uint32_t checkMode, aclrtStream stream)
{
    (void)checkMode;
    return status_get("aclrtNpuGetFloatOverFlowStatus", outputAddr, outputSize, stream);
}

aclError aclrtNpuClearFloatOverFlowStatus(uint32_t checkMode, aclrtStream stream)
{
    (void)checkMode;
    return misc_enqueue_noop("aclrtNpuClearFloatOverFlowStatus", stream, MOCK_TASK_OTHER);
}
