/*
 * capture.c - stream capture (aclmdlRICapture*, acl_next_semantics.md §2.2-2.6):
 * the capture port the stream subsystem calls (stream/stream.h), the capture
 * modes and the calls they forbid, cross-stream capture through events
 * (fork/join), external record/wait, task groups and their update.
 *
 * A capturing stream is bound (stream_set_binding) to its model stream:
 * stream_enqueue hands every task to graph_port.enqueue, which appends it to
 * the model instead of running it. An event record on a capturing stream
 * becomes an edge node of the model and marks the event as "recorded in this
 * capture"; a stream that waits on such an event joins the capture (it gets a
 * model stream and a binding), transitively. End checks that every joined
 * stream rejoined the origin (its last task is a record that a rejoined stream
 * waited on).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "stream/stream.h"
#include "graph/graph.h"
#include "graph/graph_private.h"

/* The calling thread's capture mode (aclmdlRICaptureThreadExchangeMode). */
static _Thread_local int tls_mode = ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;
static _Thread_local graph_task *tls_last;

graph_task *graph_tls_last_task(void)
{
    return tls_last;
}

void graph_tls_set_last_task(graph_task *t)
{
    tls_last = t;
}

/* Events recorded in a capture (g_graph): the latest captured record of each. */
typedef struct event_mark {
    aclrtEvent ev;
    graph_model *m;     /* the capture (model) the record belongs to */
    graph_task *rec;    /* its edge node */
    bool ext_used;      /* an external record or wait was taken in this model */
    int rec_flag;       /* -1 unset, else the record flag fixed by the first use */
    int wait_flag;
} event_mark;
static event_mark *g_marks;
static size_t g_nmarks, g_capmarks;

/* Captures in progress (g_graph): the models in GRAPH_CAPTURING or INVALIDATED
 * that still have bound streams. */
static graph_model **g_caps;
static size_t g_ncaps, g_capcaps;

/* One mark per event: its latest use in a capture or build. */
static event_mark *mark_find_locked(aclrtEvent ev)
{
    for (size_t i = 0; i < g_nmarks; i++) {
        if (g_marks[i].ev == ev) {
            return &g_marks[i];
        }
    }
    return NULL;
}

/* The mark of `ev` for model `m` (a mark of another model is taken over). */
static event_mark *mark_get_locked(aclrtEvent ev, graph_model *m)
{
    event_mark *e = mark_find_locked(ev);
    if (e != NULL) {
        if (e->m != m) {
            *e = (event_mark){ev, m, NULL, false, -1, -1};
        }
        return e;
    }
    if (g_nmarks == g_capmarks) {
        size_t ncap = g_capmarks ? g_capmarks * 2 : 16;
        event_mark *n = realloc(g_marks, ncap * sizeof(*n));
        if (n == NULL) {
            return NULL;
        }
        g_marks = n;
        g_capmarks = ncap;
    }
    e = &g_marks[g_nmarks++];
    *e = (event_mark){ev, m, NULL, false, -1, -1};
    return e;
}

static void mark_drop_locked(event_mark *e)
{
    *e = g_marks[--g_nmarks];
}

void graph_forget_events_locked(graph_model *m)
{
    for (size_t i = 0; i < g_nmarks;) {
        if (g_marks[i].m == m) {
            mark_drop_locked(&g_marks[i]);
        } else {
            i++;
        }
    }
}

static bool caps_add_locked(graph_model *m)
{
    if (g_ncaps == g_capcaps) {
        size_t ncap = g_capcaps ? g_capcaps * 2 : 8;
        graph_model **n = realloc(g_caps, ncap * sizeof(*n));
        if (n == NULL) {
            return false;
        }
        g_caps = n;
        g_capcaps = ncap;
    }
    g_caps[g_ncaps++] = m;
    return true;
}

static void caps_remove_locked(graph_model *m)
{
    for (size_t i = 0; i < g_ncaps; i++) {
        if (g_caps[i] == m) {
            g_caps[i] = g_caps[--g_ncaps];
            return;
        }
    }
}

void graph_invalidate_locked(graph_model *m)
{
    for (graph_model *x = m; x != NULL; x = x->parent) {
        if (x->state == GRAPH_CAPTURING) {
            x->state = GRAPH_INVALIDATED;
        }
    }
}

void graph_unbind_all_locked(graph_model *m)
{
    for (size_t i = 0; i < m->nstreams; i++) {
        graph_mstream *ms = m->streams[i];
        if (ms->bound) {
            if (!ms->user_gone) {
                stream_set_binding(ms->user, NULL);
            }
            ms->bound = false;
            stream_capture_count(-1);
        }
    }
    caps_remove_locked(m);
}

/* ----------------------------------------------------------- SoC support */

