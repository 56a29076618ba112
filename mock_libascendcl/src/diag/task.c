/*
 * task.c - the observe hook of the diagnostics subsystem: what the stream and
 * memory layers report (core/core.h "tasks and observations") dispatched to the
 * timing model, the race sanitizer, the profiler, the dump writer and the device
 * log. One record (diag_task) per observed task lives from its submission to the
 * end of its run on the stream worker.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "diag/diag_private.h"

static _Atomic uint64_t g_task_ids;
static atomic_uint g_host_tids;
static _Thread_local char *tls_tag;
static _Thread_local uint32_t tls_host_tid;

uint64_t diag_next_task_id(void)
{
    return atomic_fetch_add(&g_task_ids, 1) + 1;
}

void diag_set_tag(const char *tag)
{
    free(tls_tag);
    tls_tag = tag != NULL && tag[0] != '\0' ? strdup(tag) : NULL;
}

char *diag_take_tag(void)
{
    char *t = tls_tag;
    tls_tag = NULL;
    return t;
}

uint32_t diag_host_tid(void)
{
    if (tls_host_tid == 0) {
        tls_host_tid = atomic_fetch_add(&g_host_tids, 1) + 1;
    }
    return tls_host_tid;
}

int32_t diag_current_device(void)
{
    return core_thread_device();
}

static void task_free(diag_task *t)
{
    if (t->dep != NULL || t->node != NULL) {
        diag_state_lock();
        diag_event_put(t->dep);
        diag_event_put(t->node);
        diag_state_unlock();
    }
    diag_vc_free(t->cb_vc);
    diag_dump_free(t->dump);
    free(t->tag);
    free(t);
}

/* ------------------------------------------------------------------- tasks */

/* The cheap path: only the profiler wants the task (real timing, no sanitizer, no dump
 * or subscription for it). Its record lives in the stream's ring; no allocation, no
 * lock. false when the task needs the full record. */
static bool submit_fast(core_obs *o, const mock_task_desc *d)
{
    const char *name = d->name != NULL ? d->name : "task";
    size_t nl = strlen(name);
    diag_fast_rec *f = o->inline_rec;
    if (f == NULL || nl >= sizeof f->name) {
        return false;
    }
    f->id = diag_next_task_id();
    f->bytes = d->bytes;
    f->start = 0;
    f->step = diag_prof_step();
    f->tag = diag_take_tag();
    f->kind = (uint8_t)d->kind;
    f->link = (uint8_t)d->link;
    f->stream_default = o->flag;
    memcpy(f->name, name, nl + 1);
    o->out_inline = true;
    return true;
}

/* The end of the previous observed task of this worker: the start of the next one when
 * it follows at once (one clock read per task instead of two). */
static _Thread_local uint64_t tls_last_end;

static void *on_submit(core_obs *o)
{
    const diag_config *c = diag_config_get();
    const mock_task_desc *d = o->task;
    bool timing = c->timing != DIAG_TIMING_REAL;
    bool san = c->sanitize != DIAG_SANITIZE_OFF;
    if (!timing && !san) {
        bool wanted = diag_prof_wants_device(o->device);
        bool kernel_extra = d->kind == MOCK_TASK_KERNEL &&
                            (diag_prof_subscribed() ||
                             (atomic_load_explicit(&core_observing_mask_, memory_order_relaxed) & CORE_OBSERVE_DUMP));
        if (!wanted && !kernel_extra) {
            (void)diag_take_tag(); /* nobody needs this task: the tag is used up all the same */
            return NULL;
        }
        if (wanted && !kernel_extra && submit_fast(o, d)) {
            return NULL;
        }
    }
    diag_task *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL; /* the task runs unobserved */
    }
    t->id = diag_next_task_id();
    t->stream = o->stream;
    t->device = o->device;
    t->stream_id = o->stream_id;
    t->stream_default = o->flag;
    t->kind = d->kind;
    t->link = d->link;
    t->pageable = d->pageable;
    t->peer = d->peer_device;
    t->bytes = d->bytes;
    t->cost_ns = d->cost_ns;
    const char *name = d->name != NULL ? d->name : "task";
    size_t nl = strnlen(name, sizeof t->name - 1);
    memcpy(t->name, name, nl);
    t->name[nl] = '\0';
    t->tag = diag_take_tag();
    t->step = diag_prof_step();

    diag_report *reports = NULL;
    if (timing || san) {
        diag_state_lock();
        diag_stream *ds = diag_stream_get(o->stream, o->device, o->stream_id);
        if (ds != NULL) {
            if (d->kind == MOCK_TASK_EVENT_WAIT && d->event != NULL) {
                t->dep = diag_event_latest(d->event);
            } else if (d->kind == MOCK_TASK_EVENT_RECORD && d->event != NULL) {
                t->node = diag_event_record(d->event);
            }
            if (timing) {
                diag_timing_submit(t, ds);
            }
            if (san) {
                diag_sanitize_task(t, ds, d, &reports);
            }
        }
        diag_state_unlock();
    }
    if (reports != NULL) {
        diag_sanitize_emit(reports);
    }
    t->profile = diag_prof_wants(t);
    t->subscribed = d->kind == MOCK_TASK_KERNEL && diag_prof_subscribed();
    if (d->kind == MOCK_TASK_KERNEL) {
        t->dump = diag_dump_plan(t, d);
    }
    bool needed = t->timed || t->profile || t->subscribed || t->dump != NULL || t->fail != ACL_SUCCESS ||
                  t->cb_vc != NULL;
    if (!needed) {
        task_free(t);
        return NULL;
    }
    return t;
}

