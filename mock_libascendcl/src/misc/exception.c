/*
 * exception.c - exception_info group: exception callbacks and the info accessors
 * (aclrtGetThreadLastTaskId, which reads what the stream subsystem knows, is in
 * stream/stream.c).
 *
 * Callbacks are stored: the deprecated aclrtSetExceptionInfoCallback slot
 * (NULL clears it) plus the list of aclrtExceptionInfoCallbackRegister.
 * misc_exception_report (the task_failed hook, misc/hooks.c: a task failed)
 * invokes all of them with an aclrtExceptionInfo that is valid only during
 * the call (for a kernel fault, the callback of the kernel's binary first: the
 * task's core_task_detail). aclrtGetArgsFromExceptionInfo /
 * aclrtGetFuncHandleFromExceptionInfo read the kernel part of such an info. The accessors return 0xFFFFFFFF for a NULL info (acl_abi.md §1.7)
 * and for anything that is not a live info object.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/core.h"
#include "misc/misc.h"
#include "misc/misc_private.h"

#define EXC_INFO_MAGIC 0x657863496e666f21ULL
#define EXC_MAX_CALLBACKS 64
#define EXC_INVALID 0xFFFFFFFFu

struct rtExceptionInfo {
    uint64_t magic;
    uint32_t task_id;
    uint32_t stream_id;
    uint32_t thread_id;
    uint32_t device_id;
    uint32_t error_code;
    uint32_t args_size; /* a kernel fault: the argument block the kernel got */
    void *args;
    void *func;         /* a kernel fault: its aclrtFuncHandle, else NULL */
};

static mock_mutex g_exc_mu = MOCK_MUTEX_INIT(MOCK_LOCK_EXCEPTION_CALLBACKS);
static aclrtExceptionInfoCallback g_set_cb = NULL;
static aclrtExceptionInfoCallback g_cbs[EXC_MAX_CALLBACKS];
static size_t g_ncbs = 0;
static mock_handle_set g_infos = MOCK_HANDLE_SET_INIT(MOCK_LOCK_EXCEPTION_INFOS);

aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback)
{
    static const char fn[] = "aclrtSetExceptionInfoCallback";
    MOCK_ENTER(fn);
    core_mutex_lock(&g_exc_mu);
    g_set_cb = callback; /* NULL unsets */
    core_mutex_unlock(&g_exc_mu);
    return ACL_SUCCESS;
}

aclError aclrtExceptionInfoCallbackRegister(aclrtExceptionInfoCallback callback)
{
    static const char fn[] = "aclrtExceptionInfoCallbackRegister";
    MOCK_REQUIRE_NONNULL(fn, callback);
    MOCK_ENTER(fn);
    core_mutex_lock(&g_exc_mu);
    bool known = false;
    for (size_t i = 0; i < g_ncbs && !known; i++) {
        known = g_cbs[i] == callback;
    }
    bool full = !known && g_ncbs == EXC_MAX_CALLBACKS;
    if (!known && !full) {
        g_cbs[g_ncbs++] = callback;
    }
    core_mutex_unlock(&g_exc_mu);
    if (known) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'callback' is already registered");
    }
    if (full) {
        return core_error(fn, ACL_ERROR_RT_RESOURCE_ALLOC_FAIL, "too many exception callbacks registered (limit %d)",
                          EXC_MAX_CALLBACKS);
    }
    return ACL_SUCCESS;
}

aclError aclrtExceptionInfoCallbackUnregister(aclrtExceptionInfoCallback callback)
{
    static const char fn[] = "aclrtExceptionInfoCallbackUnregister";
    MOCK_REQUIRE_NONNULL(fn, callback);
    MOCK_ENTER(fn);
    core_mutex_lock(&g_exc_mu);
    for (size_t i = 0; i < g_ncbs; i++) {
        if (g_cbs[i] == callback) {
            memmove(&g_cbs[i], &g_cbs[i + 1], (g_ncbs - i - 1) * sizeof g_cbs[0]);
            g_ncbs--;
            core_mutex_unlock(&g_exc_mu);
            return ACL_SUCCESS;
        }
    }
    core_mutex_unlock(&g_exc_mu);
    return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'callback' is not registered");
}

void misc_exception_report(const core_task_failure *f)
{
    const core_task_detail *d = f->detail;
    bool binary_cb = d != NULL && d->callback != NULL;
    aclrtExceptionInfoCallback cbs[EXC_MAX_CALLBACKS + 1];
    size_t n = 0;
    core_mutex_lock(&g_exc_mu);
    if (g_set_cb != NULL) {
        cbs[n++] = g_set_cb;
    }
    for (size_t i = 0; i < g_ncbs; i++) {
        cbs[n++] = g_cbs[i];
    }
    core_mutex_unlock(&g_exc_mu);
    if (n == 0 && !binary_cb) {
        return;
    }
    struct rtExceptionInfo info;
    memset(&info, 0, sizeof info);
    info.magic = EXC_INFO_MAGIC;
    info.task_id = f->task_id;
    info.stream_id = f->stream_id;
    info.thread_id = (uint32_t)syscall(SYS_gettid);
    info.device_id = (uint32_t)f->device;
    info.error_code = (uint32_t)f->code;
    if (d != NULL) {
        info.func = d->func;
        info.args = d->args;
        info.args_size = d->args_size;
    }
    if (!core_handle_set_add(&g_infos, &info)) {
        return; /* out of memory: cannot publish the info safely */
    }
    core_lock_check_none("calling an exception-info callback");
    /* the binary's own callback (aclrtBinarySetExceptionCallback) first, then the
     * process-wide ones */
    if (binary_cb) {
        d->callback(&info, d->callback_data);
    }
    for (size_t i = 0; i < n; i++) {
        cbs[i](&info);
    }
    core_handle_set_remove(&g_infos, &info);
    info.magic = 0;
}

