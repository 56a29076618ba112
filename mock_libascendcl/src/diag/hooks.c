/*
 * hooks.c - the diagnostics subsystem's descriptor (core/core.h "subsystem.c"):
 * the observations (task.c), the switches read at aclInit, device synchronize
 * (the host's modeled time and clock join the context's streams), stream
 * teardown, failed tasks (device log), and aclFinalize / process exit (the
 * profile, the dump index and the log files are written and closed).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "core/core.h"
#include "stream/stream.h"
#include "diag/diag_private.h"

static atomic_bool g_exit_hooked;

static void at_exit(void)
{
    diag_prof_finalize(); /* a process that ends without aclFinalize still gets its profile */
    diag_prof_subscriptions_end();
    diag_dump_finalize();
    diag_log_close();
}

static aclError diag_init(const core_init_info *info)
{
    (void)info;
    const diag_config *c = diag_config_get();
    core_set_observing(CORE_OBSERVE_TIMING, c->timing != DIAG_TIMING_REAL);
    core_set_observing(CORE_OBSERVE_SANITIZER, c->sanitize != DIAG_SANITIZE_OFF);
    diag_prof_env_start();
    if (!atomic_exchange(&g_exit_hooked, true)) {
        atexit(at_exit);
    }
    return ACL_SUCCESS;
}

static void diag_release(void)
{
    diag_prof_finalize();
    diag_prof_subscriptions_end();
    diag_dump_finalize();
    diag_state_reset(); /* every stream is gone; memory is released next */
}

static void join_sanitizer(diag_stream *ds, void *arg)
{
    (void)arg;
    diag_sanitize_sync_stream(ds);
}

static aclError diag_ctx_sync(mock_context *ctx, int64_t timeout_ms)
{
    (void)timeout_ms;
    if (!core_observing()) {
        return ACL_SUCCESS;
    }
    const diag_config *c = diag_config_get();
    if (c->timing != DIAG_TIMING_REAL) {
        diag_timing_sync_context(ctx);
    }
    if (c->sanitize != DIAG_SANITIZE_OFF) {
        diag_state_lock();
        diag_streams_each(ctx, join_sanitizer, NULL);
        diag_state_unlock();
    }
    return ACL_SUCCESS;
}

static void diag_stream_destroyed(mock_stream *s)
{
    diag_stream_forget(s);
}

static void diag_task_failed(const core_task_failure *f)
{
    /* a kernel fault says what went wrong (core_task_detail: the kernel, block, signal) */
    const char *why = f->detail != NULL && f->detail->message != NULL ? f->detail->message : NULL;
    diag_log(f->device, DIAG_LOG_ERROR, "task", f->code, "task %u on stream %u of device %d failed%s%s", f->task_id,
             f->stream_id, f->device, why != NULL ? ": " : "", why != NULL ? why : "");
}

static const core_subsystem k_diag_subsystem = {
    .name = "diag",
    .level = CORE_LEVEL_DIAG,
    .init = diag_init,
    .release = diag_release,
    .ctx_sync = diag_ctx_sync,
    .stream_destroyed = diag_stream_destroyed,
    .task_failed = diag_task_failed,
    .observe = diag_observe,
};
MOCK_REGISTER_SUBSYSTEM(k_diag_subsystem)
