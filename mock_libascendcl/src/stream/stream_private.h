/*
 * stream/stream_private.h - private glue between stream.c, event.c and
 * callback.c; no file outside src/stream/ includes it. Other subsystems use
 * stream/stream.h. Every function declared here starts with stream_.
 */
#ifndef MOCK_STREAM_PRIVATE_H
#define MOCK_STREAM_PRIVATE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"
#include "stream/stream.h"

/* ------------------------------------------------------------- streams */

/* Resolve with a reference held (release with stream_put). `submit`:
 * the call enqueues work, which needs a current context on the stream's
 * device (107002 / 107003); otherwise any thread may use the handle. */
MOCK_HIDDEN aclError stream_get(const char *func, aclrtStream handle, bool submit, mock_stream **out);
MOCK_HIDDEN void stream_ref(mock_stream *s);
MOCK_HIDDEN void stream_put(mock_stream *s);
MOCK_HIDDEN int32_t stream_get_id(const mock_stream *s);
/* True when called from a stream worker whose stream is being aborted
 * (aclrtDestroyStreamForce, aclrtStreamAbort/Stop): a task that blocks for a
 * long time (aclrtValueWait) should poll this every few ms and return. */
MOCK_HIDDEN bool stream_task_cancelled(void);
/* On a stream worker running an observed task: the task's modeled time in ns (timing
 * model, core_obs.out_time_ns); otherwise `fallback`. Event records use it as their
 * timestamp. */
MOCK_HIDDEN uint64_t stream_task_time_ns(uint64_t fallback);

/* Hooks (registered in stream/hooks.c, run by core): */
/* ctx_sync: waits for every stream of `ctx` (device synchronize), the streams
 * destroyed by force included. timeout_ms -1 = forever. */
MOCK_HIDDEN aclError stream_sync_context(mock_context *ctx, int64_t timeout_ms);
/* ctx_abort: aclrtStreamAbort on every stream of `ctx` (default one included):
 * discards the tasks not started yet, interrupts waiting tasks (event waits,
 * value waits), clears stream errors; streams stay usable. For
 * aclrtDeviceTaskAbort. Must not be called from a stream worker. */
MOCK_HIDDEN void stream_abort_context(mock_context *ctx);
/* ctx_teardown: destroys (after draining) every explicit stream still alive on
 * `ctx` (the default stream goes with the context: stream_destroy_default). */
MOCK_HIDDEN void stream_destroy_context(mock_context *ctx);

/* ------------------------------------------------------------ capture.c */

/* stream_enqueue on a stream with a binding: hands the task to the port
 * (frees it when no port is registered or the port refuses it). */
MOCK_HIDDEN aclError stream_capture_enqueue(mock_stream *s, void *binding, const stream_task *t);

/* ----------------------------------------------------------- callback.c */

/* Drops every report/host-func subscription of a stream being destroyed and
 * cancels its queued callbacks (waking blocked workers). */
MOCK_HIDDEN void stream_callbacks_stream_gone(mock_stream *s);
/* True if the calling thread processes reports or host funcs of stream s. */
MOCK_HIDDEN bool stream_callbacks_served_by_caller(const mock_stream *s);
/* quiesce hook of aclFinalize: drops every report subscription, before the
 * contexts with their streams are torn down. */
MOCK_HIDDEN void stream_callbacks_finalize(void);

/* -------------------------------------------------------------- event.c */

/* release hook of aclFinalize (after the contexts are gone): destroys every
 * event still alive (events are not owned by a context). */
MOCK_HIDDEN void stream_events_finalize(void);

#endif /* MOCK_STREAM_PRIVATE_H */
