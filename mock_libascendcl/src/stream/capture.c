/*
 * capture.c - the stream side of stream capture and model building
 * (aclmdlRI*): the port through which the graph subsystem (src/graph/, a
 * higher layer) receives the tasks of bound streams and answers whether an
 * active capture forbids a call. The stream layer never calls the graph
 * subsystem by name: the graph registers the port from its constructor, the
 * same dependency inversion as the core_subsystem hooks (README "Source
 * layout"). Without a registered port nothing is ever bound and every check
 * passes.
 */
#include <stdatomic.h>

#include "core/core.h"
#include "stream/stream.h"
#include "stream/stream_private.h"

static _Atomic(const stream_capture_port *) g_port;
/* Captures, bindings and updates in progress: the checks are free when 0. */
static atomic_int g_active;

void stream_capture_register(const stream_capture_port *port)
{
    atomic_store(&g_port, port);
}

void stream_capture_count(int delta)
{
    atomic_fetch_add(&g_active, delta);
}

bool stream_capture_any(void)
{
    return atomic_load_explicit(&g_active, memory_order_relaxed) > 0;
}

aclError stream_capture_check(const char *fn, stream_capture_call call, mock_stream *s, const void *obj)
{
    const stream_capture_port *p = atomic_load(&g_port);
    if (p == NULL || !stream_capture_any()) {
        return ACL_SUCCESS;
    }
    return p->check(fn, call, s, obj);
}

aclError stream_capture_event(const char *fn, stream_capture_event_op op, mock_stream *s, aclrtEvent event,
                              uint32_t event_flags, uint32_t op_flag, const stream_task *task, bool *handled)
{
    *handled = false;
    const stream_capture_port *p = atomic_load(&g_port);
    if (p == NULL || !stream_capture_any()) {
        /* the last capture ended since the caller looked: the task is ours to free
         * (an event reference it holds would otherwise keep the event forever) */
        if (task->free_arg != NULL) {
            task->free_arg(task->arg);
        }
        return ACL_SUCCESS;
    }
    return p->event(fn, op, s, event, event_flags, op_flag, task, handled);
}

void stream_capture_event_gone(aclrtEvent event)
{
    const stream_capture_port *p = atomic_load(&g_port);
    if (p != NULL && p->event_gone != NULL) {
        p->event_gone(event);
    }
}

aclError stream_capture_enqueue(mock_stream *s, void *binding, const stream_task *t)
{
    const stream_capture_port *p = atomic_load(&g_port);
    if (p == NULL) {
        if (t->free_arg != NULL) {
            t->free_arg(t->arg);
        }
        return ACL_ERROR_RT_INTERNAL_ERROR;
    }
    return p->enqueue(s, binding, t);
}