static void on_begin(core_obs *o)
{
    diag_task *t = o->record;
    if (t == NULL) { /* the cheap path */
        diag_fast_rec *f = o->inline_rec;
        f->start = o->flag ? diag_wall_ns() : tls_last_end;
        return;
    }
    if (t->timed) {
        if (!o->skipped) {
            diag_timing_begin(t);
        }
        o->out_timed = t->scheduled;
        o->out_time_ns = t->end_vt;
    } else {
        t->real_begin = o->flag ? diag_wall_ns() : tls_last_end;
    }
    if (o->skipped) {
        return;
    }
    if (t->cb_vc != NULL) {
        diag_sanitize_callback_enter(t);
    }
    if (t->dump != NULL) {
        diag_dump_inputs(t);
    }
    o->out_fail = t->fail;
}

static void on_end(core_obs *o)
{
    diag_task *t = o->record;
    if (t == NULL) {
        diag_fast_rec *f = o->inline_rec;
        uint64_t end = diag_wall_ns();
        tls_last_end = end;
        if (o->skipped) {
            free(f->tag);
        } else {
            diag_prof_fast(f, o->device, o->stream_id, end, o->rc);
        }
        return;
    }
    if (t->cb_vc != NULL) {
        diag_sanitize_callback_leave();
    }
    uint64_t start, end;
    if (t->timed) {
        diag_timing_end(t, o->skipped);
        start = t->start_vt;
        end = t->end_vt;
    } else {
        start = t->real_begin;
        end = diag_wall_ns();
        tls_last_end = end;
    }
    if (!o->skipped) {
        if (t->profile) {
            diag_prof_task(t, start, end, o->rc);
        }
        if (t->subscribed) {
            diag_prof_subscription_task(t, start, end);
        }
        if (t->dump != NULL) {
            diag_dump_outputs(t, o->rc);
        }
    }
    task_free(t);
}

static void on_drop(core_obs *o)
{
    diag_task *t = o->record;
    if (t == NULL) {
        free(((diag_fast_rec *)o->inline_rec)->tag);
        return;
    }
    if (t->timed) {
        diag_timing_drop(t);
    }
    task_free(t);
}

/* ------------------------------------------------------------------ host */

static void on_host_op(core_obs *o)
{
    const diag_config *c = diag_config_get();
    const mock_task_desc *d = o->task;
    uint64_t id = diag_next_task_id();
    char *tag = diag_take_tag();
    uint64_t start, end;
    if (c->timing != DIAG_TIMING_REAL) {
        diag_timing_host_op(d, o->device, &start, &end);
    } else {
        start = end = diag_wall_ns();
    }
    if (c->sanitize != DIAG_SANITIZE_OFF) {
        diag_report *reports = NULL;
        diag_state_lock();
        diag_sanitize_host(id, d->name, tag, o->device, d->access, d->naccess, &reports);
        diag_state_unlock();
        diag_sanitize_emit(reports);
    }
    diag_prof_host(d->name, diag_kind_name(d->kind, d->link), start, end, d->bytes, tag);
    free(tag);
}

