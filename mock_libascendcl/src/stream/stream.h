/*
 * stream/stream.h - what the stream subsystem (src/stream/: stream, event,
 * callback) offers to the higher subsystems: resolving stream handles,
 * enqueueing tasks, blocking tasks that notice aborts; and to core the one
 * upward link, a context's default stream. Its hooks for aclFinalize and for
 * the work of a context are registered in stream/hooks.c. Every function
 * declared here starts with stream_. Helpers used only inside src/stream/ are
 * in stream/stream_private.h.
 */
#ifndef MOCK_STREAM_H
#define MOCK_STREAM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/core.h"


/* A task runs on the stream's worker thread in FIFO order. A nonzero return
 * puts the stream into its error state (reported by the next synchronize /
 * query; with ACL_STOP_ON_FAILURE later tasks are discarded). `free_arg` (may
 * be NULL) is called exactly once, after the task ran or was discarded. */
typedef aclError (*mock_task_fn)(void *arg);

/* Resolve a user handle; NULL means the default stream of the calling thread's
 * current context (107002 without one). Records and returns the error. */
MOCK_HIDDEN aclError stream_resolve(const char *func, aclrtStream handle, mock_stream **out);
MOCK_HIDDEN int32_t stream_device(const mock_stream *s);
/* (diagnostics, graph) The context a stream belongs to (identity only). */
MOCK_HIDDEN mock_context *stream_context(const mock_stream *s);
MOCK_HIDDEN aclError stream_enqueue(mock_stream *s, mock_task_fn fn, void *arg,
                                    void (*free_arg)(void *arg));
/* (diagnostics, additive) stream_enqueue with a description of the task for the
 * observers (core/core.h "tasks and observations": timing model, profiler, race
 * sanitizer, dump); `desc` may be NULL (MOCK_TASK_OTHER) and is read during the call
 * only. stream_enqueue(...) is stream_enqueue_desc(..., NULL). */
MOCK_HIDDEN aclError stream_enqueue_desc(mock_stream *s, mock_task_fn fn, void *arg,
                                         void (*free_arg)(void *arg), const mock_task_desc *desc);
/* Creates the default stream of a new context; destroys it (waiting for its
 * work) when the context goes away. The one upward link of the layers:
 * core/context.c calls these two (README "Source layout"). */
MOCK_HIDDEN mock_stream *stream_create_default(mock_context *ctx);
MOCK_HIDDEN void stream_destroy_default(mock_stream *s);
/* (streams, additive) stream_enqueue calls free_arg exactly once in all
 * cases: also when the enqueue itself fails (the task is then discarded), so
 * callers must not free `arg` themselves after a failed enqueue. */
/* The per-stream overflow switch, shared by aclrtSet/GetStreamOverflowSwitch
 * (overflow.c) and ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK (stream.c). */
MOCK_HIDDEN uint32_t stream_get_overflow_switch(const mock_stream *s);
MOCK_HIDDEN void stream_set_overflow_switch(mock_stream *s, uint32_t on);
/* (shared helpers) For tasks that block a stream: like core_cond_wait_until,
 * but when called on a stream worker thread it also returns ECANCELED as soon
 * as the worker's stream is aborted (destroy-force / aclrtStreamAbort). */
MOCK_HIDDEN int stream_task_wait(pthread_cond_t *cv, mock_mutex *mu, const struct timespec *deadline);
/* (ipc, additive) The same for a 32-bit word another process may change (shared
 * futex, core_futex_wait): sleeps while *word == seen; ETIMEDOUT at `deadline`,
 * ECANCELED when the worker's stream is aborted, else 0 (recheck). */
MOCK_HIDDEN int stream_task_wait_word(_Atomic uint32_t *word, uint32_t seen, const struct timespec *deadline);
/* (streams, additive) True for an ACL_STREAM_PERSISTENT stream: what is
 * enqueued on it is captured, never run (its free_arg runs when the stream is
 * destroyed), so a caller must not wait for such a task to complete. */
MOCK_HIDDEN bool stream_is_persistent(const mock_stream *s);

/* ------------------------------------------------ capture port (capture.c)
 * Stream capture and model building (aclmdlRI*, the graph subsystem above
 * mem) happen at the enqueue point: a stream can carry a *binding* (an
 * opaque pointer the graph subsystem sets while the stream captures, is bound
 * to a model being built, or records a task-group update); stream_enqueue on
 * such a stream hands the task to the registered port instead of queueing it.
 * Lower layers ask the port whether a capture forbids a call. Nothing here
 * knows what a model is: the graph subsystem registers the port (its
 * constructor) and owns every decision. */

/* What a task is, for capture introspection and update (aclmdlRITask*).
 * Static storage, one per kind of task; NULL ops = an opaque task of type
 * ACL_MODEL_RI_TASK_DEFAULT. */
typedef struct stream_task_ops {
    const char *kind;  /* "memcpy", "memset", "value_write", ...: update matching */
    int type;          /* aclmdlRITaskType */
    bool group_ok;     /* may be recorded inside a task group (single-operator task) */
    /* Optional: read / write the union part of aclmdlRITaskParams (the type is
     * already checked). set may fail (recorded under fn). */
    aclError (*get_params)(void *arg, aclmdlRITaskParams *p);
    aclError (*set_params)(const char *fn, void *arg, const aclmdlRITaskParams *p);
} stream_task_ops;

typedef struct stream_task {
    mock_task_fn fn;
    void *arg;
    void (*free_arg)(void *arg);
    const stream_task_ops *ops;
} stream_task;