/* Reads one field of a live info; EXC_INVALID otherwise. */
static uint32_t info_field(const char *fn, const aclrtExceptionInfo *info, size_t offset)
{
    if (info == NULL) {
        (void)core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'info' is NULL");
        return EXC_INVALID;
    }
    uint32_t v = EXC_INVALID;
    core_handle_set_lock(&g_infos);
    bool live = core_handle_set_contains_locked(&g_infos, info);
    if (live) {
        memcpy(&v, (const char *)info + offset, sizeof v);
    }
    core_handle_set_unlock(&g_infos);
    if (!live) {
        (void)core_error(fn, ACL_ERROR_INVALID_PARAM,
                         "argument 'info' (%p) is not an exception info passed to a running callback",
                         (const void *)info);
    }
    return v;
}

uint32_t aclrtGetTaskIdFromExceptionInfo(const aclrtExceptionInfo *info)
{
    return info_field("aclrtGetTaskIdFromExceptionInfo", info, offsetof(struct rtExceptionInfo, task_id));
}

uint32_t aclrtGetStreamIdFromExceptionInfo(const aclrtExceptionInfo *info)
{
    return info_field("aclrtGetStreamIdFromExceptionInfo", info, offsetof(struct rtExceptionInfo, stream_id));
}

uint32_t aclrtGetThreadIdFromExceptionInfo(const aclrtExceptionInfo *info)
{
    return info_field("aclrtGetThreadIdFromExceptionInfo", info, offsetof(struct rtExceptionInfo, thread_id));
}

uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo *info)
{
    return info_field("aclrtGetDeviceIdFromExceptionInfo", info, offsetof(struct rtExceptionInfo, device_id));
}

uint32_t aclrtGetErrorCodeFromExceptionInfo(const aclrtExceptionInfo *info)
{
    return info_field("aclrtGetErrorCodeFromExceptionInfo", info, offsetof(struct rtExceptionInfo, error_code));
}

/* The kernel part of a live info (aclrtGetArgsFromExceptionInfo,
 * aclrtGetFuncHandleFromExceptionInfo): ACL_ERROR_INVALID_PARAM for a NULL or dead
 * info, ACL_ERROR_RT_PARAM_INVALID (mock choice) for an exception that is not a kernel
 * fault (an event wait timeout, ...), which has no arguments and no function. */
static aclError info_kernel(const char *fn, const aclrtExceptionInfo *info, void **args, uint32_t *args_size,
                            void **func)
{
    if (info == NULL) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'info' is NULL");
    }
    uint32_t code = 0;
    core_handle_set_lock(&g_infos);
    bool live = core_handle_set_contains_locked(&g_infos, info);
    if (live) {
        *args = info->args;
        *args_size = info->args_size;
        *func = info->func;
        code = info->error_code;
    }
    core_handle_set_unlock(&g_infos);
    if (!live) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM,
                          "argument 'info' (%p) is not an exception info passed to a running callback",
                          (const void *)info);
    }
    if (*func == NULL) {
        return core_error(fn, ACL_ERROR_RT_PARAM_INVALID,
                          "the exception (error %u) is not a kernel fault: it has no kernel arguments or function",
                          code);
    }
    return ACL_SUCCESS;
}

aclError aclrtGetArgsFromExceptionInfo(const aclrtExceptionInfo *info, void **devArgsPtr, uint32_t *devArgsLen)
{
    static const char fn[] = "aclrtGetArgsFromExceptionInfo";
    MOCK_REQUIRE_NONNULL(fn, devArgsPtr);
    MOCK_REQUIRE_NONNULL(fn, devArgsLen);
    MOCK_ENTER(fn);
    void *args = NULL;
    void *func = NULL;
    uint32_t size = 0;
    aclError rc = info_kernel(fn, info, &args, &size, &func);
    if (rc == ACL_SUCCESS) {
        *devArgsPtr = args;
        *devArgsLen = size;
    }
    return rc;
}

aclError aclrtGetFuncHandleFromExceptionInfo(const aclrtExceptionInfo *info, aclrtFuncHandle *func)
{
    static const char fn[] = "aclrtGetFuncHandleFromExceptionInfo";
    MOCK_REQUIRE_NONNULL(fn, func);
    MOCK_ENTER(fn);
    void *args = NULL;
    void *f = NULL;
    uint32_t size = 0;
    aclError rc = info_kernel(fn, info, &args, &size, &f);
    if (rc == ACL_SUCCESS) {
        *func = f;
    }
    return rc;
}