static void on_mem(core_obs *o)
{
    const diag_config *c = diag_config_get();
    bool alloc = o->kind == CORE_OBS_MEM_ALLOC;
    char *tag = alloc ? NULL : diag_take_tag();
    uint64_t start, end;
    if (c->timing != DIAG_TIMING_REAL) {
        diag_timing_host_cost(alloc ? c->model.malloc_ns : c->model.free_ns, &start, &end);
    } else {
        start = end = diag_wall_ns();
    }
    if (c->sanitize != DIAG_SANITIZE_OFF) {
        diag_report *reports = NULL;
        diag_state_lock();
        if (alloc) {
            diag_sanitize_alloc(o->ptr, o->size);
        } else {
            diag_sanitize_free(o->ptr, o->size, o->device < 0, tag, &reports);
        }
        diag_state_unlock();
        diag_sanitize_emit(reports);
    }
    const char *name = alloc ? (o->device < 0 ? "aclrtMallocHost" : "aclrtMalloc")
                             : (o->device < 0 ? "aclrtFreeHost" : "aclrtFree");
    diag_prof_host(name, alloc ? "malloc" : "free", start, end, o->size, tag);
    free(tag);
}

static void on_sync(core_obs *o)
{
    const diag_config *c = diag_config_get();
    uint64_t before = diag_host_now();
    if (c->timing != DIAG_TIMING_REAL && !o->flag) { /* flag: a destroyed stream (no wait modeled) */
        if (o->kind == CORE_OBS_SYNC_STREAM) {
            diag_timing_sync_stream(o->stream);
        } else {
            diag_timing_sync_event(o->event);
        }
    }
    if (c->sanitize != DIAG_SANITIZE_OFF) {
        diag_state_lock();
        if (o->kind == CORE_OBS_SYNC_STREAM) {
            diag_stream *ds = diag_stream_get(o->stream, o->device, -1);
            if (ds != NULL) {
                diag_sanitize_sync_stream(ds);
            }
        } else {
            diag_event_node *n = diag_event_latest(o->event);
            if (n != NULL) {
                diag_sanitize_sync_node(n);
                diag_event_put(n);
            }
        }
        diag_state_unlock();
    }
    uint64_t after = diag_host_now();
    if (c->timing != DIAG_TIMING_REAL && after > before) { /* the host waited: a span on its track */
        diag_prof_host(o->kind == CORE_OBS_SYNC_STREAM ? "synchronize stream" : "synchronize event", "sync", before,
                       after, 0, NULL);
    }
}

void *diag_observe(core_obs *o)
{
    switch (o->kind) {
    case CORE_OBS_TASK_SUBMIT:
        return on_submit(o);
    case CORE_OBS_TASK_BEGIN:
        on_begin(o);
        break;
    case CORE_OBS_TASK_END:
        on_end(o);
        break;
    case CORE_OBS_TASK_DROP:
        on_drop(o);
        break;
    case CORE_OBS_SYNC_STREAM:
    case CORE_OBS_SYNC_EVENT:
        on_sync(o);
        break;
    case CORE_OBS_HOST_OP:
        on_host_op(o);
        break;
    case CORE_OBS_MEM_ALLOC:
    case CORE_OBS_MEM_FREE:
        on_mem(o);
        break;
    case CORE_OBS_ERROR: {
        /* the text is "<func>: <message>": keep the message */
        const char *text = o->text != NULL ? o->text : "";
        size_t fl = o->func != NULL ? strlen(o->func) : 0;
        if (fl > 0 && strncmp(text, o->func, fl) == 0 && text[fl] == ':') {
            text += fl + (text[fl + 1] == ' ' ? 2 : 1);
        }
        diag_log(diag_current_device(), DIAG_LOG_ERROR, o->func, o->rc, "%s", text);
        break;
    }
    case CORE_OBS_DEVICE_RESET:
        diag_log(o->device, DIAG_LOG_INFO, o->func, 0, "device %d reset%s: its default context, streams and events "
                 "were released", o->device, o->flag ? " (forced)" : "");
        break;
    }
    return NULL;
}
