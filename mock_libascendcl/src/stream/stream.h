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
MOCK_HIDDEN aclError stream_enqueue(mock_stream *s, mock_task_fn fn, void *arg,
                                    void (*free_arg)(void *arg));
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
