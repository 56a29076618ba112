/*
 * gate.c - the resource gate of the snapshot state machine (core/core.h "gate.c";
 * acl_next_semantics.md section 5.4, D-SNAP 5.2 "API blocking"), and the walks over every
 * context that a process snapshot needs.
 *
 * While the gate is closed, the entry points that change device resources block the
 * calling thread at their MOCK_ENTER until it opens again; queries and synchronizations
 * are not in the list and pass. The list covers set/reset device, every allocation and
 * free (device, host, managed, physical, virtual, registered host memory, shared
 * buffers), copies and memsets, value writes, creating and destroying contexts, streams,
 * events and notifies, binary loads and kernel launches, reduce and random tasks.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/core_private.h"

/* Sorted (strcmp) for bsearch. */
static const char *const k_held[] = {
    "aclrtAllocBuf",
    "aclrtBinaryLoad",
    "aclrtBinaryLoadFromData",
    "aclrtBinaryLoadFromFile",
    "aclrtBinaryUnLoad",
    "aclrtCntNotifyCreate",
    "aclrtCntNotifyDestroy",
    "aclrtCreateContext",
    "aclrtCreateEvent",
    "aclrtCreateEventExWithFlag",
    "aclrtCreateEventWithFlag",
    "aclrtCreateNotify",
    "aclrtCreateStream",
    "aclrtCreateStreamV2",
    "aclrtCreateStreamWithConfig",
    "aclrtDestroyContext",
    "aclrtDestroyEvent",
    "aclrtDestroyNotify",
    "aclrtDestroyStream",
    "aclrtDestroyStreamForce",
    "aclrtFree",
    "aclrtFreeBuf",
    "aclrtFreeHost",
    "aclrtFreeHostWithDevSync",
    "aclrtFreePhysical",
    "aclrtFreeWithDevSync",
    "aclrtHostRegister",
    "aclrtHostRegisterV2",
    "aclrtHostUnregister",
    "aclrtLaunchKernel",
    "aclrtLaunchKernelV2",
    "aclrtLaunchKernelWithArgsArray",
    "aclrtLaunchKernelWithConfig",
    "aclrtLaunchKernelWithHostArgs",
    "aclrtLaunchSIMTKernelWithArgsArray",
    "aclrtLaunchSIMTKernelWithHostArgs",
    "aclrtMalloc",
    "aclrtMallocAlign32",
    "aclrtMallocCached",
    "aclrtMallocForTaskScheduler",
    "aclrtMallocHost",
    "aclrtMallocHostWithCfg",
    "aclrtMallocPhysical",
    "aclrtMallocWithCfg",
    "aclrtMapMem",
    "aclrtMemAllocManaged",
    "aclrtMemcpy",
    "aclrtMemcpy2d",
    "aclrtMemcpy2dAsync",
    "aclrtMemcpyAsync",
    "aclrtMemcpyAsyncWithCondition",
    "aclrtMemcpyAsyncWithDesc",
    "aclrtMemcpyAsyncWithOffset",
    "aclrtMemcpyBatch",
    "aclrtMemcpyBatchAsync",
    "aclrtMemcpyBatchAsyncV2",
    "aclrtMemcpyBatchV2",
    "aclrtMemcpyFromSymbol",
    "aclrtMemcpyFromSymbolAsync",
    "aclrtMemcpyToSymbol",
    "aclrtMemcpyToSymbolAsync",
    "aclrtMemset",
    "aclrtMemsetAsync",
    "aclrtMemsetD32",
    "aclrtMemsetD32Async",
    "aclrtRandomNumAsync",
    "aclrtReduceAsync",
    "aclrtReleaseMemAddress",
    "aclrtReserveMemAddress",
    "aclrtReserveMemAddressNoUCMemory",
    "aclrtResetDevice",
    "aclrtResetDeviceForce",
    "aclrtSetDevice",
    "aclrtUnmapMem",
    "aclrtValueWrite",
};

static atomic_bool g_closed;
static mock_mutex g_gate_mu = MOCK_MUTEX_INIT(MOCK_LOCK_GATE);
static pthread_cond_t g_gate_cv;
static pthread_once_t g_gate_once = PTHREAD_ONCE_INIT;

static void gate_init(void)
{
    core_cond_init(&g_gate_cv);
}

static int cmp_name(const void *key, const void *elem)
{
    return strcmp((const char *)key, *(const char *const *)elem);
}

bool core_gate_holds(const char *func)
{
    return func != NULL &&
           bsearch(func, k_held, sizeof k_held / sizeof k_held[0], sizeof k_held[0], cmp_name) != NULL;
}

void core_gate_close(void)
{
    pthread_once(&g_gate_once, gate_init);
    core_mutex_lock(&g_gate_mu);
    atomic_store(&g_closed, true);
    core_mutex_unlock(&g_gate_mu);
}

void core_gate_open(void)
{
    pthread_once(&g_gate_once, gate_init);
    core_mutex_lock(&g_gate_mu);
    atomic_store(&g_closed, false);
    pthread_cond_broadcast(&g_gate_cv);
    core_mutex_unlock(&g_gate_mu);
}

void core_gate_pass(const char *func)
{
    if (!atomic_load_explicit(&g_closed, memory_order_relaxed) || !core_gate_holds(func)) {
        return;
    }
    pthread_once(&g_gate_once, gate_init);
    core_mutex_lock(&g_gate_mu);
    while (atomic_load(&g_closed)) {
        core_cond_wait(&g_gate_cv, &g_gate_mu);
    }
    core_mutex_unlock(&g_gate_mu);
}

aclError core_synchronize_all(int64_t timeout_ms)
{
    aclError result = ACL_SUCCESS;
    uint32_t count = core_visible_count();
    for (uint32_t dev = 0; dev < count; dev++) {
        size_t n = 0;
        mock_context **ctxs = core_ctx_collect((int32_t)dev, &n);
        for (size_t i = 0; i < n; i++) {
            aclError r = core_subsystems_ctx_sync(ctxs[i], timeout_ms);
            if (result == ACL_SUCCESS && r != ACL_SUCCESS) {
                result = r;
            }
            core_ctx_release(ctxs[i]);
        }
        free(ctxs);
    }
    return result;
}

uint64_t core_devices_in_use(void)
{
    uint64_t mask = 0;
    uint32_t count = core_visible_count();
    for (uint32_t dev = 0; dev < count && dev < 64; dev++) {
        if (core_stat_get((int32_t)dev, MOCK_STAT_CONTEXTS) > 0) {
            mask |= 1ull << dev;
        }
    }
    return mask;
}
