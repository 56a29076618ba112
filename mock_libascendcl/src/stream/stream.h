/*
 * stream/stream.h - what the stream subsystem (src/stream/: stream, event,
 * callback) offers to the other subsystems: resolving stream handles,
 * enqueueing tasks, synchronizing and tearing down the streams of a context,
 * finalize hooks. Every function declared here starts with stream_. Helpers
 * used only inside src/stream/ are in stream/stream_private.h.
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
 * work) when the context goes away. */
MOCK_HIDDEN mock_stream *stream_create_default(mock_context *ctx);
MOCK_HIDDEN void stream_destroy_default(mock_stream *s);
/* Waits for every stream of `ctx` (device synchronize). timeout_ms -1 = forever. */
MOCK_HIDDEN aclError stream_sync_context(mock_context *ctx, int32_t timeout_ms);
/* Destroys (after draining) every stream still alive on `ctx`. */
MOCK_HIDDEN void stream_destroy_context(mock_context *ctx);
/* (streams, additive) stream_enqueue calls free_arg exactly once in all
 * cases: also when the enqueue itself fails (the task is then discarded), so
 * callers must not free `arg` themselves after a failed enqueue. */
/* The per-stream overflow switch, shared by aclrtSet/GetStreamOverflowSwitch
 * (overflow.c) and ACL_STREAM_ATTR_FLOAT_OVERFLOW_CHECK (stream.c). */
MOCK_HIDDEN uint32_t stream_get_overflow_switch(const mock_stream *s);
MOCK_HIDDEN void stream_set_overflow_switch(mock_stream *s, uint32_t on);
/* (streams, additive) aclrtStreamAbort on every stream of `ctx` (default one
 * included): discards the tasks not started yet, interrupts waiting tasks
 * (event waits, value waits), clears stream errors; streams stay usable.
 * For aclrtDeviceTaskAbort. Must not be called from a stream worker. */
MOCK_HIDDEN void stream_abort_context(mock_context *ctx);
/* (shared helpers) For tasks that block a stream: like core_cond_wait_until,
 * but when called on a stream worker thread it also returns ECANCELED as soon
 * as the worker's stream is aborted (destroy-force / aclrtStreamAbort). */
MOCK_HIDDEN int stream_task_wait(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline);
/* The stream whose worker is the calling thread, or NULL. */
MOCK_HIDDEN mock_stream *stream_self(void);
/* (streams, additive) True for an ACL_STREAM_PERSISTENT stream: what is
 * enqueued on it is captured, never run (its free_arg runs when the stream is
 * destroyed), so a caller must not wait for such a task to complete. */
MOCK_HIDDEN bool stream_is_persistent(const mock_stream *s);
/* (streams, additive) True when the calling thread is the worker of a stream of
 * `ctx` / of a stream on `device`: a call made from a task (host function,
 * callback run on the worker) that would tear down or wait for those streams
 * would wait for itself, so the entry points refuse it (107000) instead of
 * deadlocking. */
MOCK_HIDDEN bool stream_self_in_context(const mock_context *ctx);
MOCK_HIDDEN bool stream_self_on_device(int32_t device);

/* Shared front of aclrtSynchronize{Device,Stream,Event}[WithTimeout] (stream.c): checks
 * `timeout` with core_check_timeout (the variants without a timeout pass -1), runs the
 * fault hook of `fn`, then returns sync(fn, handle, ms) (ms -1 = forever). */
typedef aclError (*mock_sync_fn)(const char *fn, void *handle, int64_t timeout_ms);
MOCK_HIDDEN aclError stream_sync_with_timeout(const char *fn, void *handle, int32_t timeout, mock_sync_fn sync);

/* Called by aclFinalize (core/init.c): stream_callbacks_finalize first, then
 * (after core_devices_finalize destroyed the contexts with their streams)
 * stream_events_finalize, which destroys every event still alive, since
 * aclFinalize releases all resources (events are not owned by a context). */
MOCK_HIDDEN void stream_callbacks_finalize(void);
MOCK_HIDDEN void stream_events_finalize(void);

#endif /* MOCK_STREAM_H */
