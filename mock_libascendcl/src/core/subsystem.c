/*
 * subsystem.c - the registry of subsystems and the runners of their hooks (core/core.h,
 * "subsystem.c"): how aclInit/aclFinalize, device synchronize/abort, context teardown
 * and the stream subsystem's events reach the layers above them without calling them.
 *
 * Descriptors are registered by constructors (MOCK_REGISTER_SUBSYSTEM in each
 * src/<sub>/hooks.c) and kept sorted by (level, name), so the order never depends on
 * the link order of the constructors. A runner copies the list under g_subsys_lock and
 * runs the hooks without it (hooks block, call user code and take their own locks).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/lock_order.h"
#include "core/core_private.h"

#define MAX_SUBSYSTEMS 16

static mock_mutex g_subsys_lock = MOCK_MUTEX_INIT(MOCK_LOCK_SUBSYSTEMS);
static const core_subsystem *g_subs[MAX_SUBSYSTEMS];
static size_t g_nsubs;
/* The descriptors with an observe hook, in ascending order: written only by the
 * constructors (before any thread of the library exists), read without a lock by
 * core_observe on every observed task. */
static const core_subsystem *g_observers[MAX_SUBSYSTEMS];
static atomic_size_t g_nobservers;
atomic_uint core_observing_mask_;

static bool before(const core_subsystem *a, const core_subsystem *b)
{
    return a->level < b->level || (a->level == b->level && strcmp(a->name, b->name) < 0);
}

void core_subsystem_register(const core_subsystem *sub)
{
    core_mutex_lock(&g_subsys_lock);
    if (g_nsubs == MAX_SUBSYSTEMS) {
        /* a build-time limit: a constructor cannot report an error any other way */
        fprintf(stderr, "mock_libascendcl: more than %d subsystems registered (%s)\n", MAX_SUBSYSTEMS, sub->name);
        abort();
    }
    size_t i = g_nsubs;
    while (i > 0 && before(sub, g_subs[i - 1])) {
        g_subs[i] = g_subs[i - 1];
        i--;
    }
    g_subs[i] = sub;
    g_nsubs++;
    if (sub->observe != NULL) {
        size_t k = 0;
        for (size_t j = 0; j < g_nsubs; j++) {
            if (g_subs[j]->observe != NULL) {
                g_observers[k++] = g_subs[j];
            }
        }
        atomic_store(&g_nobservers, k);
    }
    core_mutex_unlock(&g_subsys_lock);
}

void core_set_observing(unsigned bit, bool on)
{
    if (on) {
        atomic_fetch_or(&core_observing_mask_, bit);
    } else {
        atomic_fetch_and(&core_observing_mask_, ~bit);
    }
}

void *core_observe(core_obs *o)
{
    size_t n = atomic_load_explicit(&g_nobservers, memory_order_acquire);
    void *first = NULL;
    for (size_t i = 0; i < n; i++) {
        void *r = g_observers[i]->observe(o);
        if (first == NULL) {
            first = r;
        }
    }
    return first;
}

/* The registered descriptors in ascending order; returns the count. */
static size_t snapshot(const core_subsystem *out[MAX_SUBSYSTEMS])
{
    core_mutex_lock(&g_subsys_lock);
    size_t n = g_nsubs;
    memcpy(out, g_subs, n * sizeof out[0]);
    core_mutex_unlock(&g_subsys_lock);
    return n;
}

aclError core_subsystems_init(const core_init_info *info)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    size_t n = snapshot(subs);
    for (size_t i = 0; i < n; i++) {
        aclError rc = subs[i]->init != NULL ? subs[i]->init(info) : ACL_SUCCESS;
        if (rc != ACL_SUCCESS) {
            while (i-- > 0) { /* undo the ones before, highest first */
                if (subs[i]->init_undo != NULL) {
                    subs[i]->init_undo();
                }
            }
            return rc;
        }
    }
    return ACL_SUCCESS;
}

void core_subsystems_init_undo(void)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    for (size_t i = snapshot(subs); i-- > 0;) {
        if (subs[i]->init_undo != NULL) {
            subs[i]->init_undo();
        }
    }
}

void core_subsystems_quiesce(void)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    for (size_t i = snapshot(subs); i-- > 0;) {
        if (subs[i]->quiesce != NULL) {
            subs[i]->quiesce();
        }
    }
}

void core_subsystems_release(void)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    for (size_t i = snapshot(subs); i-- > 0;) {
        if (subs[i]->release != NULL) {
            subs[i]->release();
        }
    }
}

aclError core_subsystems_ctx_sync(mock_context *ctx, int64_t timeout_ms)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    size_t n = snapshot(subs);
    uint64_t t0 = core_now_ns();
    aclError first = ACL_SUCCESS;
    for (size_t i = 0; i < n; i++) {
        if (subs[i]->ctx_sync == NULL) {
            continue;
        }
        int64_t left = -1; /* the subsystems share the caller's budget */
        if (timeout_ms >= 0) {
            int64_t spent = (int64_t)((core_now_ns() - t0) / 1000000u);
            left = spent >= timeout_ms ? 0 : timeout_ms - spent;
        }
        aclError rc = subs[i]->ctx_sync(ctx, left);
        if (first == ACL_SUCCESS) {
            first = rc;
        }
    }
    return first;
}

void core_subsystems_ctx_abort(mock_context *ctx)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    size_t n = snapshot(subs);
    for (size_t i = 0; i < n; i++) {
        if (subs[i]->ctx_abort != NULL) {
            subs[i]->ctx_abort(ctx);
        }
    }
}

void core_subsystems_ctx_teardown(mock_context *ctx)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    for (size_t i = snapshot(subs); i-- > 0;) {
        if (subs[i]->ctx_teardown != NULL) {
            subs[i]->ctx_teardown(ctx);
        }
    }
}

void core_subsystems_stream_destroyed(mock_stream *s)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    for (size_t i = snapshot(subs); i-- > 0;) {
        if (subs[i]->stream_destroyed != NULL) {
            subs[i]->stream_destroyed(s);
        }
    }
}

void core_subsystems_task_failed(const core_task_failure *failure)
{
    const core_subsystem *subs[MAX_SUBSYSTEMS];
    size_t n = snapshot(subs);
    for (size_t i = 0; i < n; i++) {
        if (subs[i]->task_failed != NULL) {
            subs[i]->task_failed(failure);
        }
    }
}

/* ------------------------------------------------------------ task detail */

static _Thread_local const core_task_detail *t_task_detail;

void core_task_set_detail(const core_task_detail *detail)
{
    t_task_detail = detail;
}

const core_task_detail *core_task_take_detail(void)
{
    const core_task_detail *d = t_task_detail;
    t_task_detail = NULL;
    return d;
}