aclError graph_soc_check(const char *fn, int family)
{
    unsigned a2a3 = CORE_SOC_BIT(CORE_SOC_A2) | CORE_SOC_BIT(CORE_SOC_A3);
    switch (family) {
    case GRAPH_SOC_CAPTURE: /* 950, A3, A2, 310P (MRI support matrix) */
        return core_soc_require(fn, CORE_SOC_950 | a2a3 | CORE_SOC_BIT(CORE_SOC_310P));
    case GRAPH_SOC_EDIT: /* 950, A3, A2 */
        return core_soc_require(fn, CORE_SOC_950 | a2a3);
    default: /* aclrtActiveStream / aclrtSwitchStream: 950, A2, 310B, 310P, 910 - not A3 (STR) */
        return core_soc_require(fn, CORE_SOC_950 | CORE_SOC_BIT(CORE_SOC_A2) | CORE_SOC_BIT(CORE_SOC_310B) |
                                        CORE_SOC_BIT(CORE_SOC_310P) | CORE_SOC_BIT(CORE_SOC_910));
    }
}

/* ------------------------------------------------------ the mode checks */

/* The captures that forbid an unsafe call on this thread (MRI#aclmdlRICaptureThreadExchangeMode,
 * §2.3): the thread's own non-RELAXED captures, and - unless the thread switched to
 * THREAD_LOCAL - every GLOBAL capture of another thread. A RELAXED thread is never
 * blocked. Invalidates them when `invalidate`. g_graph held. */
static bool forbidden_locked(bool invalidate)
{
    if (tls_mode == ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
        return false;
    }
    pthread_t self = pthread_self();
    bool forbidden = false;
    for (size_t i = 0; i < g_ncaps; i++) {
        graph_model *m = g_caps[i];
        if (m->state != GRAPH_CAPTURING) {
            continue;
        }
        bool own = pthread_equal(m->thread, self) && m->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
        bool global = !pthread_equal(m->thread, self) && m->mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL &&
                      tls_mode == ACL_MODEL_RI_CAPTURE_MODE_GLOBAL;
        if (own || global) {
            forbidden = true;
            if (invalidate) {
                graph_invalidate_locked(m);
            }
        }
    }
    return forbidden;
}

static graph_mstream *capture_ms(mock_stream *s)
{
    void *b = s != NULL ? stream_binding(s) : NULL;
    if (b == NULL || *(int *)b != BIND_STREAM) {
        return NULL;
    }
    graph_mstream *ms = b;
    return ms->m->captured ? ms : NULL;
}