/* Calls the port's checks answer for. */
typedef enum stream_capture_call {
    STREAM_CALL_SYNC_STREAM,   /* synchronize / query `s` */
    STREAM_CALL_SYNC_CONTEXT,  /* synchronize the device / context of `obj` (a mock_context) */
    STREAM_CALL_SYNC_EVENT,    /* synchronize / query event `obj` */
    STREAM_CALL_BLOCKING_COPY, /* aclrtMemcpy / Memset / Memcpy2d (synchronous) */
    STREAM_CALL_PAGEABLE_COPY, /* an async copy touching pageable host memory on `s` */
    STREAM_CALL_DEFAULT_STREAM /* a task submitted to the default stream `s` */
} stream_capture_call;

/* Event operations routed to the port while a capture is active. */
typedef enum stream_capture_event_op {
    STREAM_EVENT_RECORD,
    STREAM_EVENT_WAIT,
    STREAM_EVENT_RESET
} stream_capture_event_op;

typedef struct stream_capture_port {
    /* A task for a stream with a binding. Owns t (frees t->arg on failure). */
    aclError (*enqueue)(mock_stream *s, void *binding, const stream_task *t);
    /* 0, or the error (recorded under fn) a capture makes of this call. */
    aclError (*check)(const char *fn, stream_capture_call call, mock_stream *s, const void *obj);
    /* A record / wait / reset of `event` on `s`. *handled = true when the port
     * took the operation (recorded it in a capture); else the caller runs it
     * normally. `task` is the task the caller would enqueue (the port may keep
     * it for an external record / wait; otherwise it frees it). */
    aclError (*event)(const char *fn, stream_capture_event_op op, mock_stream *s, aclrtEvent event,
                      uint32_t event_flags, uint32_t op_flag, const stream_task *task, bool *handled);
    /* An event handle is destroyed (the port forgets it). */
    void (*event_gone)(aclrtEvent event);
} stream_capture_port;

MOCK_HIDDEN void stream_capture_register(const stream_capture_port *port);
/* Number of captures, bindings and updates in progress (cheap, atomic):
 * every check below returns at once when it is 0. */
MOCK_HIDDEN void stream_capture_count(int delta);
MOCK_HIDDEN bool stream_capture_any(void);
MOCK_HIDDEN aclError stream_capture_check(const char *fn, stream_capture_call call, mock_stream *s, const void *obj);
/* Offers an event operation to the port (see stream_capture_port.event). Always
 * takes `task`: kept by the port or freed, also when no capture is active any more. */
MOCK_HIDDEN aclError stream_capture_event(const char *fn, stream_capture_event_op op, mock_stream *s,
                                          aclrtEvent event, uint32_t event_flags, uint32_t op_flag,
                                          const stream_task *task, bool *handled);
MOCK_HIDDEN void stream_capture_event_gone(aclrtEvent event);
/* The binding of a stream (NULL: none). Set and cleared by the graph
 * subsystem only, under its own lock. */
MOCK_HIDDEN void stream_set_binding(mock_stream *s, void *binding);
MOCK_HIDDEN void *stream_binding(const mock_stream *s);
/* Like stream_enqueue, with what the task is (for a capture). */
MOCK_HIDDEN aclError stream_enqueue_task(mock_stream *s, const stream_task *t);
/* (diagnostics, additive) stream_enqueue_task with a description of the task for
 * the observers, like stream_enqueue_desc (`desc` may be NULL; not observed when
 * the stream hands the task to a capture). */
MOCK_HIDDEN aclError stream_enqueue_task_desc(mock_stream *s, const stream_task *t, const mock_task_desc *desc);
/* Stream facts the graph subsystem needs. */
MOCK_HIDDEN bool stream_is_default(const mock_stream *s);
MOCK_HIDDEN uint32_t stream_cache_op_info(const mock_stream *s);
/* Resolve a user handle with a reference held (release with stream_release);
 * `submit` as for stream_get. NULL is the default stream. */
MOCK_HIDDEN aclError stream_acquire(const char *func, aclrtStream handle, bool submit, mock_stream **out);
MOCK_HIDDEN void stream_release(mock_stream *s);
MOCK_HIDDEN int32_t stream_id(const mock_stream *s);
/* True when `s` is the stream whose worker the calling thread is (or a
 * model executor running for it). */
MOCK_HIDDEN bool stream_is_worker_of(const mock_stream *s);

/* (ipc, additive) IPC events, for src/ipc/ (aclrtIpcGetEventHandle / OpenEventHandle,
 * acl_next_semantics.md §3.3). Export: `event` is a live ACL_EVENT_IPC event created in
 * this process; *id = its id, the generation an acquire checks. Records and returns
 * 107000 (not live, not IPC, opened from another process) or 207000 (no shareable
 * memory). */
MOCK_HIDDEN aclError stream_event_ipc_export(const char *fn, aclrtEvent event, uint32_t *id);
/* Broker side: the event `event` with id `id` is still alive (not destroyed): takes a
 * reference (*obj, dropped by stream_event_ipc_put) and gives where its shared state is
 * (*fd, *offset). Returns ACL_SUCCESS or ACL_ERROR_RT_IPC_ERROR; records no error. */
MOCK_HIDDEN aclError stream_event_ipc_acquire(aclrtEvent event, uint32_t id, void **obj, int *fd,
                                              uint64_t *offset);
MOCK_HIDDEN void stream_event_ipc_put(void *obj);
/* Importer: a new event of the current context on the shared state `state` (mapped by
 * the caller); release(arg) runs when the event is freed (unmap, tell the creator). On
 * failure nothing is kept: the caller releases `state` itself. */
MOCK_HIDDEN aclError stream_event_ipc_open(const char *fn, void *state, void (*release)(void *arg), void *arg,
                                           aclrtEvent *out);

#endif /* MOCK_STREAM_H */