static aclError port_check(const char *fn, stream_capture_call call, mock_stream *s, const void *obj)
{
    aclError rc = ACL_SUCCESS;
    const char *why = NULL;
    graph_lock();
    graph_mstream *ms = capture_ms(s);
    switch (call) {
    case STREAM_CALL_SYNC_STREAM:
        if (ms != NULL && ms->m->state == GRAPH_CAPTURING) {
            graph_invalidate_locked(ms->m);
            rc = ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC;
            why = "synchronizing or querying a capturing stream is not permitted (the capture is invalidated)";
        }
        break;
    case STREAM_CALL_SYNC_EVENT: {
        event_mark *e = mark_find_locked((aclrtEvent)obj);
        if (e != NULL && e->m->state == GRAPH_CAPTURING && e->rec != NULL) {
            graph_invalidate_locked(e->m);
            rc = ACL_ERROR_RT_EVENT_CAPTURED;
            why = "the event was recorded in a capture in progress: it cannot be synchronized or queried "
                  "(the capture is invalidated)";
        }
        break;
    }
    case STREAM_CALL_SYNC_CONTEXT:
        break;
    case STREAM_CALL_BLOCKING_COPY:
        if (forbidden_locked(true)) {
            rc = ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC;
            why = "operation not permitted when a stream is capturing and the capture mode is not relaxed "
                  "(the capture is invalidated; aclmdlRICaptureThreadExchangeMode can allow it)";
        }
        break;
    case STREAM_CALL_PAGEABLE_COPY:
        if (ms != NULL && ms->m->state == GRAPH_CAPTURING) {
            graph_invalidate_locked(ms->m);
            rc = ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
            why = "a captured copy must use pinned host memory (aclrtMallocHost), not pageable memory "
                  "(the capture is invalidated)";
        } else if (ms == NULL && forbidden_locked(true)) {
            rc = ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
            why = "an async copy of pageable host memory is not permitted while a stream is capturing in this "
                  "mode (the capture is invalidated)";
        }
        break;
    case STREAM_CALL_DEFAULT_STREAM: {
        /* Any use of the default stream during capture is illegal (G-CAP1 item 6):
         * refused for the threads an unsafe call is refused to, and always for
         * the thread that captures. */
        pthread_t self = pthread_self();
        bool own = false;
        for (size_t i = 0; i < g_ncaps; i++) {
            if (g_caps[i]->state == GRAPH_CAPTURING && pthread_equal(g_caps[i]->thread, self)) {
                own = true;
                graph_invalidate_locked(g_caps[i]);
            }
        }
        if (forbidden_locked(true) || own) {
            rc = ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT;
            why = "the default stream cannot be used while a stream is capturing (the capture is invalidated)";
        }
        break;
    }
    }
    graph_unlock();
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------- the enqueue */

static aclError port_enqueue(mock_stream *s, void *binding, const stream_task *t)
{
    (void)s;
    aclError rc = ACL_SUCCESS;
    graph_lock();
    if (*(int *)binding == BIND_UPDATE) {
        graph_update *u = binding;
        if (u->n == u->cap) {
            size_t ncap = u->cap ? u->cap * 2 : 8;
            stream_task *n = realloc(u->tasks, ncap * sizeof(*n));
            if (n == NULL) {
                rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            } else {
                u->tasks = n;
                u->cap = ncap;
            }
        }
        if (rc == ACL_SUCCESS) {
            u->tasks[u->n++] = *t;
        } else {
            graph_defer_free_locked(t);
        }
        graph_unlock_and_free();
        return rc;
    }
    graph_mstream *ms = binding;
    graph_model *m = ms->m;
    if (m->state == GRAPH_INVALIDATED) {
        rc = ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
    } else if (m->state == GRAPH_CAPTURING && m->grp_recording != NULL && m->grp_recording->ms != ms) {
        /* 107034: another capturing stream of this capture while a group records */
        m->grp_recording->err = ACL_ERROR_STREAM_TASK_GROUP_INTR;
        rc = ACL_ERROR_STREAM_TASK_GROUP_INTR;
    } else if (m->state == GRAPH_CAPTURING && m->grp_recording != NULL && (t->ops == NULL || !t->ops->group_ok)) {
        m->grp_recording->err = ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT;
        rc = ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT;
    } else if (m->state != GRAPH_CAPTURING && m->state != GRAPH_BUILDING) {
        rc = ACL_ERROR_RT_MODEL_EXECUTE;
    }
    if (rc == ACL_SUCCESS) {
        int type = t->ops != NULL ? t->ops->type : ACL_MODEL_RI_TASK_DEFAULT;
        if (graph_task_append_locked(ms, GT_OP, type, t) == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
        }
    } else {
        graph_defer_free_locked(t);
    }
    graph_unlock_and_free();
    return rc;
}

/* ------------------------------------------------------------- events */

/* A stream outside any capture joins capture `m` (it waited on an event
 * recorded in it; G-CAP2). g_graph held. */
static graph_mstream *join_locked(graph_model *m, mock_stream *s)
{
    graph_mstream *ms = graph_mstream_add_locked(m, s, 0);
    if (ms == NULL) {
        return NULL;
    }
    ms->bound = true;
    stream_set_binding(s, ms);
    stream_capture_count(1);
    return ms;
}

static aclError add_waiter_locked(graph_task *rec, graph_mstream *ms)
{
    graph_mstream **n = realloc(rec->waiters, (rec->nwaiters + 1) * sizeof(*n));
    if (n == NULL) {
        return ACL_ERROR_RT_MEMORY_ALLOCATION;
    }
    rec->waiters = n;
    rec->waiters[rec->nwaiters++] = ms;
    return ACL_SUCCESS;
}

static aclError port_event(const char *fn, stream_capture_event_op op, mock_stream *s, aclrtEvent ev,
                           uint32_t event_flags, uint32_t op_flag, const stream_task *task, bool *handled)
{
    aclError rc = ACL_SUCCESS;
    const char *why = NULL;
    bool keep = false; /* the port keeps `task` */
    static const int kind_type[] = {ACL_MODEL_RI_TASK_EVENT_RECORD, ACL_MODEL_RI_TASK_EVENT_WAIT,
                                    ACL_MODEL_RI_TASK_EVENT_RESET};
    graph_lock();
    void *b = stream_binding(s);
    graph_task *gt = NULL;
    if (b != NULL && *(int *)b == BIND_UPDATE) {
        rc = ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT;
        why = "event tasks cannot be part of a task group (update)";
    } else if (b != NULL) {
        graph_mstream *ms = b;
        graph_model *m = ms->m;
        bool building = m->state == GRAPH_BUILDING;
        *handled = true;
        if (m->state == GRAPH_INVALIDATED) {
            rc = ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
            why = "the capture of this stream was invalidated";
        } else if (event_flags & ACL_EVENT_IPC) {
            /* EVT#aclrtCreateEventExWithFlag: IPC events cannot be used in capture
             * (the code is not named; mock choice) */
            rc = ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
            why = "ACL_EVENT_IPC events cannot be recorded, waited on or reset in a capture or a model";
        } else if (m->grp_recording != NULL) {
            m->grp_recording->err = ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT;
            rc = ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT;
            why = "event tasks cannot be recorded inside a task group";
        } else if (op == STREAM_EVENT_RESET) {
            gt = graph_task_append_locked(ms, GT_OP, ACL_MODEL_RI_TASK_EVENT_RESET, task);
            keep = true;
        } else if (op_flag != 0) {
            /* ACL_EVENT_RECORD_EXTERNAL / ACL_EVENT_WAIT_EXTERNAL (G-CAP2) */
            event_mark *e = mark_get_locked(ev, m);
            if (m->root != NULL) {
                rc = ACL_ERROR_RT_PARAM_INVALID;
                why = "external event records and waits are not allowed inside sub-models";
            } else if (e == NULL) {
                rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
                why = "out of host memory";
            } else if (e->ext_used) {
                rc = ACL_ERROR_RT_PARAM_INVALID;
                why = "an event may take one external record or wait per model";
            } else if ((op == STREAM_EVENT_RECORD && e->rec_flag == 0) || (op == STREAM_EVENT_WAIT && e->wait_flag == 0)) {
                rc = ACL_ERROR_RT_PARAM_INVALID;
                why = "the flag of this event was fixed to DEFAULT by its first use in the model";
            } else {
                e->ext_used = true;
                if (op == STREAM_EVENT_RECORD) {
                    e->rec_flag = 1;
                } else {
                    e->wait_flag = 1;
                }
                gt = graph_task_append_locked(ms, GT_OP, kind_type[op], task);
                keep = true;
            }
        } else if (op == STREAM_EVENT_RECORD) {
            event_mark *e = mark_get_locked(ev, m);
            if (e == NULL || (e->rec_flag == 1)) {
                rc = e == NULL ? ACL_ERROR_RT_MEMORY_ALLOCATION : ACL_ERROR_RT_PARAM_INVALID;
                why = e == NULL ? "out of host memory" : "the record flag of this event was fixed to EXTERNAL";
            } else {
                gt = graph_task_append_locked(ms, GT_EDGE_RECORD, ACL_MODEL_RI_TASK_EVENT_RECORD, NULL);
                if (gt != NULL) {
                    e->rec = gt;
                    e->rec_flag = 0;
                }
            }
        } else { /* wait */
            event_mark *e = mark_find_locked(ev);
            if (e != NULL && e->m != m && e->m->state == GRAPH_CAPTURING && e->rec != NULL) {
                rc = ACL_ERROR_STREAM_CAPTURE_CONFLICT;
                why = "the event was recorded in another capture (streams of two captures cannot be linked)";
            } else if (e == NULL || e->m != m || e->rec == NULL) {
                if (building) {
                    /* a built model waits on an event recorded outside it: a real wait */
                    gt = graph_task_append_locked(ms, GT_OP, ACL_MODEL_RI_TASK_EVENT_WAIT, task);
                    keep = true;
                } else {
                    rc = ACL_ERROR_RT_CAPTURE_DEPENDENCY;
                    why = "the event has no record in this capture (record it on a capturing stream first, or "
                          "use ACL_EVENT_WAIT_EXTERNAL)";
                }
            } else {
                gt = graph_task_append_locked(ms, GT_EDGE_WAIT, ACL_MODEL_RI_TASK_EVENT_WAIT, NULL);
                if (gt != NULL) {
                    gt->rec = e->rec;
                    e->wait_flag = 0;
                    if (add_waiter_locked(e->rec, ms) != ACL_SUCCESS) {
                        rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
                        why = "out of host memory";
                    }
                }
            }
        }
        if (rc == ACL_SUCCESS && gt == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
            keep = true; /* graph_task_append_locked freed it */
        }
    } else {
        /* a stream outside any capture */
        event_mark *e = mark_find_locked(ev);
        if (op == STREAM_EVENT_RECORD && e != NULL && e->m->captured) {
            /* a plain record supersedes the captured one */
            e->rec = NULL;
        } else if (op == STREAM_EVENT_WAIT && op_flag == 0 && e != NULL && e->rec != NULL &&
                   e->m->state == GRAPH_CAPTURING && e->m->captured) {
            /* fork: this stream joins the capture */
            graph_mstream *ms = join_locked(e->m, s);
            gt = ms != NULL ? graph_task_append_locked(ms, GT_EDGE_WAIT, ACL_MODEL_RI_TASK_EVENT_WAIT, NULL) : NULL;
            if (gt == NULL) {
                rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
                why = "out of host memory";
            } else {
                gt->rec = e->rec;
                rc = add_waiter_locked(e->rec, ms);
            }
            *handled = true;
        }
    }
    if (gt != NULL) {
        gt->event = ev;
        gt->event_flags = event_flags;
        gt->op_flag = op_flag;
    }
    if (!keep) {
        graph_defer_free_locked(task);
    }
    graph_unlock_and_free();
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why != NULL ? why : "the capture refused the event task");
    }
    return ACL_SUCCESS;
}

static void port_event_gone(aclrtEvent ev)
{
    graph_lock();
    for (size_t i = 0; i < g_nmarks;) {
        if (g_marks[i].ev == ev) {
            mark_drop_locked(&g_marks[i]);
        } else {
            i++;
        }
    }
    graph_unlock();
}

const stream_capture_port graph_port = {port_enqueue, port_check, port_event, port_event_gone};

/* ------------------------------------------------------------- hooks */

aclError graph_ctx_sync(mock_context *ctx, int64_t timeout_ms)
{
    (void)timeout_ms;
    if (!stream_capture_any()) {
        return ACL_SUCCESS;
    }
    bool capturing = false;
    graph_lock();
    for (size_t i = 0; i < g_ncaps; i++) {
        if (g_caps[i]->ctx == ctx && g_caps[i]->state == GRAPH_CAPTURING) {
            graph_invalidate_locked(g_caps[i]);
            capturing = true;
        }
    }
    graph_unlock();
    /* synchronizing a device or context while one of its streams captures (G-CAP1 item 2) */
    return capturing ? ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC : ACL_SUCCESS;
}

void graph_stream_destroyed(mock_stream *s)
{
    graph_lock();
    void *b = stream_binding(s);
    if (b != NULL && *(int *)b == BIND_STREAM) {
        graph_mstream *ms = b;
        ms->user_gone = true;
        if (ms->m->state == GRAPH_CAPTURING) {
            graph_invalidate_locked(ms->m); /* a captured stream went away */
        }
        if (ms->bound) {
            ms->bound = false;
            stream_capture_count(-1);
        }
        stream_set_binding(s, NULL);
    } else if (b != NULL) {
        graph_update *u = b;
        u->grp->updating = false;
        for (size_t i = 0; i < u->n; i++) {
            graph_defer_free_locked(&u->tasks[i]);
        }
        free(u->tasks);
        free(u);
        stream_set_binding(s, NULL);
        stream_capture_count(-1);
    }
    /* the model streams of captured models that recorded this stream */
    graph_unlock_and_free();
}

/* -------------------------------------------------------- entry points */

aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode)
{
    static const char fn[] = "aclmdlRICaptureThreadExchangeMode";
    MOCK_REQUIRE_NONNULL(fn, mode);
    if ((int)*mode < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || (int)*mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'mode' %d is not an aclmdlRICaptureMode", (int)*mode);
    }
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_CAPTURE);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    int old = tls_mode;
    tls_mode = (int)*mode;
    *mode = (aclmdlRICaptureMode)old;
    return ACL_SUCCESS;
}

/* Begin a capture of `s` into `m` (a new model, or a sub-model). */
static aclError begin_common(const char *fn, aclrtStream stream, aclmdlRI sub, aclmdlRICaptureMode mode)
{
    if ((int)mode < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || (int)mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
        return core_error(fn, ACL_ERROR_INVALID_PARAM, "argument 'mode' %d is not an aclmdlRICaptureMode", (int)mode);
    }
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, sub != NULL ? GRAPH_SOC_EDIT : GRAPH_SOC_CAPTURE);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    if (stream == NULL) {
        return core_error(fn, ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, "the default stream cannot be captured");
    }
    mock_stream *s = NULL;
    rc = stream_acquire(fn, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    graph_model *m = NULL;
    if (sub == NULL) {
        m = graph_model_new(GRAPH_CAPTURING, true, stream_context(s), stream_device(s));
        if (m == NULL) {
            stream_release(s);
            return core_error(fn, ACL_ERROR_RT_MEMORY_ALLOCATION, "out of host memory for a model");
        }
    }
    const char *why = NULL;
    graph_lock();
    if (sub != NULL) {
        m = graph_model_find_locked(sub);
        if (m == NULL || m->root == NULL || m->state != GRAPH_NEW) {
            rc = ACL_ERROR_RT_PARAM_INVALID;
            why = "argument 'modelRI' is not a sub-model made by aclmdlRIAddCondTask that waits for its capture";
            m = NULL;
        }
    }
    if (rc == ACL_SUCCESS && stream_binding(s) != NULL) {
        rc = ACL_ERROR_RT_STREAM_CAPTURED;
        why = "the stream is already capturing (or bound to a model, or recording an update)";
    }
    graph_mstream *ms = NULL;
    if (rc == ACL_SUCCESS) {
        ms = graph_mstream_add_locked(m, s, 0);
        if (ms == NULL || !caps_add_locked(m)) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
        }
    }
    if (rc == ACL_SUCCESS) {
        m->state = GRAPH_CAPTURING;
        m->mode = (int)mode;
        m->thread = pthread_self();
        m->origin = ms;
        ms->bound = true;
        stream_set_binding(s, ms);
        stream_capture_count(1);
    } else if (sub == NULL) {
        graph_model_teardown_locked(m);
    }
    graph_unlock_and_free();
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)
{
    return begin_common("aclmdlRICaptureBegin", stream, NULL, mode);
}

aclError aclmdlRICaptureToModelRIBegin(aclrtStream stream, aclmdlRI modelRI, aclmdlRICaptureMode mode)
{
    static const char fn[] = "aclmdlRICaptureToModelRIBegin";
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    return begin_common(fn, stream, modelRI, mode);
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status, aclmdlRI *modelRI)
{
    static const char fn[] = "aclmdlRICaptureGetInfo";
    MOCK_REQUIRE_NONNULL(fn, status);
    MOCK_REQUIRE_NONNULL(fn, modelRI);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_acquire(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    *status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    *modelRI = NULL;
    if (stream_capture_any()) {
        graph_lock();
        graph_mstream *ms = capture_ms(s);
        if (ms != NULL && (ms->m->state == GRAPH_CAPTURING || ms->m->state == GRAPH_INVALIDATED)) {
            *status = ms->m->state == GRAPH_CAPTURING ? ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE
                                                      : ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED;
            *modelRI = ms->m;
        }
        graph_unlock();
    }
    stream_release(s);
    return ACL_SUCCESS;
}

/* Every stream pulled into a capture must rejoin the origin: its last task is
 * a record that the origin, or a stream that rejoined, waited on (G-CAP2). */
static bool all_rejoined_locked(graph_model *m)
{
    size_t n = m->nstreams;
    bool *ok = calloc(n ? n : 1, sizeof(*ok));
    if (ok == NULL) {
        return false;
    }
    ok[m->origin->index] = true;
    bool changed = true;
    while (changed) {
        changed = false;
        for (size_t i = 0; i < n; i++) {
            graph_mstream *ms = m->streams[i];
            if (ok[i] || ms->n == 0) {
                continue;
            }
            graph_task *last = ms->tasks[ms->n - 1];
            if (last->kind != GT_EDGE_RECORD) {
                continue;
            }
            for (size_t k = 0; k < last->nwaiters; k++) {
                if (ok[last->waiters[k]->index]) {
                    ok[i] = true;
                    changed = true;
                    break;
                }
            }
        }
    }
    bool all = true;
    for (size_t i = 0; i < n; i++) {
        all = all && ok[i];
    }
    free(ok);
    return all;
}

static bool subs_capturing_locked(graph_model *m)
{
    for (size_t i = 0; i < m->nchildren; i++) {
        if (m->children[i]->state == GRAPH_CAPTURING || subs_capturing_locked(m->children[i])) {
            return true;
        }
    }
    return false;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI)
{
    static const char fn[] = "aclmdlRICaptureEnd";
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_acquire(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    graph_lock();
    graph_mstream *ms = capture_ms(s);
    graph_model *m = ms != NULL ? ms->m : NULL;
    bool terminate = false;
    if (m == NULL || (m->state != GRAPH_CAPTURING && m->state != GRAPH_INVALIDATED)) {
        rc = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
        why = "the stream is not capturing";
    } else if (ms != m->origin) {
        rc = ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED;
        why = "the capture did not begin on this stream (end it on its origin stream)";
    } else if (m->mode != ACL_MODEL_RI_CAPTURE_MODE_RELAXED && !pthread_equal(m->thread, pthread_self())) {
        rc = ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
        why = "a capture begun in GLOBAL or THREAD_LOCAL mode must end on the thread that began it";
    } else if (m->root == NULL && m->grp_recording == NULL && subs_capturing_locked(m)) {
        rc = ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING;
        why = "a sub-model of a conditional task is still capturing";
    } else if (m->state == GRAPH_INVALIDATED) {
        rc = ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
        why = "the capture was invalidated by a forbidden call (the model is discarded)";
        terminate = true;
    } else if (m->grp_recording != NULL) {
        rc = ACL_ERROR_STREAM_TASK_GROUP_STATUS;
        why = "a task group is still being recorded (aclmdlRICaptureTaskGrpEnd first)";
    } else if (!all_rejoined_locked(m)) {
        rc = ACL_ERROR_RT_STREAM_UNJOINED;
        why = "a stream pulled into the capture did not rejoin the origin stream (record an event on it last and "
              "wait on it from the origin); the capture is discarded";
        terminate = true;
    }
    if (rc == ACL_SUCCESS) {
        graph_unbind_all_locked(m);
        graph_forget_events_locked(m);
        m->state = GRAPH_READY;
        if (modelRI != NULL) {
            *modelRI = m->root == NULL ? (aclmdlRI)m : (aclmdlRI)m;
        }
    } else if (terminate) {
        graph_unbind_all_locked(m);
        graph_forget_events_locked(m);
        if (m->root == NULL) {
            graph_model_teardown_locked(m);
        } else {
            m->state = GRAPH_INVALIDATED;
        }
        if (modelRI != NULL) {
            *modelRI = NULL;
        }
    }
    graph_unlock_and_free();
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

/* ---------------------------------------------------------- task groups */

aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream)
{
    static const char fn[] = "aclmdlRICaptureTaskGrpBegin";
    MOCK_ENTER(fn);
    aclError rc = graph_soc_check(fn, GRAPH_SOC_CAPTURE);
    mock_stream *s = NULL;
    if (rc == ACL_SUCCESS) {
        rc = stream_acquire(fn, stream, false, &s);
    }
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    graph_lock();
    graph_mstream *ms = capture_ms(s);
    if (ms == NULL || ms->m->state != GRAPH_CAPTURING) {
        rc = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
        why = "the stream is not capturing";
    } else if (ms->m->grp_recording != NULL) {
        rc = ACL_ERROR_STREAM_TASK_GROUP_STATUS;
        why = "a task group is already being recorded in this capture";
    } else {
        graph_group *g = calloc(1, sizeof(*g));
        if (g == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
        } else {
            g->magic = 0x47525047525031ull;
            g->m = ms->m;
            g->ms = ms;
            g->start = ms->n;
            ms->m->grp_recording = g;
        }
    }
    graph_unlock();
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle)
{
    static const char fn[] = "aclmdlRICaptureTaskGrpEnd";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    *handle = NULL;
    mock_stream *s = NULL;
    aclError rc = stream_acquire(fn, stream, false, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    graph_lock();
    graph_mstream *ms = capture_ms(s);
    graph_group *g = ms != NULL ? ms->m->grp_recording : NULL;
    if (ms == NULL) {
        rc = ACL_ERROR_RT_STREAM_NOT_CAPTURED;
        why = "the stream is not capturing";
    } else if (g == NULL || g->ms != ms) {
        rc = ACL_ERROR_STREAM_TASK_GROUP_STATUS;
        why = "no task group was begun on this stream";
    } else {
        ms->m->grp_recording = NULL;
        if (ms->m->state == GRAPH_INVALIDATED) {
            rc = ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED;
            why = "the capture was invalidated";
        } else if (g->err != ACL_SUCCESS) {
            rc = g->err;
            why = "a task of the group was refused (see the error of that call)";
        } else {
            g->n = ms->n - g->start;
            g->tasks = g->n ? malloc(g->n * sizeof(*g->tasks)) : NULL;
            if ((g->n && g->tasks == NULL) || !graph_group_register_locked(g)) {
                rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
                why = "out of host memory";
            } else {
                for (size_t i = 0; i < g->n; i++) {
                    g->tasks[i] = ms->tasks[g->start + i];
                    g->tasks[i]->grp = g;
                }
                g->ended = true;
                *handle = g;
            }
        }
        if (rc != ACL_SUCCESS) {
            free(g->tasks);
            free(g);
        }
    }
    graph_unlock();
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream, aclrtTaskGrp handle)
{
    static const char fn[] = "aclmdlRICaptureTaskUpdateBegin";
    MOCK_REQUIRE_NONNULL(fn, handle);
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_acquire(fn, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    graph_lock();
    graph_group *g = graph_group_find_locked(handle);
    void *b = stream_binding(s);
    if (g == NULL) {
        rc = ACL_ERROR_RT_PARAM_INVALID;
        why = "argument 'handle' is not a live task group";
    } else if (b != NULL && *(int *)b == BIND_UPDATE) {
        rc = ACL_ERROR_STREAM_TASK_GROUP_STATUS;
        why = "the stream is already recording an update";
    } else if (b != NULL) {
        rc = ACL_ERROR_STREAM_TASK_GROUP_STATUS;
        why = "the stream is capturing (or bound to a model): an update is recorded on a stream outside capture";
    } else if (g->updating) {
        rc = ACL_ERROR_STREAM_TASK_GROUP_STATUS;
        why = "the task group is already being updated";
    } else {
        graph_update *u = calloc(1, sizeof(*u));
        if (u == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
        } else {
            u->bind_kind = BIND_UPDATE;
            u->grp = g;
            u->s = s;
            g->updating = true;
            stream_set_binding(s, u);
            stream_capture_count(1);
        }
    }
    graph_unlock();
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}

/* The stream-ordered part of UpdateEnd: the group's tasks take the recorded
 * arguments (under the graph lock, which readers of a task hold, and the model's
 * xmu: a run fetches a task's arguments under it, so it sees either the old or
 * the new ones; the old ones are freed at the next run or with the model). A model
 * destroyed meanwhile (its group and tasks are gone; only the model's struct is
 * kept by our reference) drops the update. */
typedef struct apply_arg {
    graph_group *grp;
    graph_model *m;
    stream_task *tasks;
    size_t n;
    bool applied;
} apply_arg;

static aclError apply_task(void *p)
{
    apply_arg *a = p;
    graph_model *m = a->m;
    graph_lock();
    if (graph_model_find_locked(m) == NULL) {
        graph_unlock();
        return ACL_SUCCESS; /* the model was destroyed: apply_free frees the new arguments */
    }
    core_mutex_lock(&m->xmu);
    bool ok = true;
    if (m->nretired + a->n > m->capretired) {
        size_t ncap = m->capretired ? m->capretired * 2 : 16;
        while (ncap < m->nretired + a->n) {
            ncap *= 2;
        }
        stream_task *n = realloc(m->retired, ncap * sizeof(*n));
        ok = n != NULL;
        if (ok) {
            m->retired = n;
            m->capretired = ncap;
        }
    }
    if (ok) {
        for (size_t i = 0; i < a->n; i++) {
            graph_task *t = a->grp->tasks[i];
            if (t->t.free_arg != NULL) {
                m->retired[m->nretired++] = t->t;
            }
            t->t = a->tasks[i];
        }
        a->applied = true;
    }
    core_mutex_unlock(&m->xmu);
    graph_unlock();
    return ok ? ACL_SUCCESS : ACL_ERROR_RT_MEMORY_ALLOCATION;
}

static void apply_free(void *p)
{
    apply_arg *a = p;
    if (!a->applied) {
        for (size_t i = 0; i < a->n; i++) {
            if (a->tasks[i].free_arg != NULL) {
                a->tasks[i].free_arg(a->tasks[i].arg);
            }
        }
    }
    graph_lock();
    if (graph_model_find_locked(a->m) != NULL) {
        a->grp->updating = false; /* else the group went with its model */
    }
    graph_unlock();
    graph_model_put(a->m);
    free(a->tasks);
    free(a);
}

static bool same_kind(const stream_task *a, const stream_task *b)
{
    if (a->ops == NULL || b->ops == NULL) {
        return a->ops == b->ops && a->fn == b->fn;
    }
    return strcmp(a->ops->kind, b->ops->kind) == 0;
}

aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream)
{
    static const char fn[] = "aclmdlRICaptureTaskUpdateEnd";
    MOCK_ENTER(fn);
    mock_stream *s = NULL;
    aclError rc = stream_acquire(fn, stream, true, &s);
    if (rc != ACL_SUCCESS) {
        return rc;
    }
    const char *why = NULL;
    apply_arg *a = NULL;
    graph_lock();
    void *b = stream_binding(s);
    if (b == NULL || *(int *)b != BIND_UPDATE) {
        rc = ACL_ERROR_STREAM_TASK_GROUP_STATUS;
        why = "no update was begun on this stream (aclmdlRICaptureTaskUpdateBegin)";
        b = NULL;
    }
    graph_update *u = b;
    if (u != NULL) {
        stream_set_binding(s, NULL);
        stream_capture_count(-1);
        graph_group *g = u->grp;
        bool match = u->n == g->n;
        for (size_t i = 0; match && i < u->n; i++) {
            match = same_kind(&u->tasks[i], &g->tasks[i]->t);
        }
        a = match ? calloc(1, sizeof(*a)) : NULL;
        if (!match) {
            rc = ACL_ERROR_RT_MODEL_UPDATE_FAILED;
            why = "the tasks issued since UpdateBegin do not match the group (same count and types, in order)";
        } else if (a == NULL) {
            rc = ACL_ERROR_RT_MEMORY_ALLOCATION;
            why = "out of host memory";
        }
        if (rc != ACL_SUCCESS) {
            for (size_t i = 0; i < u->n; i++) {
                graph_defer_free_locked(&u->tasks[i]);
            }
            free(u->tasks);
            g->updating = false;
        } else {
            a->grp = g;
            a->m = g->m;
            a->tasks = u->tasks;
            a->n = u->n;
            graph_model_ref(g->m);
        }
        free(u);
    }
    graph_unlock_and_free();
    if (rc == ACL_SUCCESS) {
        rc = stream_enqueue(s, apply_task, a, apply_free);
        if (rc != ACL_SUCCESS) {
            why = "the stream refused the update task";
        }
    }
    stream_release(s);
    if (rc != ACL_SUCCESS) {
        return core_error(fn, rc, "%s", why);
    }
    return ACL_SUCCESS;
}
